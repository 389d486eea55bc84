"""Activation patching: which head (or residual-stream position) carries the answer?

Two prompts of the same length ``T``: a **clean** one (``"When Mary and John went to the store, John
gave a drink to"``, answer ``" Mary"``) and a **corrupted** one (the names swapped, answer ``" John"``).
The answer metric is the logit difference at one position ``p`` (the last by default)::

    m(run) = logit[p, answer] − logit[p, wrong]

(by default ``answer`` = the clean run's top token at ``p``, ``wrong`` = the corrupted run's, or its
runner-up when both runs predict the same token). Patching
copies one activation of the clean run into the corrupted run and measures how much of the gap it
closes::

    restored = (m(corrupted with clean activation) − m(corrupted)) / (m(clean) − m(corrupted))

1 means that activation alone carries everything the clean prompt adds; 0 means it carries nothing;
negative values push the other way. (NaN when ``m(clean) = m(corrupted)``: there is no gap to close.)

* :func:`patch_heads` patches one head's output ``z_h`` (``blocks.l.attn.z[:, h]``, every position,
  before ``W_O``) per run → ``restored`` [L, H];
* :func:`patch_resid` patches the residual stream entering block ``l`` at one position
  (``blocks.l.resid_pre[:, t]``) per run → ``restored`` [L, T].
* :func:`run_patched` is the engine: any list of runs, each a set of (hook point, index) patches.

**Path patching** (Wang et al., 2022, "Interpretability in the Wild"): how much of one *sender* head's
effect goes *through* a later *receiver* head's queries, keys or values. Every run is the corrupted
prompt's. The sender's clean output changes what its layer writes into the stream by::

    Δ = resid_mid_ℓs(corrupted, z_s ← clean z_s) − resid_mid_ℓs(corrupted)          [T, d]

(``z_s W_O`` in a Pre-LN block; through the output norm in a sandwich or output block). With everything
else frozen, the receiver ``r`` in a later layer ``ℓr`` reads ``resid_pre_ℓr(corrupted) + Δ`` in one
input ``ι ∈ {q, k, v}`` only (its other inputs keep their corrupted values); its new output replaces
its corrupted one, and the model runs on from there. With ``m`` the logit difference above::

    effect(s → r.ι) = m(corrupted, z_r ← z_r with ι reading + Δ) − m(corrupted)
    direct(s)       = m(corrupted, resid_post_{L−1} + Δ) − m(corrupted)   only the final norm reads Δ
    total(s)        = m(corrupted, z_s ← clean z_s) − m(corrupted)        plain head patching

:func:`path_patch` measures every later head's three inputs for one sender (``effects`` [3, L, H]),
the direct and the total effect; :func:`path_patch_joint` routes Δ to several receivers' inputs (and
the final norm) in one run. Two identities hold, and are tested:

1. **exact**: when the sender's only readers are the receivers' inputs and the final norm (the sender
   in the layer before the last, and no MLP reading the stream: e.g. its weights zero), patching every
   receiver's q, k and v and the direct path jointly *is* plain head patching:
   ``joint(all receivers, q+k+v, direct) = total``;
2. **first order**: in that setting, ``total = direct + Σ_r Σ_ι effect(s → r.ι) + O(‖Δ‖²)``: for a
   small write the paths add up. ``PathPatching.interaction`` (total − direct − Σ effects) is what no
   single path carries: MLPs, paths through two heads, the curvature of softmax and norms.

Post-LN models are refused (every block renormalises the whole stream after the sender's write).

Speed: the ``N`` patched runs are one forward over ``N`` copies of the corrupted prompt, each batch
row patching its own activation (in chunks of ``max_batch`` rows, by default about 8192 tokens a chunk,
to bound memory); a run patching block ``l`` first starts at block ``l``
(:meth:`~model.nn.gpt.GPT.forward_from` on the corrupted run's ``blocks.l.resid_pre``: the blocks
before it would compute the same), which halves a sweep over every layer; only the position read is
unembedded (a [N, T, V] block of logits would be
1.8 GB for 144 runs of 64 tokens of GPT-2's vocabulary). Patching ``attn.z`` or ``resid_pre`` keeps
the fused attention kernel. All runs are
in evaluation mode under ``torch.no_grad``; the model's mode is restored afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.interp.trace import eval_mode

#: One patch: (hook point name, index into the activation *after* the batch axis); ``()`` = all of it.
Patch = tuple[str, tuple]

#: Tokens per chunk of patched runs when ``max_batch`` is not given.
CHUNK_TOKENS = 8192


def as_ids(model, prompt, tokenizer=None) -> torch.Tensor:
    """A prompt (text with ``tokenizer``, ids, or a tensor [T] / [1, T]) as a long tensor [1, T] on the
    model's device."""
    if isinstance(prompt, str):
        if tokenizer is None:
            raise ValueError("a text prompt needs a tokenizer")
        prompt = tokenizer.encode(prompt)
    idx = torch.as_tensor(prompt, dtype=torch.long, device=model.device)
    if idx.dim() == 1:
        idx = idx[None]
    if idx.dim() != 2 or idx.shape[0] != 1 or idx.shape[1] == 0:
        raise ValueError(f"expected one prompt of token ids [T] or [1, T], got shape {tuple(idx.shape)}")
    return idx


@torch.no_grad()
def cache_activations(
    model, idx: torch.Tensor, names: Sequence[str]
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One forward of ``idx`` [1, T] keeping the activations at hook points ``names``:
    ({name: tensor}, logits)."""
    cache: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        cache[hook.name] = x.detach().clone()

    with eval_mode(model), model.hooks([(name, keep) for name in dict.fromkeys(names)]):
        logits, _ = model(idx)
    return cache, logits


def _patcher(cache: dict[str, torch.Tensor], rows: list[tuple[int, tuple]], name: str):
    """A hook writing ``cache[name][0][index]`` into batch row ``row`` for each (row, index) of ``rows``."""
    clean = cache[name][0]

    def fn(x, hook):
        x = x.clone()
        for row, index in rows:
            x[row][index] = clean[index]
        return x

    return fn


@torch.no_grad()
def run_patched(
    model,
    clean,
    corrupt,
    runs: Sequence[Sequence[Patch]],
    *,
    position: int | None = -1,
    max_batch: int | None = None,
    cache: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Logits of the corrupted prompt with, for each run, its patches taken from the clean run.

    ``runs[i]`` is a list of ``(hook point, index)``: e.g. ``[("blocks.1.attn.z", (3,))]`` patches head
    3 of layer 1 at every position, ``[("blocks.0.resid_pre", (slice(None), 5))]`` the stream at position
    5, ``[("blocks.0.resid_pre", ())]`` all of it, ``[]`` nothing. ``clean``/``corrupt`` [T] or [1, T]
    ids of equal length; ``cache``: the clean activations if already taken (:func:`cache_activations`).
    Returns float32 [N, V] at ``position`` (or [N, T, V] for ``position=None``). Runs go ``max_batch``
    at a time (default: :data:`CHUNK_TOKENS` tokens a chunk); the result does not depend on it beyond
    float rounding.
    """
    clean, corrupt = as_ids(model, clean), as_ids(model, corrupt)
    _same_length(clean, corrupt)
    names = sorted({name for run in runs for name, _ in run})
    if cache is None or any(n not in cache for n in names):
        cache, _ = cache_activations(model, clean, names)
    T = corrupt.shape[1]
    chunk = max(1, int(max_batch) if max_batch else CHUNK_TOKENS // T)
    # a run whose first patch is in block l starts there, from the corrupted run's own stream: the
    # blocks before l compute exactly what they compute without it
    first = [min((_layer_of(name) for name, _ in run), default=0) for run in runs]
    starts = sorted({layer for layer in first if layer > 0})
    entering: dict[str, torch.Tensor] = {}
    if starts:  # one corrupted run keeps the stream entering each of those blocks
        entering, _ = cache_activations(model, corrupt, [f"blocks.{layer}.resid_pre" for layer in starts])
    rows: list[torch.Tensor] = []
    order: list[int] = []
    with eval_mode(model):
        for layer in sorted(set(first)):
            group = [i for i, f in enumerate(first) if f == layer]
            for start in range(0, len(group), chunk):
                part = group[start : start + chunk]
                by_name: dict[str, list[tuple[int, tuple]]] = {}
                for row, i in enumerate(part):
                    for name, index in runs[i]:
                        by_name.setdefault(name, []).append((row, tuple(index)))
                hooks = [(name, _patcher(cache, patches, name)) for name, patches in by_name.items()]
                if position is not None:  # unembed only the position read: [n, 1, d] → logits [n, 1, V]
                    hooks.append(("ln_final", lambda x, hook: x[:, position : position + 1 or None]))
                with torch.no_grad(), model.hooks(hooks):
                    if layer == 0:
                        logits, _ = model(corrupt.expand(len(part), T))
                    else:
                        resid = entering[f"blocks.{layer}.resid_pre"]
                        logits = model.forward_from(layer, resid.expand(len(part), *resid.shape[1:]))
                rows.append((logits if position is None else logits[:, 0]).float())
                order += part
    V = model.config.vocab_size
    if not runs:
        return torch.empty((0, V) if position is not None else (0, T, V))
    out = torch.cat(rows)  # grouped by starting block: back into the order of ``runs``
    return out[torch.argsort(torch.tensor(order))]


def _layer_of(name: str) -> int:
    """The block a hook point belongs to (``"blocks.3.attn.z"`` → 3); 0 for the points before the
    blocks (``embed``, ``mask``), so a run patching one of them is run whole."""
    parts = name.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "blocks" and parts[1].isdigit() else 0


def _same_length(clean: torch.Tensor, corrupt: torch.Tensor) -> None:
    if clean.shape != corrupt.shape:
        n, m = clean.shape[1], corrupt.shape[1]
        raise ValueError(f"clean and corrupted prompts must have the same length, got {n} and {m}")


@dataclass
class Patching:
    """The result of a patching sweep.

    ``restored`` [L, H] (heads) or [L, T] (residual stream): the fraction of the logit difference
    restored (module docstring); ``patched`` the same shape: ``m`` of each patched run;
    ``clean_diff`` / ``corrupt_diff``: ``m`` of the unpatched runs; ``answer`` / ``wrong``: the token
    ids of the metric; ``position``: where it is read (≥ 0); ``point``: ``"attn.z"`` or ``"resid_pre"``.
    """

    restored: np.ndarray
    patched: np.ndarray
    clean_diff: float
    corrupt_diff: float
    answer: int
    wrong: int
    position: int
    point: str

    @property
    def best(self) -> tuple[int, int]:
        """(row, column) of the largest restored fraction: (layer, head) or (layer, position)."""
        flat = np.nan_to_num(self.restored, nan=-np.inf)
        row, col = np.unravel_index(int(np.argmax(flat)), flat.shape)
        return int(row), int(col)


def _metric_tokens(clean_row: torch.Tensor, corrupt_row: torch.Tensor, answer, wrong) -> tuple[int, int]:
    """The metric's two tokens: ``answer`` (default: the clean run's top token at the position) and
    ``wrong`` (default: the corrupted run's top token, its runner-up when both runs agree)."""
    answer = int(clean_row.argmax()) if answer is None else int(answer)
    if wrong is None:  # the corrupted run's top token; its runner-up when both runs agree
        wrong = int(
            corrupt_row.topk(2).indices[1] if int(corrupt_row.argmax()) == answer else corrupt_row.argmax()
        )
    wrong = int(wrong)
    if answer == wrong:
        raise ValueError(f"the answer and the wrong token are both id {answer}: choose two different tokens")
    return answer, wrong


def _sweep(model, clean, corrupt, runs, shape, point, *, answer, wrong, position, max_batch, tokenizer):
    clean, corrupt = as_ids(model, clean, tokenizer), as_ids(model, corrupt, tokenizer)
    _same_length(clean, corrupt)
    T = clean.shape[1]
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside a prompt of {T} tokens")
    position %= T
    names = sorted({name for run in runs for name, _ in run})
    cache, clean_logits = cache_activations(model, clean, names)
    with torch.no_grad(), eval_mode(model):
        corrupt_logits, _ = model(corrupt)
    clean_row, corrupt_row = clean_logits[0, position].float(), corrupt_logits[0, position].float()
    answer, wrong = _metric_tokens(clean_row, corrupt_row, answer, wrong)
    logits = run_patched(model, clean, corrupt, runs, position=position, max_batch=max_batch, cache=cache)
    m_clean = float(clean_row[answer] - clean_row[wrong])
    m_corrupt = float(corrupt_row[answer] - corrupt_row[wrong])
    patched = (logits[:, answer] - logits[:, wrong]).double().cpu().numpy().reshape(shape)
    gap = m_clean - m_corrupt
    restored = (patched - m_corrupt) / gap if gap != 0 else np.full(shape, np.nan)
    return Patching(restored, patched, m_clean, m_corrupt, answer, wrong, position, point)


def patch_heads(
    model,
    clean,
    corrupt,
    *,
    answer: int | None = None,
    wrong: int | None = None,
    position: int = -1,
    max_batch: int | None = None,
    tokenizer=None,
) -> Patching:
    """Patch each head's output ``z_h`` [T, d_k] (hook ``blocks.l.attn.z``, all positions) from the clean
    run into the corrupted one, one head per run: :class:`Patching` with ``restored`` [L, H].

    ``L·H`` runs, batched (see :func:`run_patched`). Prompts as in :func:`as_ids` (text needs ``tokenizer``).
    """
    L, H = model.config.n_layers, model.config.n_heads
    runs = [[(f"blocks.{l}.attn.z", (h,))] for l in range(L) for h in range(H)]
    return _sweep(
        model, clean, corrupt, runs, (L, H), "attn.z",
        answer=answer, wrong=wrong, position=position, max_batch=max_batch, tokenizer=tokenizer,
    )  # fmt: skip


def patch_resid(
    model,
    clean,
    corrupt,
    *,
    answer: int | None = None,
    wrong: int | None = None,
    position: int = -1,
    max_batch: int | None = None,
    tokenizer=None,
) -> Patching:
    """Patch the residual stream entering block ``l`` at position ``t`` (``blocks.l.resid_pre[:, t]``,
    [d]) from the clean run into the corrupted one, one (l, t) per run: ``restored`` [L, T].

    Positions after ``position`` cannot affect it (causal models): their cells are 0. Row 0 patches the
    embedding (+ positions) of one token.
    """
    L = model.config.n_layers
    T = as_ids(model, clean, tokenizer).shape[1]
    runs = [[(f"blocks.{l}.resid_pre", (t,))] for l in range(L) for t in range(T)]
    return _sweep(
        model, clean, corrupt, runs, (L, T), "resid_pre",
        answer=answer, wrong=wrong, position=position, max_batch=max_batch, tokenizer=tokenizer,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# path patching
# ---------------------------------------------------------------------------------------------
#: The receiver inputs path patching routes a sender through, in the order of ``PathPatching.effects``.
PATH_INPUTS = ("q", "k", "v")


class _Stop(Exception):
    """Ends a forward pass once a hook has what it came for."""


def path_unsupported(config) -> str | None:
    """Why path patching cannot run on a model of ``config`` (None: it can)."""
    if config.norm_position == "post":
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
        L, H = cfg.n_layers, cfg.n_heads
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


__all__ = [
    "CHUNK_TOKENS",
    "PATH_INPUTS",
    "Patch",
    "Patching",
    "PathPatching",
    "as_ids",
    "cache_activations",
    "patch_heads",
    "patch_resid",
    "path_patch",
    "path_patch_joint",
    "path_unsupported",
    "run_patched",
]
