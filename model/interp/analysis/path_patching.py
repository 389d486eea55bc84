"""Path patching (Wang et al., 2022; :mod:`model.interp.analysis.patching`'s docstring gives the
definitions): how much of one sender head's effect goes through each later head's queries, keys or
values (:func:`path_patch`), and several paths at once (:func:`path_patch_joint`). Re-exported by
:mod:`model.interp.analysis.patching`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.patch_runs import (
    CHUNK_TOKENS,
    _metric_tokens,
    _same_length,
    as_ids,
    cache_activations,
)
from model.interp.trace import eval_mode
from model.progress import report

PATH_INPUTS = ("q", "k", "v")


class _Stop(Exception):
    """Ends a forward pass once a hook has what it came for."""


def path_unsupported(config) -> str | None:
    """Why path patching cannot run on a model of ``config`` (None: it can)."""
    if config.normalization.norm_position == "post":
        return (
            "path patching needs the sender's write to reach later heads as it is: a Post-LN block "
            "renormalises the whole stream after it"
        )
    return None


@dataclass
class PathPatching:
    """Path patching of one ``sender`` (layer, head) (module docstring).

    ``effects`` [3, L, H]: the change of ``m`` when the sender's clean write reaches only head (ℓ, h)'s
    queries, keys or values (:data:`PATH_INPUTS`), NaN for the layers up to the sender's; ``direct``:
    when it reaches only the final norm; ``total``: plain patching of the sender's output;
    ``clean_diff`` / ``corrupt_diff``, ``answer`` / ``wrong`` and ``position`` as in :class:`Patching`.
    """

    sender: tuple[int, int]
    effects: np.ndarray
    direct: float
    total: float
    clean_diff: float
    corrupt_diff: float
    answer: int
    wrong: int
    position: int

    @property
    def gap(self) -> float:
        """``m(clean) − m(corrupted)``: what the restored fractions are fractions of."""
        return self.clean_diff - self.corrupt_diff

    def restored(self, value):
        """A change of ``m`` (or an array of them) as a fraction of the gap (NaN without a gap)."""
        gap = self.gap
        return np.asarray(value, dtype=np.float64) / gap if gap != 0 else np.full(np.shape(value), np.nan)

    @property
    def interaction(self) -> float:
        """``total − direct − Σ effects``: what no single path carries (MLPs, two-head paths, the
        curvature of softmax and norms); 0 to first order when nothing else reads the sender."""
        return float(self.total - self.direct - np.nansum(self.effects))

    def arrays(self) -> dict[str, np.ndarray]:
        """The numbers as plain arrays (no pickles)."""
        return {
            "sender": np.array(self.sender, dtype=np.int64),
            "inputs": np.array(PATH_INPUTS, dtype=str),
            "path_effects": self.effects.astype(np.float64),
            "path_restored": self.restored(self.effects),
            "direct_effect": np.float64(self.direct),
            "total_effect": np.float64(self.total),
            "interaction": np.float64(self.interaction),
            "clean_logit_diff": np.float64(self.clean_diff),
            "corrupt_logit_diff": np.float64(self.corrupt_diff),
            "answer": np.array([self.answer, self.wrong], dtype=np.int64),
            "position": np.int64(self.position),
        }


class _PathRuns:
    """The cached activations and the sender's write ``Δ`` of one (clean, corrupted, sender)."""

    def __init__(self, model, clean, corrupt, sender, position, tokenizer):
        cfg = model.config
        reason = path_unsupported(cfg)
        if reason:
            raise ValueError(reason)
        clean, corrupt = as_ids(model, clean, tokenizer), as_ids(model, corrupt, tokenizer)
        _same_length(clean, corrupt)
        T = corrupt.shape[1]
        if not -T <= position < T:
            raise ValueError(f"position {position} is outside a prompt of {T} tokens")
        L, H = cfg.core.n_layers, cfg.attention.n_heads
        ls, hs = (int(x) for x in sender)
        if not (0 <= ls < L and 0 <= hs < H):
            raise ValueError(f"the sender L{ls}H{hs} is not one of the model's {L} layers × {H} heads")
        self.model, self.corrupt, self.T, self.position = model, corrupt, T, position % T
        self.sender, self.L, self.H = (ls, hs), L, H
        z = f"blocks.{ls}.attn.z"
        self.clean_cache, clean_logits = cache_activations(model, clean, [z])
        names = [f"blocks.{l}.resid_pre" for l in range(ls, L)] + [z]
        names += [f"blocks.{l}.attn.{i}" for l in range(ls + 1, L) for i in PATH_INPUTS]
        self.cache, corrupt_logits = cache_activations(model, corrupt, names)
        self.clean_row = clean_logits[0, self.position].double()
        self.corrupt_row = corrupt_logits[0, self.position].double()
        self.delta = self._sender_write()

    def _sender_write(self) -> torch.Tensor:
        """``Δ`` [1, T, d]: the sender's layer's write with its clean output, less with its corrupted one."""
        ls, hs = self.sender
        clean_z = self.clean_cache[f"blocks.{ls}.attn.z"][0, hs]
        got: dict[str, torch.Tensor] = {}

        def patch_z(z, hook):
            z = z.clone()
            z[1, hs] = clean_z.to(z.dtype)
            return z

        def keep(x, hook):
            got["mid"] = x.detach().clone()
            raise _Stop

        resid = self.cache[f"blocks.{ls}.resid_pre"]
        with (
            contextlib.suppress(_Stop),
            self.model.hooks([(f"blocks.{ls}.attn.z", patch_z), (f"blocks.{ls}.resid_mid", keep)]),
        ):
            self.model.forward_from(ls, resid.expand(2, *resid.shape[1:]))
        return (got["mid"][1] - got["mid"][0])[None]

    def logits_from(self, layer: int, resid: torch.Tensor, hooks: list) -> torch.Tensor:
        """float64 [n, V]: the position read, of a run from block ``layer`` on ``resid`` [n, T, d]."""
        p = self.position
        hooks = [*hooks, ("ln_final", lambda x, hook: x[:, p : p + 1])]
        with self.model.hooks(hooks):
            return self.model.forward_from(layer, resid)[:, 0].double()

    def receiver_outputs(self, layer: int, inputs: Sequence[frozenset]) -> torch.Tensor:
        """``z`` [n, H, T, d_v] of block ``layer`` when it reads ``resid_pre + Δ`` in the inputs of row i's
        set ``inputs[i]`` and its corrupted activations in the others."""
        n = len(inputs)
        got: dict[str, torch.Tensor] = {}

        def frozen(name):
            corrupt = self.cache[f"blocks.{layer}.attn.{name}"][0]
            rows = [i for i, wanted in enumerate(inputs) if name not in wanted]

            def fn(x, hook):
                if not rows:
                    return None
                x = x.clone()
                x[rows] = corrupt.to(x.dtype)
                return x

            return fn

        def keep(z, hook):
            got["z"] = z.detach().clone()
            raise _Stop

        hooks = [(f"blocks.{layer}.attn.{name}", frozen(name)) for name in PATH_INPUTS]
        hooks.append((f"blocks.{layer}.attn.z", keep))
        resid = self.cache[f"blocks.{layer}.resid_pre"] + self.delta
        with contextlib.suppress(_Stop), self.model.hooks(hooks):
            self.model.forward_from(layer, resid.expand(n, *resid.shape[1:]))
        return got["z"]


def _z_setter(rows: list[tuple[int, int, torch.Tensor]]):
    """A hook on ``attn.z`` writing ``value`` [T, d_v] into head ``h`` of batch row ``row``, for each
    (row, h, value)."""

    def fn(z, hook):
        z = z.clone()
        for row, h, value in rows:
            z[row, h] = value.to(z.dtype)
        return z

    return fn


@torch.no_grad()
def path_patch(
    model,
    clean,
    corrupt,
    sender: tuple[int, int],
    *,
    answer: int | None = None,
    wrong: int | None = None,
    position: int = -1,
    layers: Sequence[int] | None = None,
    max_batch: int | None = None,
    tokenizer=None,
) -> PathPatching:
    """Path patching of ``sender`` (layer, head) through the queries, keys and values of every head of
    ``layers`` (default: every later layer), with its direct and total effects (:class:`PathPatching`,
    module docstring; ``effects`` is NaN outside ``layers``).

    Prompts as in :func:`as_ids`; the metric's tokens as :func:`patch_heads` chooses them. One partial
    forward per receiver layer finds the receivers' new outputs (q, k and v as three batch rows), then
    ``3·H`` batched runs per receiver layer, each from that layer on (``max_batch`` rows at a time,
    default :data:`CHUNK_TOKENS` tokens), measure them: a layer ℓ costs ``3·H·(L − ℓ)`` blocks of the
    prompt."""
    with eval_mode(model):
        run = _PathRuns(model, clean, corrupt, sender, position, tokenizer)
        answer, wrong = _metric_tokens(run.clean_row, run.corrupt_row, answer, wrong)
        m_clean = float(run.clean_row[answer] - run.clean_row[wrong])
        m_corrupt = float(run.corrupt_row[answer] - run.corrupt_row[wrong])
        L, H, T = run.L, run.H, run.T
        ls, hs = run.sender

        def m(logits: torch.Tensor) -> np.ndarray:
            return (logits[:, answer] - logits[:, wrong]).cpu().numpy() - m_corrupt

        clean_z = run.clean_cache[f"blocks.{ls}.attn.z"][0, hs]
        resid = run.cache[f"blocks.{ls}.resid_pre"]
        total = m(run.logits_from(ls, resid, [(f"blocks.{ls}.attn.z", _z_setter([(0, hs, clean_z)]))]))[0]
        last = run.cache[f"blocks.{L - 1}.resid_pre"]
        delta = run.delta
        direct = m(run.logits_from(L - 1, last, [(f"blocks.{L - 1}.resid_post", lambda x, h: x + delta)]))[0]
        effects = np.full((len(PATH_INPUTS), L, H), np.nan)
        chunk = max(1, int(max_batch) if max_batch else CHUNK_TOKENS // T)
        wanted = range(ls + 1, L) if layers is None else sorted({int(x) for x in layers})
        runs, done = len(wanted) * len(PATH_INPUTS) * H, 0
        report(0, runs, "runs")
        for layer in wanted:
            if not ls < layer < L:
                raise ValueError(f"receiver layer {layer}: not a layer after the sender's ({ls}) of {L}")
            z = run.receiver_outputs(layer, [frozenset({name}) for name in PATH_INPUTS])  # [3, H, T, d_v]
            jobs = [(c, h) for c in range(len(PATH_INPUTS)) for h in range(H)]
            resid = run.cache[f"blocks.{layer}.resid_pre"]
            for start in range(0, len(jobs), chunk):
                part = jobs[start : start + chunk]
                setter = _z_setter([(row, h, z[c, h]) for row, (c, h) in enumerate(part)])
                got = m(run.logits_from(layer, resid.expand(len(part), *resid.shape[1:]),
                                        [(f"blocks.{layer}.attn.z", setter)]))  # fmt: skip
                for (c, h), value in zip(part, got):
                    effects[c, layer, h] = value
                done += len(part)
                report(done, runs, "runs")
    return PathPatching(
        (ls, hs), effects, float(direct), float(total), m_clean, m_corrupt, answer, wrong, run.position
    )


@torch.no_grad()
def path_patch_joint(
    model,
    clean,
    corrupt,
    sender: tuple[int, int],
    receivers: Sequence[tuple[int, int, str]],
    *,
    direct: bool = False,
    answer: int | None = None,
    wrong: int | None = None,
    position: int = -1,
    tokenizer=None,
) -> float:
    """The change of ``m`` when the sender's write reaches all of ``receivers`` — (layer, head, inputs)
    with inputs a string of ``q``, ``k``, ``v`` (``"qkv"``: all three) — and, with ``direct``, the
    final norm, at once, in one run (module docstring: identity 1)."""
    with eval_mode(model):
        run = _PathRuns(model, clean, corrupt, sender, position, tokenizer)
        answer, wrong = _metric_tokens(run.clean_row, run.corrupt_row, answer, wrong)
        m_corrupt = float(run.corrupt_row[answer] - run.corrupt_row[wrong])
        L, ls = run.L, run.sender[0]
        by_layer: dict[int, list[tuple[int, frozenset]]] = {}
        for layer, head, inputs in receivers:
            wanted = frozenset(inputs.lower())
            if not ls < int(layer) < L or not wanted or not wanted <= set(PATH_INPUTS):
                raise ValueError(
                    f"receiver L{layer}H{head} {inputs!r}: a later layer's head and some of q, k, v"
                )
            by_layer.setdefault(int(layer), []).append((int(head), wanted))
        hooks = []
        for layer, heads in sorted(by_layer.items()):
            z = run.receiver_outputs(layer, [wanted for _, wanted in heads])
            hooks.append(
                (f"blocks.{layer}.attn.z", _z_setter([(0, h, z[i, h]) for i, (h, _) in enumerate(heads)]))
            )
        if direct:
            delta = run.delta
            hooks.append((f"blocks.{L - 1}.resid_post", lambda x, h: x + delta))
        if not hooks:
            return 0.0
        start = min(by_layer, default=L - 1)
        logits = run.logits_from(start, run.cache[f"blocks.{start}.resid_pre"], hooks)
    return float(logits[0, answer] - logits[0, wrong]) - m_corrupt
