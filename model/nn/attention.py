"""Attention: multi-head, grouped-query and multi-query (:class:`Attention`), multi-head latent
attention (:class:`LatentAttention`), the KV cache and what attention is told of positions.

Shapes: batch ``B``, queries ``T``, keys ``S`` (``T`` plus cached positions), width ``d``, query
heads ``H``, key/value heads ``H_kv``, head sizes ``d_k`` (queries and keys) and ``d_v`` (values).

For head ``h``: ``A_h = softmax(mask(cap(s(Q_h K_hᵀ)))) V_h`` where ``s`` is the scaling chosen by
``attn_scale`` (``x/√d_k``, identity, a learned ``τ_h·x``, or ``g_h·cos(q, k)``) and ``cap`` Gemma 2's
soft-capping ``c·tanh(x/c)`` when ``attn_softcap`` is set. Options of today's models:

* **sliding window** (Mistral; per layer with ``window_pattern``: Gemma 2/3, gpt-oss): a local
  layer's query sees only the last ``W`` keys, itself included;
* **attention sinks** (gpt-oss): a learned logit ``b_h`` per head joins the denominator,
  ``A_h[i, j] = exp(x_ij) / (Σ_j' exp(x_ij') + exp(b_h))``, so a row sums to less than 1 and the rest,
  ``1 − Σ_j A_h[i, j]``, went to no key (the sink's share);
* **latent attention** (DeepSeek-V2/V3, :class:`LatentAttention`): keys and values come from one
  latent of ``r = kv_lora_rank`` values per token, which is what the KV cache holds.

There are two ways to compute ``z = A V``: ``F.scaled_dot_product_attention`` (fused; it never forms
``A``), and the written-out softmax (:meth:`Attention.attend`), taken when something looks at the
weights and for the parts the fused kernel lacks (soft-capping, sinks). Their outputs agree to
float32 precision (tested).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.config import GPTConfig
from model.nn.hooks import HookPoint
from model.nn.layers import STD, apply_rope, init_linear, make_norm


# ---------------------------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------------------------
class KVCache:
    """Keys and values of earlier positions for incremental decoding.

    Block ``l`` holds ``keys[l]`` [B, H_kv, n_l, d_k] and ``values[l]`` [B, H_kv, n_l, d_v]:
    ``H_kv·(d_k + d_v)`` values per position and sequence, so a GQA/MQA model's cache is ``n_heads /
    n_kv_heads`` times smaller than MHA's. ``n_l = max_len``, except in a local (sliding-window) layer,
    whose queries never see a key ``W`` or more positions back: it keeps the last ``min(max_len, W)``
    positions, oldest first (the budget's windowed figure: Gemma 3's 15 local layers of 18 keep 512 of
    1,024 positions). For latent attention ``keys`` hold the latent ``c_KV`` [B, 1, n_l, r] and
    ``values`` the rotary key shared by the heads [B, 1, n_l, d_rope]: ``r + d_rope`` values.
    """

    def __init__(
        self,
        config: GPTConfig,
        batch: int,
        max_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        if config.mla:
            k_shape, v_shape = (
                (batch, 1, int(config.attention.kv_lora_rank or 0)),
                (batch, 1, config.qk_rope_dim),
            )
        else:
            k_shape = (batch, config.kv_heads, config.d_head)
            v_shape = (batch, config.kv_heads, config.v_dim)
        W = config.attention.sliding_window
        #: positions each block keeps: ``max_len``, or ``min(max_len, W)`` in a local layer
        self.kept = [
            min(max_len, W) if W is not None and config.is_local_layer(i) else max_len
            for i in range(config.core.n_layers)
        ]
        self.keys = [
            torch.zeros((*k_shape[:2], n, k_shape[2]), device=device, dtype=dtype) for n in self.kept
        ]
        self.values = [
            torch.zeros((*v_shape[:2], n, v_shape[2]), device=device, dtype=dtype) for n in self.kept
        ]
        self.max_len = max_len
        self.length = 0

    @property
    def nbytes(self) -> int:
        return sum(t.element_size() * t.nelement() for t in (*self.keys, *self.values))

    def reset(self) -> None:
        self.length = 0

    def seen(self, T: int, *, local: bool) -> int:
        """Keys that ``T`` new queries attend over in a local (sliding-window) layer or a global one:
        the positions it holds, then the ``T`` new ones."""
        kept = min(self.kept) if local else self.max_len
        return min(self.length, kept) + T

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k``, ``v`` [B, H_kv, T, ·] after the cached positions; return the keys and values the
        new queries attend over: every position so far, or in a local layer the ones it kept then the
        new ones (:meth:`seen`)."""
        T = k.shape[2]
        start, end = self.length, self.length + T
        if end > self.max_len:
            raise ValueError(f"KV cache holds {self.max_len} positions; {end} requested")
        keys, values, n = self.keys[layer], self.values[layer], self.kept[layer]
        held = min(start, n)
        if held + T <= n:  # room left: the new positions go after the held ones
            keys[:, :, held : held + T] = k
            values[:, :, held : held + T] = v
            return keys[:, :, : held + T], values[:, :, : held + T]
        # a local layer past its window: the held positions and the new ones, then keep the last n
        all_k = torch.cat([keys[:, :, :held], k], dim=2)
        all_v = torch.cat([values[:, :, :held], v], dim=2)
        keys.copy_(all_k[:, :, -n:])
        values.copy_(all_v[:, :, -n:])
        return all_k, all_v


# ---------------------------------------------------------------------------------------------
# what attention is told of positions
# ---------------------------------------------------------------------------------------------
class Context(NamedTuple):
    """What attention needs to know of positions: RoPE's ``(cos, sin)`` [T, d_rope/2] or None (and
    ``local_rope``, the local layers' own when they have another base, Gemma 3's); the bool
    ``mask`` [T, S] of global layers (True = may attend; None = every key) and ``window_mask`` of
    local ones (None: they use ``mask``); ``is_causal`` / ``window_is_causal``: that mask is the plain
    lower triangle, so the fused kernel may use its own; ``triangular``: no query may see a later key
    (the config's causal or sliding-window masks), so a written-out softmax may skip the keys after
    each query; the :class:`KVCache` or None; ``scratch``: buffers that every layer of this one
    forward pass shares (:meth:`shared`)."""

    rope: tuple[torch.Tensor, torch.Tensor] | None
    mask: torch.Tensor | None
    is_causal: bool
    kv_cache: KVCache | None
    triangular: bool = False
    scratch: dict | None = None
    window_mask: torch.Tensor | None = None
    window_is_causal: bool = False
    local_rope: tuple[torch.Tensor, torch.Tensor] | None = None

    def rope_of(self, local: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
        """RoPE's ``(cos, sin)`` of a local (sliding-window) layer, or of a global one."""
        if local and self.local_rope is not None:
            return self.local_rope
        return self.rope

    def masks(self, local: bool) -> tuple[torch.Tensor | None, bool]:
        """``(mask, is_causal)`` of a local (sliding-window) layer, or of a global one."""
        if local and self.window_mask is not None:
            return self.window_mask, self.window_is_causal
        return self.mask, self.is_causal

    def shared(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """A zeroed tensor of ``shape`` that every layer of this pass gets again (one allocation per
        pass, not one per layer: fresh memory costs a page fault per 4 KiB, ~12 ms for the 38 MB of
        9 heads × 1024² float32). Only for activations whose hooks keep no reference to them."""
        key = (shape, like.dtype, like.device)
        buf = self.scratch.get(key) if self.scratch is not None else None
        if buf is None:
            buf = like.new_zeros(shape)
            if self.scratch is not None:
                self.scratch[key] = buf
        return buf


# ---------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------
class Attention(nn.Module):
    """Multi-head / grouped-query / multi-query causal self-attention.

    ``q_proj`` [H·d_k, d], ``k_proj`` and ``v_proj`` [H_kv·d_k, d], ``o_proj`` [d, H·d_k]; ``sinks`` [H]
    with ``attn_sinks``. Hook points ``q``, ``k``, ``v``, ``scores``, ``pattern``, ``z``, ``out`` (see
    :mod:`model.nn.hooks`). ``local``: this layer attends through the sliding window.
    """

    #: query rows per block of the written-out causal softmax (:meth:`attend_causal`)
    QUERY_BLOCK = 64

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.config = config
        self.layer = layer
        self.local = config.is_local_layer(layer)
        H, H_kv, d_k, d = config.attention.n_heads, config.kv_heads, config.d_head, config.core.d_model
        qkv_bias = config.core.bias in ("all", "qkv")
        self.q_proj = nn.Linear(d, H * d_k, bias=qkv_bias)
        self.k_proj = nn.Linear(d, H_kv * d_k, bias=qkv_bias)
        self.v_proj = nn.Linear(d, H_kv * d_k, bias=qkv_bias)
        self.o_proj = nn.Linear(H * d_k, d, bias=config.core.bias == "all")
        self._common_parts(config)
        if config.attention.attn_scale == "learned":
            self.scale = nn.Parameter(torch.empty(H))
        elif config.attention.attn_scale == "qk_norm":
            self.qk_gain = nn.Parameter(torch.empty(H))
        if (
            config.attention.qk_rmsnorm and config.attention.qk_norm_scope == "all"
        ):  # OLMo 2: over all heads at once
            self.q_norm, self.k_norm = (
                make_norm(config, H * d_k, rms=True),
                make_norm(config, H_kv * d_k, rms=True),
            )
        elif (
            config.attention.qk_rmsnorm
        ):  # Qwen3's QK-norm: RMSNorm over d_k, one [d_k] weight shared by the heads
            self.q_norm, self.k_norm = make_norm(config, d_k, rms=True), make_norm(config, d_k, rms=True)

    def _common_parts(self, config: GPTConfig) -> None:
        """What every attention has: sinks, dropout, the hook points."""
        if config.attention.attn_sinks:
            self.sinks = nn.Parameter(torch.empty(config.attention.n_heads))
        self.attn_dropout = config.core.dropout
        self.resid_dropout = nn.Dropout(config.core.dropout)
        self.q, self.k, self.v, self.scores, self.pattern, self.z, self.out = (HookPoint() for _ in range(7))
        #: ``(rows of the pattern [B, H, r, S'], first row)`` as each block of query rows is computed
        #: (readers only): a pooled overview of a long prompt without the whole [T, T] at once
        self.pattern_rows = HookPoint()

    def init_weights(self) -> None:
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            init_linear(proj)
        init_linear(
            self.o_proj, STD / math.sqrt(2 * self.config.core.n_layers)
        )  # writes into the residual stream
        if self.config.attention.attn_scale == "learned":
            nn.init.constant_(self.scale, 1.0 / math.sqrt(self.config.d_head))
        elif self.config.attention.attn_scale == "qk_norm":
            nn.init.constant_(self.qk_gain, math.sqrt(self.config.d_head))
        if self.config.attention.qk_rmsnorm:
            self.q_norm.reset_parameters()
            self.k_norm.reset_parameters()
        if self.config.attention.attn_sinks:
            nn.init.zeros_(self.sinks)

    def scaled_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The scaling rule ``s`` as ``(q', k', c)`` with ``s(Q Kᵀ) = c · q' k'ᵀ``: ``c = 1/√d_k`` (sqrt_dk;
        ``1/√attn_scale_dim`` when set, Gemma 2/3's query_pre_attn_scalar), 1 (none), ``q' = τ_h q``
        (learned), ``q' = g_h q/‖q‖, k' = k/‖k‖`` (qk_norm)."""
        rule = self.config.attention.attn_scale
        if rule == "sqrt_dk":
            dim = self.config.attention.attn_scale_dim
            return q, k, 1.0 / math.sqrt(q.shape[-1] if dim is None else dim)
        if rule == "none":
            return q, k, 1.0
        if rule == "learned":
            return q * self.scale.view(1, -1, 1, 1).to(q.dtype), k, 1.0
        if rule == "qk_norm":
            qn = F.normalize(q, dim=-1) * self.qk_gain.view(1, -1, 1, 1).to(q.dtype)
            return qn, F.normalize(k, dim=-1), 1.0
        raise ValueError(f"attn_scale={rule!r} is not a scaling rule: use sqrt_dk, none, learned or qk_norm")

    def cap(self, x: torch.Tensor) -> torch.Tensor:
        """Gemma 2's soft-capping ``c·tanh(x/c)`` of scores ``x`` (in place) when ``attn_softcap`` is set."""
        c = self.config.attention.attn_softcap
        if c is None:
            return x
        return torch.tanh(x / c) * c if x.requires_grad else x.div_(c).tanh_().mul_(c)

    def softmax(self, x: torch.Tensor, heads: slice | None = None) -> torch.Tensor:
        """Softmax of masked scores ``x`` [B, H, T, S] over the keys, each head's sink in the
        denominator when there are sinks (rows then sum to less than 1); ``heads``: which of the
        layer's heads ``x`` holds (all by default)."""
        if not self.config.attention.attn_sinks:
            return torch.softmax(x, dim=-1)
        sinks = self.sinks if heads is None else self.sinks[heads]
        sink = sinks.view(1, -1, 1, 1).to(x.dtype).expand(*x.shape[:-1], 1)
        return torch.softmax(torch.cat([x, sink], dim=-1), dim=-1)[..., :-1]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: Context) -> torch.Tensor:
        """``z = softmax(mask(s(Q Kᵀ))) V`` written out, for the hook points: [B, H, T, d_v]."""
        n_rep = self.config.n_rep
        if n_rep > 1:  # GQA: query head h reads key/value head h // n_rep
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        qs, ks, c = self.scaled_qk(q, k)
        dropout = self.attn_dropout if self.training else 0.0
        mask, is_causal = ctx.masks(self.local)
        if ctx.triangular and not self.scores.fns and dropout == 0:
            return self.attend_causal(qs * c if c != 1.0 else qs, ks, v, mask, is_causal, ctx)
        scores = self.scores(self.cap((qs @ ks.transpose(-2, -1)).mul_(c)))  # [B, H, T, S], unmasked
        if (
            mask is not None
        ):  # in place unless a hook may have kept the unmasked scores (a reader copied them)
            kept = self.scores.fns and not self.scores.readers_only
            scores = (
                scores.masked_fill(~mask, float("-inf"))
                if kept
                else scores.masked_fill_(~mask, float("-inf"))
            )
        pattern = self.pattern(self.softmax(scores))
        if self.pattern_rows.fns:
            self.pattern_rows((pattern, 0))
        return (F.dropout(pattern, p=dropout) if dropout > 0 else pattern) @ v

    def attend_causal(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        is_causal: bool,
        ctx: Context,
    ) -> torch.Tensor:
        """:meth:`attend` under a triangular mask (no query sees a later key), ``q`` already scaled
        (``c·(q kᵀ) = (c·q) kᵀ``: T×d_k products, not T×S): query rows are taken in blocks of
        :attr:`QUERY_BLOCK`, each reading only the keys it may see, so half the products and the softmax
        of the full square are skipped and each block stays in cache. The pattern [B, H, T, S] is zero
        above the diagonal; an intervention on it (a new tensor, or an edit in place) is what ``z``
        uses."""
        assert mask is not None  # a triangular mask is never "every key"
        B, H, T, _ = q.shape
        S = k.shape[2]
        if T <= self.QUERY_BLOCK and not self.pattern_rows.fns:  # one block: it is the whole pattern
            block, _ = self.causal_rows(q, k, mask, is_causal, slice(0, T))
            return self.pattern(block) @ v  # a fresh array: what a hook leaves in it is what z uses
        # one pattern array for every layer when its hooks only read it (they copy what they keep); none
        # when nothing looks at it (training with sinks or soft-capping takes this path too)
        looked_at = bool(self.pattern.fns)
        pattern = None
        if looked_at:
            pattern = ctx.shared((B, H, T, S), q) if self.pattern.readers_only else q.new_zeros(B, H, T, S)
        z = q.new_empty(B, H, T, v.shape[-1])
        rows_read = bool(self.pattern_rows.fns)
        for i in range(0, T, self.QUERY_BLOCK):
            rows = slice(i, min(T, i + self.QUERY_BLOCK))
            block, seen = self.causal_rows(q, k, mask, is_causal, rows)
            if rows_read:
                self.pattern_rows((block, i))
            if pattern is not None:
                pattern[:, :, rows, :seen] = block
            z[:, :, rows] = block @ v[:, :, :seen]
        if pattern is None:
            return z
        version = pattern._version
        hooked = self.pattern(pattern)
        if hooked is not pattern or hooked._version != version:  # an intervention changed the weights
            z = hooked @ v
        return z

    def causal_rows(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        mask: torch.Tensor,
        is_causal: bool,
        rows: slice,
        heads: slice | None = None,
    ) -> tuple[torch.Tensor, int]:
        """Rows ``rows`` of the pattern under a triangular mask, as :meth:`attend_causal` computes
        them: ``(softmax(mask(cap(q[rows] K[:seen]ᵀ))) [B, h, r, seen], seen)`` with ``q`` [B, h, T,
        d_k] already scaled, ``k`` [B, h, S, d_k] (``heads``: which of the layer's heads they are, for
        the sinks) and ``seen = S − T + rows.stop``, the keys these queries may see at most (the rest
        of each row is 0)."""
        T, S = q.shape[2], k.shape[2]
        past = S - T  # keys cached before these queries
        seen = past + rows.stop
        s = self.cap(q[:, :, rows] @ k[:, :, :seen].transpose(-2, -1))
        # the plain causal mask hides only keys of the diagonal square; a window hides earlier ones too
        first = past + rows.start if is_causal else 0
        s[..., first:].masked_fill_(~mask[rows, first:seen], float("-inf"))
        return self.softmax(s, heads), seen

    def heads(self, x: torch.Tensor, ctx: Context) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q`` [B, H, T, d_k], ``k`` and ``v`` [B, H_kv, S, d_k] of ``x`` [B, T, d]: projected, QK-normed,
        rotated, and the keys/values joined to the cached ones."""
        B, T, _ = x.shape
        H, H_kv, d_k = self.config.attention.n_heads, self.config.kv_heads, self.config.d_head
        q, k = self.q_proj(x), self.k_proj(x)
        every_head = self.config.attention.qk_rmsnorm and self.config.attention.qk_norm_scope == "all"
        if every_head:  # OLMo 2: one RMSNorm over all of q [H·d_k], one over k [H_kv·d_k]
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(B, T, H, d_k).transpose(1, 2)  # [B, H, T, d_k]
        k = k.view(B, T, H_kv, d_k).transpose(1, 2)  # [B, H_kv, T, d_k]
        v = self.v_proj(x).view(B, T, H_kv, d_k).transpose(1, 2)
        if self.config.attention.qk_rmsnorm and not every_head:
            q, k = self.q_norm(q), self.k_norm(k)
        rope = ctx.rope_of(self.local)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if ctx.kv_cache is not None:
            k, v = ctx.kv_cache.update(self.layer, k, v)  # [B, H_kv, S, d_k]
        return q, k, v

    def forward(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        """``x`` [B, T, d] → ``W_O concat_h(z_h)`` [B, T, d]."""
        B, T, _ = x.shape
        q, k, v = self.heads(x, ctx)
        q, k, v = self.q(q), self.k(k), self.v(v)
        fused = not (self.scores.fns or self.pattern.fns or self.pattern_rows.fns)  # nobody reads the weights
        fused = (
            fused and not self.config.attention.attn_sinks and self.config.attention.attn_softcap is None
        )  # nor needs them
        if fused:  # the fused kernel, which never materialises them
            qs, ks, c = self.scaled_qk(q, k)
            mask, is_causal = ctx.masks(self.local)
            z = F.scaled_dot_product_attention(
                qs,
                ks,
                v,
                attn_mask=None if is_causal else mask,
                is_causal=is_causal,
                dropout_p=self.attn_dropout if self.training else 0.0,
                scale=c,
                enable_gqa=k.shape[1] != q.shape[1],
            )
        else:
            z = self.attend(q, k, v, ctx)
        z = self.z(z)  # [B, H, T, d_v]: each head's output
        return self.out(self.resid_dropout(self.o_proj(z.transpose(1, 2).reshape(B, T, -1))))


class LatentAttention(Attention):
    """Multi-head latent attention (DeepSeek-V2/V3): keys and values from a shared low-rank latent.

    With ``r = kv_lora_rank``, head parts ``d_nope``, ``d_rope`` (``d_k = d_nope + d_rope``) and ``d_v``::

        c_KV = Norm(W_DKV x)                   [r]      the latent: what the KV cache holds
        k_R  = RoPE(W_KR x)                    [d_rope] one rotary key shared by the heads (cached)
        k_h  = [W_UK,h c_KV ; k_R]             [d_k]    v_h = W_UV,h c_KV  [d_v]
        q_h  = [W_UQ,h c_Q ; RoPE(W_QR,h c_Q)] [d_k]    c_Q = Norm(W_DQ x) when q_lora_rank, else x

    ``kv_a`` holds ``[W_DKV; W_KR]`` [r + d_rope, d], ``kv_b`` ``[W_UK,h; W_UV,h]`` per head
    [H·(d_nope + d_v), r]; queries ``q_a`` [r_q, d] and ``q_b`` [H·d_k, r_q] (or ``q_proj`` [H·d_k, d]).
    The cache stores ``r + d_rope`` values per token and layer against MHA's ``2·H·d_k``. The scaling is
    ``1/√d_k`` (``1/√attn_scale_dim`` when set: DeepSeek-V3's YaRN multiplies it by mscale²); the hook
    points are :class:`Attention`'s (``k`` and ``v`` per head, decompressed).
    """

    def __init__(self, config: GPTConfig, layer: int):
        nn.Module.__init__(self)
        self.config = config
        self.layer = layer
        self.local = config.is_local_layer(layer)
        H, d, r = config.attention.n_heads, config.core.d_model, int(config.attention.kv_lora_rank or 0)
        qkv_bias = config.core.bias in ("all", "qkv")
        if config.attention.q_lora_rank:
            self.q_a = nn.Linear(d, config.attention.q_lora_rank, bias=qkv_bias)
            self.q_a_norm = make_norm(config, config.attention.q_lora_rank, rms=True)
            self.q_b = nn.Linear(config.attention.q_lora_rank, H * config.qk_dim, bias=qkv_bias)
        else:
            self.q_proj = nn.Linear(d, H * config.qk_dim, bias=qkv_bias)
        self.kv_a = nn.Linear(d, r + config.qk_rope_dim, bias=qkv_bias)
        self.kv_a_norm = make_norm(config, r, rms=True)
        self.kv_b = nn.Linear(r, H * (config.qk_nope_dim + config.v_dim), bias=qkv_bias)
        self.o_proj = nn.Linear(H * config.v_dim, d, bias=config.core.bias == "all")
        self._common_parts(config)

    def init_weights(self) -> None:
        cfg = self.config
        for proj in ("q_a", "q_b", "q_proj", "kv_a", "kv_b"):
            if hasattr(self, proj):
                init_linear(getattr(self, proj))
        for norm in ("q_a_norm", "kv_a_norm"):
            if hasattr(self, norm):
                getattr(self, norm).reset_parameters()
        init_linear(self.o_proj, STD / math.sqrt(2 * cfg.core.n_layers))
        if cfg.attention.attn_sinks:
            nn.init.zeros_(self.sinks)

    def heads(self, x: torch.Tensor, ctx: Context) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q``, ``k`` [B, H, ·, d_k] and ``v`` [B, H, S, d_v], decompressed from the (cached) latent."""
        cfg = self.config
        B, T, _ = x.shape
        H, r, nope, rope = (
            cfg.attention.n_heads,
            int(cfg.attention.kv_lora_rank or 0),
            cfg.qk_nope_dim,
            cfg.qk_rope_dim,
        )
        c_q = self.q_a_norm(self.q_a(x)) if cfg.attention.q_lora_rank else x
        q = (
            (self.q_b(c_q) if cfg.attention.q_lora_rank else self.q_proj(c_q))
            .view(B, T, H, nope + rope)
            .transpose(1, 2)
        )
        q_nope, q_rope = q.split([nope, rope], dim=-1)
        c_kv, k_rope = self.kv_a(x).split([r, rope], dim=-1)  # [B, T, r], [B, T, d_rope]
        c_kv, k_rope = self.kv_a_norm(c_kv)[:, None], k_rope[:, None]  # one "head": [B, 1, T, ·]
        rotary = ctx.rope_of(self.local)
        if rotary is not None:
            q_rope, k_rope = apply_rope(q_rope, *rotary), apply_rope(k_rope, *rotary)
        if ctx.kv_cache is not None:
            c_kv, k_rope = ctx.kv_cache.update(self.layer, c_kv, k_rope)  # [B, 1, S, r], [B, 1, S, d_rope]
        S = c_kv.shape[2]
        kv = self.kv_b(c_kv[:, 0]).view(B, S, H, nope + cfg.v_dim).transpose(1, 2)
        k_nope, v = kv.split([nope, cfg.v_dim], dim=-1)
        k = torch.cat([k_nope, k_rope.expand(B, H, S, rope)], dim=-1)
        return torch.cat([q_nope, q_rope], dim=-1), k, v


def make_attention(config: GPTConfig, layer: int) -> Attention:
    """Latent attention when ``kv_lora_rank`` is set, else multi-head / grouped-query attention."""
    return LatentAttention(config, layer) if config.mla else Attention(config, layer)


__all__ = ["Attention", "Context", "KVCache", "LatentAttention", "make_attention"]
