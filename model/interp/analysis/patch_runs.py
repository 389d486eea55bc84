"""The engine of activation patching (:mod:`model.interp.analysis.patching`): a prompt as token ids, the
clean run's cached activations, and :func:`run_patched`, any list of corrupted runs each patching its
own activations, batched in chunks and each started at the first block it patches; also the answer
metric's two tokens, shared by head, residual and path patching.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from model.interp.trace import eval_mode
from model.progress import report

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
    report(0, len(runs), "runs")
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
                report(len(order), len(runs), "runs")  # and stop here when cancelled
    V = model.config.core.vocab_size
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
