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
    answer = int(clean_row.argmax()) if answer is None else int(answer)
    if wrong is None:  # the corrupted run's top token; its runner-up when both runs agree
        wrong = int(
            corrupt_row.topk(2).indices[1] if int(corrupt_row.argmax()) == answer else corrupt_row.argmax()
        )
    wrong = int(wrong)
    if answer == wrong:
        raise ValueError(f"the answer and the wrong token are both id {answer}: choose two different tokens")
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


__all__ = [
    "CHUNK_TOKENS",
    "Patch",
    "Patching",
    "as_ids",
    "cache_activations",
    "patch_heads",
    "patch_resid",
    "run_patched",
]
