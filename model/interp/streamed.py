"""Inspection of a long prompt that never holds every head's pattern at once.

Every head's pattern ``A_h = softmax(mask(cap(s(Q_h K_hᵀ))))`` [T, T] of L layers × H heads costs
``L·H·T²`` values: SmolLM2-135M (30 × 9 heads) at T = 8,192 is 72 GB in float32. Past
:data:`~model.interp.plan.HELD_LIMIT` values an inspection (:func:`inspect_streamed`) keeps instead:

- per layer the scaled queries and keys that recompute any of its heads exactly (:class:`LayerQK`:
  ``q'`` [H, T, d_k] after RoPE, QK-norm and the scaling rule, ``k'`` [H_kv, T, d_k]; a GQA query
  head ``h`` reads key head ``h·H_kv / H``): ``L·T·(H + H_kv)·d_k`` values, O(T·d) per layer;
- a pooled overview of every head, computed block by block of query rows as the forward pass makes
  them (the ``attn.pattern_rows`` hook point): each head reduced to ``S × S``, ``S = ceil(T / b) ≤
  256``, by the max and by the mean of each ``b × b`` block, ``max_{i,j ∈ block} A[i, j]`` and
  ``(1/|block|) Σ A[i, j]``: [L, H, S, S] each, and never a [T, T] array in flight (a block of
  ``QUERY_BLOCK`` rows, ``H × 64 × T``);
- the stream after the final norm [T, d], unembedded a block of positions at a time when the
  next-token table asks (:class:`Unembedding`), instead of the logits [T, V].

:class:`HeadPatterns` stands where the held patterns [L, H, T, T] stood: ``patterns[l, h]`` computes
that head's [T, T] when it is opened (the Head page, an export), ``patterns[l, h, q, k]`` one value from
its block of rows (a hover), each through the model's own code for the rows
(:meth:`~model.nn.attention.Attention.causal_rows`), so the numbers equal the held ones (tested).
Time stays quadratic: the overview still computes every head's ``T²`` weights once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from model.errors import AttentionLabError
from model.interp.trace import eval_mode
from model.nn.hooks import ablate_heads, reader
from model.progress import check, layer_hooks


class PatternsNotHeld(AttentionLabError, ValueError):
    """Every head's pattern was asked for at once of a prompt too long to hold them: one line."""


@dataclass
class LayerQK:
    """What recomputes every head of one layer: ``q`` [H, T, d_k] the queries as the written-out
    softmax multiplies them (``c·q'`` under a triangular mask, else ``q'``), ``k`` [H_kv, T, d_k] the
    scaled keys ``k'``, ``c`` the scale still to apply (1 once folded into ``q``)."""

    q: torch.Tensor
    k: torch.Tensor
    c: float

    @property
    def nbytes(self) -> int:
        return int(self.q.nelement() * self.q.element_size() + self.k.nelement() * self.k.element_size())


class HeadPatterns:
    """Every head's pattern [L, H, T, T] of one run, computed when asked (see the module docstring).

    ``[l, h]`` → that head's [T, T] float32 numpy (the last one is kept); ``[l, h, q]`` → row ``q``
    [T]; ``[l, h, q, k]`` → one weight. The whole array at once (``np.asarray``) is refused with
    :class:`PatternsNotHeld`: a page that needs every head asks for a shorter prompt.
    """

    ndim = 4
    dtype = np.dtype(np.float32)

    def __init__(self, model, layers: list[LayerQK], T: int, *, limit: int = 0):
        cfg = model.config
        self.model = model
        self.layers = layers
        self.shape = (len(layers), cfg.attention.n_heads, T, T)
        self.limit = limit  # the most tokens whose every pattern is held (for the refusal's line)
        self.ctx = model._context(T, 0, None)
        self._head: tuple[tuple[int, int], np.ndarray] | None = None
        self._block: tuple[tuple[int, int, int], torch.Tensor] | None = None

    @property
    def T(self) -> int:
        return self.shape[-1]

    @property
    def nbytes(self) -> int:
        """Bytes held: every layer's queries and keys (not the [T, T] patterns, which are not)."""
        return sum(layer.nbytes for layer in self.layers)

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        raise PatternsNotHeld(self.refusal())

    def refusal(self) -> str:
        """The one line: this page needs every head's pattern, which this prompt cannot hold."""
        L, H, T, _ = self.shape
        need = L * H * T * T * 4
        short = f"; it needs a prompt of at most {self.limit:,} tokens" if self.limit else ""
        return (
            f"every head's pattern of {T:,} tokens would take {need / 1e9:,.1f} GB (L·H·T² = {L}·{H}·{T}²), "
            f"so it is not held{short}"
        )

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) < 2 or not all(isinstance(i, (int, np.integer)) for i in key):
            raise PatternsNotHeld(self.refusal())
        layer, head, *rest = (int(i) for i in key)
        if not rest:
            return self.head(layer, head)
        row = self.row(layer, head, rest[0])
        return row if len(rest) == 1 else row[rest[1]]

    # ---- one head ------------------------------------------------------------------------------
    def head(self, layer: int, head: int) -> np.ndarray:
        """Head ``(layer, head)``'s pattern [T, T] float32, computed now (the last one is kept)."""
        if self._head is not None and self._head[0] == (layer, head):
            return self._head[1]
        out = self.rows(layer, head, 0, self.T).numpy()
        self._head = ((layer, head), out)
        return out

    def row(self, layer: int, head: int, q: int) -> np.ndarray:
        """Row ``q`` [T] of head ``(layer, head)``: its block of :attr:`QUERY_BLOCK` rows is computed
        (the rows the forward pass computed together, so the same numbers), and kept for the next."""
        if self._head is not None and self._head[0] == (layer, head):
            return self._head[1][q]
        step = self._step(layer)
        start = (q // step) * step
        key = (layer, head, start)
        if self._block is None or self._block[0] != key:
            self._block = (key, self.rows(layer, head, start, min(self.T, start + step)))
        return self._block[1][q - start].numpy()

    def _step(self, layer: int) -> int:
        attn = self.model.blocks[layer].attn
        return attn.QUERY_BLOCK if self.ctx.triangular else self.T

    @torch.no_grad()
    def rows(self, layer: int, head: int, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` [r, T] float32 of head ``(layer, head)``'s pattern, by the layer's own
        code: blocks of :attr:`~model.nn.attention.Attention.QUERY_BLOCK` rows under a triangular
        mask (:meth:`~model.nn.attention.Attention.causal_rows`), else ``softmax(mask(cap(c·q'
        k'ᵀ)))`` as :meth:`~model.nn.attention.Attention.attend` writes it."""
        L, H, T, _ = self.shape
        if not (0 <= layer < L and 0 <= head < H and 0 <= start <= stop <= T):
            raise IndexError(f"no rows {start}:{stop} of layer {layer}, head {head} ([{L}, {H}, {T}, {T}])")
        rec = self.layers[layer]
        attn = self.model.blocks[layer].attn
        g = head * rec.k.shape[0] // H  # the key head this query head reads
        q, k = rec.q[None, head : head + 1], rec.k[None, g : g + 1]  # [1, 1, T, d_k]
        heads = slice(head, head + 1)
        mask, is_causal = self.ctx.masks(attn.local)
        out = torch.zeros(stop - start, T)
        if self.ctx.triangular:
            step = attn.QUERY_BLOCK
            for i in range((start // step) * step, stop, step):
                block, seen = attn.causal_rows(q, k, mask, is_causal, slice(i, min(T, i + step)), heads)
                a, b = max(i, start), min(i + step, stop)
                out[a - start : b - start, :seen] = block[0, 0, a - i : b - i]
            return out
        s = attn.cap((q @ k.transpose(-2, -1)).mul_(rec.c))
        if mask is not None:
            s = s.masked_fill_(~mask, float("-inf"))
        return attn.softmax(s, heads)[0, 0, start:stop].contiguous()


class Unembedding:
    """The logits [T, V] of a run, unembedded from the stream after the final norm ``x`` [T, d] a
    block of positions at a time (``logits[a:b]`` → float32 tensor [b − a, V]): ``T·d`` values held
    instead of ``T·V`` (8,192 tokens of a 49,152-token vocabulary: 19 MB, not 1.6 GB)."""

    def __init__(self, model, x: torch.Tensor):
        self.model, self.x = model, x
        self.shape = (int(x.shape[0]), int(model.config.core.vocab_size))

    def dim(self) -> int:
        return 2

    @torch.no_grad()
    def __getitem__(self, rows) -> torch.Tensor:
        return self.model.unembed(self.x[rows]).float()

    def __array__(self, dtype=None, copy=None):
        raise PatternsNotHeld(f"the logits of {self.shape[0]:,} tokens are unembedded a block at a time")


@dataclass
class Streamed:
    """What :func:`stream_prompt` keeps of one pass: ``patterns`` (:class:`HeadPatterns`), the
    pooled overviews ``overview`` (max) and ``overview_mean`` [L, H, S, S] float32, ``logits``
    (:class:`Unembedding`), the run's ``mask`` [T, T] and how long it took."""

    patterns: HeadPatterns
    overview: np.ndarray
    overview_mean: np.ndarray
    logits: Unembedding
    mask: np.ndarray
    seconds: float


def pool_rows(block: torch.Tensor, first: int, b: int, top: torch.Tensor, total: torch.Tensor) -> None:
    """Pool rows ``first..first + r − 1`` of every head, ``block`` [H, r, n] (the keys a block of
    queries may see; the rest of each row is 0), into ``top`` and ``total`` [H, S, S] by ``b × b``
    blocks: ``top`` ← max(top, block maxima), ``total`` ← total + block sums."""
    n = block.shape[-1]
    full = n - n % b
    parts_max, parts_sum = [], []
    if full:
        main = block[..., :full].unflatten(-1, (full // b, b))
        parts_max.append(main.amax(-1))
        parts_sum.append(main.sum(-1))
    if full < n:
        tail = block[..., full:]
        parts_max.append(tail.amax(-1, keepdim=True))
        parts_sum.append(tail.sum(-1, keepdim=True))
    cmax = parts_max[0] if len(parts_max) == 1 else torch.cat(parts_max, -1)  # [H, r, ceil(n/b)]
    csum = parts_sum[0] if len(parts_sum) == 1 else torch.cat(parts_sum, -1)
    m, r, i = cmax.shape[-1], block.shape[1], 0
    while i < r:
        g = (first + i) // b
        j = min(r, (g + 1) * b - first)
        torch.maximum(top[:, g, :m], cmax[:, i:j].amax(1), out=top[:, g, :m])
        total[:, g, :m] += csum[:, i:j].sum(1)
        i = j


def block_counts(T: int, b: int) -> torch.Tensor:
    """Pairs per pooled pixel [S, S]: ``rows(i) · cols(j)``, ``b`` each but the last (``T − (S−1)·b``)."""
    S = -(-T // b)
    sides = torch.full((S,), float(b))
    sides[-1] = T - (S - 1) * b
    return sides[:, None] * sides[None, :]


def stream_prompt(model, ids, b: int, *, ablate: dict | None = None, limit: int = 0) -> Streamed:
    """One forward pass of token ``ids`` [T] that keeps what :class:`Streamed` says, pooling every
    head's pattern by ``b`` as its rows are computed. ``ablate`` {(layer, head): mode} switches heads
    off (their patterns still show); ``limit``: the most tokens whose patterns would be held (for
    :meth:`HeadPatterns.refusal`)."""
    t0 = time.perf_counter()
    cfg = model.config
    L, H = cfg.core.n_layers, cfg.attention.n_heads
    idx = torch.as_tensor(list(ids), dtype=torch.long, device=model.device)[None]
    T = int(idx.shape[1])
    S = -(-T // b)
    top = torch.zeros(L, H, S, S)
    total = torch.zeros(L, H, S, S)
    layers: list[LayerQK | None] = [None] * L
    queries: dict[int, torch.Tensor] = {}
    final: list[torch.Tensor] = []
    ctx = model._context(T, 0, None)

    def on_q(layer: int):
        @reader
        def fn(q, hook):
            queries[layer] = q

        return fn

    def on_k(layer: int):
        attn = model.blocks[layer].attn

        @reader
        def fn(k, hook):  # the scaling rule of Attention.attend, on the key heads as they are
            qs, ks, c = attn.scaled_qk(queries.pop(layer), k)
            if ctx.triangular:  # attend_causal multiplies the queries once: c·(q kᵀ) = (c·q) kᵀ
                qs, c = (qs * c if c != 1.0 else qs), 1.0
            layers[layer] = LayerQK(qs[0].float().clone(), ks[0].float().clone(), c)

        return fn

    def on_rows(layer: int):
        @reader
        def fn(x, hook):
            block, first = x
            check()  # a cancelled run stops between two blocks of rows
            pool_rows(block[0].float(), first, b, top[layer], total[layer])

        return fn

    def on_final(x, hook):  # keep the stream; unembed only the last position in the pass
        final.append(x[0].detach().clone())
        return x[:, -1:]

    hooks = [("ln_final", on_final), *layer_hooks(L)]
    for layer in range(L):
        pre = f"blocks.{layer}.attn."
        hooks += [(pre + "q", on_q(layer)), (pre + "k", on_k(layer)), (pre + "pattern_rows", on_rows(layer))]
    with torch.no_grad(), eval_mode(model), model.hooks(ablate_heads(ablate or {})), model.hooks(hooks):
        model(idx)
    mean = total / block_counts(T, b)
    mask = ctx.mask if ctx.mask is not None else torch.ones(T, T, dtype=torch.bool)
    patterns = HeadPatterns(model, [rec for rec in layers if rec is not None], T, limit=limit)
    return Streamed(
        patterns=patterns,
        overview=top.numpy(),
        overview_mean=mean.numpy(),
        logits=Unembedding(model, final[0]),
        mask=mask.cpu().numpy().astype(bool),
        seconds=time.perf_counter() - t0,
    )


__all__ = [
    "HeadPatterns",
    "LayerQK",
    "PatternsNotHeld",
    "Streamed",
    "Unembedding",
    "block_counts",
    "pool_rows",
    "stream_prompt",
]
