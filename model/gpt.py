"""The GPT: a decoder-only Transformer with a fast path and a trace path over one set of weights.

Shapes: batch ``B``, sequence ``T`` (keys ``S`` when a KV cache holds earlier positions), width
``d = d_model``, query heads ``H = n_heads``, key/value heads ``H_kv = n_kv_heads``, head size
``d_k = head_dim``, vocabulary ``V``.

One block (Pre-LN, the default)::

    resid_mid  = resid_pre + Attn(Norm1(resid_pre))
    resid_post = resid_mid + MLP(Norm2(resid_mid))

Post-LN (the original Transformer) renormalises the sum instead: ``resid_mid = Norm1(resid_pre +
Attn(resid_pre))``, ``resid_post = Norm2(resid_mid + MLP(resid_mid))``, and has no final norm.

Attention for head ``h``: ``A_h = softmax(mask(s(Q_h K_hᵀ))) V_h`` where ``s`` is the scaling chosen
by ``attn_scale``: ``x/√d_k`` (sqrt_dk), identity (none), ``τ_h·x`` with a learned ``τ_h`` initialised
to ``1/√d_k`` (learned), or ``g_h · cos(q, k)`` (qk_norm). With GQA, query head ``h`` reads key/value
head ``h // (H / H_kv)``.

* **Fast path** — ``model(idx)``: ``F.scaled_dot_product_attention`` (fused, never materialises the
  weights); used for training and generation, with an optional :class:`KVCache`.
* **Trace path** — ``model.trace(idx)``: the same computation with an explicit softmax that records
  every head's scores and weights into a :class:`~model.trace.Trace`; its logits equal the fast
  path's (float32, ``allclose``).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.config import ConfigError, GPTConfig
from model.trace import Recorder, Trace

Ablation = dict[tuple[int, int], Literal["zero", "mean"]]


# ---------------------------------------------------------------------------------------------
# positions
# ---------------------------------------------------------------------------------------------
def sinusoidal_table(n_positions: int, d_model: int) -> torch.Tensor:
    """The fixed table of Vaswani et al.: ``PE[p, 2i] = sin(p/10000^(2i/d))``, ``PE[p, 2i+1] = cos(...)``.

    Returns float32 [n_positions, d_model].
    """
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq)
    return table


def rope_tables(n_positions: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles ``p·θ_i`` with ``θ_i = base^(-2i/d_k)``: each [n_positions, d_k/2]."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs ``(x_i, x_{i+d_k/2})`` of every head vector by the angle of its position.

    ``x`` [B, H, T, d_k]; ``cos``/``sin`` [T, d_k/2]. After rotation ``q_m · k_n`` depends on
    positions only through ``m - n`` (the half-split convention of GPT-NeoX and Llama).
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# ---------------------------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------------------------
class KVCache:
    """Keys and values of earlier positions for incremental decoding.

    Holds ``k`` and ``v`` of shape [L, B, H_kv, max_len, d_k]: ``2·L·H_kv·d_k·max_len·B`` values, so a
    GQA/MQA model's cache is ``n_heads / n_kv_heads`` times smaller than MHA's.
    """

    def __init__(
        self,
        config: GPTConfig,
        batch: int,
        max_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        shape = (config.n_layers, batch, config.kv_heads, max_len, config.d_head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.max_len = max_len
        self.length = 0

    @property
    def nbytes(self) -> int:
        return self.k.element_size() * self.k.nelement() * 2

    def reset(self) -> None:
        self.length = 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k``, ``v`` [B, H_kv, T, d_k] after the cached positions; return all keys/values so far."""
        start, end = self.length, self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache holds {self.max_len} positions; {end} requested")
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]


# ---------------------------------------------------------------------------------------------
# layers
# ---------------------------------------------------------------------------------------------
def make_norm(config: GPTConfig) -> nn.Module:
    """LayerNorm ``(x-μ)/√(σ²+ε)·γ + β`` (β only when ``norm_bias``) or RMSNorm ``x/√(mean(x²)+ε)·γ``."""
    if config.norm == "rmsnorm":
        return nn.RMSNorm(config.d_model, eps=config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.norm_bias)


class Attention(nn.Module):
    """Multi-head / grouped-query / multi-query causal self-attention.

    ``q_proj`` [H·d_k, d], ``k_proj`` and ``v_proj`` [H_kv·d_k, d], ``o_proj`` [d, H·d_k].
    """

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.config = config
        self.layer = layer
        H, H_kv, d_k, d = config.n_heads, config.kv_heads, config.d_head, config.d_model
        qkv_bias = config.bias in ("all", "qkv")
        self.q_proj = nn.Linear(d, H * d_k, bias=qkv_bias)
        self.k_proj = nn.Linear(d, H_kv * d_k, bias=qkv_bias)
        self.v_proj = nn.Linear(d, H_kv * d_k, bias=qkv_bias)
        self.o_proj = nn.Linear(H * d_k, d, bias=config.bias == "all")
        if config.attn_scale == "learned":
            self.scale = nn.Parameter(torch.full((H,), 1.0 / math.sqrt(d_k)))
        elif config.attn_scale == "qk_norm":
            self.qk_gain = nn.Parameter(torch.full((H,), math.sqrt(d_k)))
        self.attn_dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def _scaled_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(q', k', c) such that the softmax input is ``c · q' k'ᵀ`` for this layer's scaling rule."""
        rule = self.config.attn_scale
        if rule == "sqrt_dk":
            return q, k, 1.0 / math.sqrt(q.shape[-1])
        if rule == "none":
            return q, k, 1.0
        if rule == "learned":
            return q * self.scale.view(1, -1, 1, 1).to(q.dtype), k, 1.0
        # qk_norm: g_h · cos(q, k)
        qn = F.normalize(q, dim=-1) * self.qk_gain.view(1, -1, 1, 1).to(q.dtype)
        return qn, F.normalize(k, dim=-1), 1.0

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        mask: torch.Tensor | None,
        kv_cache: KVCache | None = None,
        ablate: Ablation | None = None,
        rec: Recorder | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """``x`` [B, T, d] → [B, T, d]. ``mask`` bool [T, S] (True = may attend) or None (attend all).

        ``is_causal`` says ``mask`` is the plain lower triangle, so the fused kernel may use its own.
        """
        cfg = self.config
        B, T, _ = x.shape
        H, H_kv, d_k = cfg.n_heads, cfg.kv_heads, cfg.d_head
        q = self.q_proj(x).view(B, T, H, d_k).transpose(1, 2)  # [B, H, T, d_k]
        k = self.k_proj(x).view(B, T, H_kv, d_k).transpose(1, 2)  # [B, H_kv, T, d_k]
        v = self.v_proj(x).view(B, T, H_kv, d_k).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if kv_cache is not None:
            k, v = kv_cache.update(self.layer, k, v)  # [B, H_kv, S, d_k]
        qs, ks, c = self._scaled_qk(q, k)
        dropout_p = self.attn_dropout if self.training else 0.0

        if rec is None or not rec.wants_layer(self.layer):
            head_out = F.scaled_dot_product_attention(
                qs,
                ks,
                v,
                attn_mask=None if is_causal else mask,
                is_causal=is_causal,
                dropout_p=dropout_p,
                scale=c,
                enable_gqa=H_kv != H,
            )  # [B, H, T, d_k]
        else:
            head_out = self._explicit(q, k, v, qs, ks, c, mask, dropout_p, rec)

        if ablate:
            head_out = _ablate_heads(head_out, self.layer, ablate)
        if rec is not None:
            rec.put("head_out", self.layer, head_out)  # what the head really contributed (after ablation)
        out = self.resid_dropout(self.o_proj(head_out.transpose(1, 2).reshape(B, T, H * d_k)))
        return out

    def _explicit(self, q, k, v, qs, ks, c, mask, dropout_p, rec: Recorder) -> torch.Tensor:
        """softmax(mask(c · q' k'ᵀ)) V with every stage recorded; returns head outputs [B, H, T, d_k]."""
        n_rep = self.config.n_rep
        if n_rep > 1:
            k, v, ks = (t.repeat_interleave(n_rep, dim=1) for t in (k, v, ks))
        layer = self.layer
        if rec.wants("scores_raw", layer):
            rec.put("scores_raw", layer, q @ k.transpose(-2, -1))
        scores = (qs @ ks.transpose(-2, -1)) * c  # [B, H, T, S]
        rec.put("scores_scaled", layer, scores)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        rec.put("weights", layer, weights)
        if dropout_p > 0:
            weights = F.dropout(weights, p=dropout_p)
        head_out = weights @ v
        for kind, t in (("q", q), ("k", k), ("v", v)):
            rec.put(kind, layer, t)
        return head_out


def _ablate_heads(head_out: torch.Tensor, layer: int, ablate: Ablation) -> torch.Tensor:
    """Zero head ``h``'s output, or replace it by its mean over positions, for each ``(layer, h)``."""
    heads = {h: mode for (lay, h), mode in ablate.items() if lay == layer}
    if not heads:
        return head_out
    head_out = head_out.clone()
    for h, mode in heads.items():
        if mode == "zero":
            head_out[:, h] = 0.0
        elif mode == "mean":
            head_out[:, h] = head_out[:, h].mean(dim=1, keepdim=True)
        else:
            raise ValueError(f"ablation mode {mode!r} is not 'zero' or 'mean'")
    return head_out


class MLP(nn.Module):
    """Position-wise feed-forward: ``W_out φ(W_in x)`` (gelu, relu) or ``W_down(SiLU(W_gate x) ⊙ W_up x)``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        d, d_ff, bias = config.d_model, config.hidden, config.bias == "all"
        self.kind = config.mlp
        if self.kind == "swiglu":
            self.w_gate = nn.Linear(d, d_ff, bias=bias)
            self.w_up = nn.Linear(d, d_ff, bias=bias)
            self.w_down = nn.Linear(d_ff, d, bias=bias)
        else:
            self.fc_in = nn.Linear(d, d_ff, bias=bias)
            self.fc_out = nn.Linear(d_ff, d, bias=bias)
            if self.kind == "gelu":
                self.act = nn.GELU(approximate=config.gelu_approx)
            else:
                self.act = nn.ReLU()
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "swiglu":
            return self.dropout(self.w_down(F.silu(self.w_gate(x)) * self.w_up(x)))
        return self.dropout(self.fc_out(self.act(self.fc_in(x))))


class Block(nn.Module):
    """One Transformer layer: attention then MLP, each writing into the residual stream."""

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.pre = config.norm_position == "pre"
        self.norm1 = make_norm(config)
        self.attn = Attention(config, layer)
        self.norm2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x, rope, mask, kv_cache=None, ablate=None, rec=None, is_causal=False):
        layer = self.layer
        if self.pre:
            attn_out = self.attn(self.norm1(x), rope, mask, kv_cache, ablate, rec, is_causal)
            mid = x + attn_out
            mlp_out = self.mlp(self.norm2(mid))
            post = mid + mlp_out
        else:
            attn_out = self.attn(x, rope, mask, kv_cache, ablate, rec, is_causal)
            mid = self.norm1(x + attn_out)
            mlp_out = self.mlp(mid)
            post = self.norm2(mid + mlp_out)
        if rec is not None and rec.wants_layer(layer):
            for kind, t in (
                ("resid_pre", x),
                ("attn_out", attn_out),
                ("resid_mid", mid),
                ("mlp_out", mlp_out),
                ("resid_post", post),
            ):
                rec.put(kind, layer, t)
            if rec.wants("attn_write_norm", layer):
                rec.put("attn_write_norm", layer, attn_out.float().norm(dim=-1))
            if rec.wants("mlp_write_norm", layer):
                rec.put("mlp_write_norm", layer, mlp_out.float().norm(dim=-1))
        return post


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
class GPT(nn.Module):
    """Token embedding → (positions) → L blocks → (final norm) → unembedding."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        config.validate()
        if config.vocab_size is None:
            raise ConfigError(["vocab_size is not set: give it, or let the tokenizer decide it"])
        self.config = config
        d, V, C = config.d_model, config.vocab_size, config.context_length
        self.tok_emb = nn.Embedding(V, d)
        if config.positions == "learned":
            self.pos_emb = nn.Embedding(C, d)
        elif config.positions == "sinusoidal":
            self.register_buffer("pos_table", sinusoidal_table(C, d), persistent=False)
        elif config.positions == "rope":
            cos, sin = rope_tables(C, config.d_head, config.rope_base)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm_f = make_norm(config) if config.norm_position == "pre" else None
        self.lm_head = None if config.tie_embeddings else nn.Linear(d, V, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 init: N(0, 0.02) for matrices and embeddings, zero biases, residual writes
        (``o_proj``, ``fc_out``, ``w_down``) scaled by ``1/√(2L)``."""
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                s = (
                    std / math.sqrt(2 * self.config.n_layers)
                    if name.endswith(("o_proj.weight", "fc_out.weight", "w_down.weight"))
                    else std
                )
                nn.init.normal_(p, mean=0.0, std=s)
        for module in self.modules():
            if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
                module.reset_parameters()
            elif isinstance(module, Attention):
                if hasattr(module, "scale"):
                    nn.init.constant_(module.scale, 1.0 / math.sqrt(self.config.d_head))
                if hasattr(module, "qk_gain"):
                    nn.init.constant_(module.qk_gain, math.sqrt(self.config.d_head))

    # ---- helpers -----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.tok_emb.weight.device

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameter count; ``non_embedding`` follows Kaplan et al. (and the budget calculator): it
        leaves out the token table, the learned position table and an untied output head."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.tok_emb.weight.numel()
            if self.config.positions == "learned":
                n -= self.pos_emb.weight.numel()
            if self.lm_head is not None:
                n -= self.lm_head.weight.numel()
        return n

    def attention_mask(self, T: int, S: int | None = None, attn_mask: torch.Tensor | None = None):
        """The bool mask [T, S] (True = may attend) for T queries after ``S - T`` cached positions.

        ``None`` means every query sees every key (non-causal, or a single new token).
        """
        S = T if S is None else S
        if attn_mask is not None:
            m = attn_mask.to(device=self.device, dtype=torch.bool)
            if m.shape != (T, S):
                raise ValueError(f"attn_mask has shape {tuple(m.shape)}, expected {(T, S)}")
            return m
        if not self.config.causal or T == 1:
            return None
        q_pos = torch.arange(S - T, S, device=self.device)[:, None]
        k_pos = torch.arange(S, device=self.device)[None, :]
        return k_pos <= q_pos

    # ---- forward -----------------------------------------------------------------------------
    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        kv_cache: KVCache | None = None,
        ablate: Ablation | None = None,
        attn_mask: torch.Tensor | None = None,
        _rec: Recorder | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``idx`` [B, T] token ids → (logits [B, T, V], mean cross-entropy or None).

        ``targets`` [B, T] (−100 = ignore). With ``kv_cache`` the new tokens continue after the cached
        positions. ``ablate`` {(layer, head): "zero"|"mean"}; ``attn_mask`` bool [T, T] overrides the
        config's causal mask.
        """
        cfg = self.config
        B, T = idx.shape
        start = kv_cache.length if kv_cache is not None else 0
        if start + T > cfg.context_length and cfg.positions != "none":
            raise ValueError(
                f"sequence of {start + T} tokens is longer than context_length={cfg.context_length}"
            )
        x = self.tok_emb(idx)
        if cfg.positions == "learned":
            x = x + self.pos_emb(torch.arange(start, start + T, device=idx.device))
        elif cfg.positions == "sinusoidal":
            x = x + self.pos_table[start : start + T].to(x.dtype)
        rope = (
            (self.rope_cos[start : start + T], self.rope_sin[start : start + T])
            if cfg.positions == "rope"
            else None
        )
        x = self.drop(x)
        mask = self.attention_mask(T, start + T, attn_mask)
        is_causal = attn_mask is None and cfg.causal and start == 0 and T > 1
        for block in self.blocks:
            x = block(x, rope, mask, kv_cache, ablate, _rec, is_causal)
        if kv_cache is not None:
            kv_cache.length += T
        if self.norm_f is not None:
            x = self.norm_f(x)
        if _rec is not None:
            _rec.put("resid_final", -1, x)
        logits = self.lm_head(x) if self.lm_head is not None else x @ self.tok_emb.weight.t()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
        return logits, loss

    @torch.no_grad()
    def trace(
        self,
        idx: torch.Tensor,
        *,
        layers=None,
        kinds=None,
        dtype: torch.dtype = torch.float32,
        ablate: Ablation | None = None,
        attn_mask: torch.Tensor | None = None,
    ) -> Trace:
        """Run the explicit-softmax path and record what ``layers`` × ``kinds`` ask for (all by default).

        ``idx`` [T] or [B, T]. ``dtype`` float16 halves the memory of the recorded tensors (see
        :mod:`model.trace` for the figures). Logits are always float32 and equal the fast path's.
        """
        if idx.dim() == 1:
            idx = idx[None]
        rec = Recorder(
            layers=None if layers is None else frozenset(int(i) for i in layers),
            kinds=None if kinds is None else frozenset(kinds),
            dtype=dtype,
        )
        logits, _ = self.forward(idx, ablate=ablate, attn_mask=attn_mask, _rec=rec)
        T = idx.shape[1]
        mask = self.attention_mask(T, T, attn_mask)
        if mask is None:
            mask = torch.ones(T, T, dtype=torch.bool)
        return Trace(self.config, idx, rec.store, mask, logits)


def build_model(config: GPTConfig, *, seed: int | None = None, device: str | torch.device = "cpu") -> GPT:
    """A freshly initialised :class:`GPT`; ``seed`` makes the weights reproducible."""
    if seed is not None:
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            model = GPT(config)
        finally:
            torch.random.set_rng_state(gen_state)
    else:
        model = GPT(config)
    return model.to(device)
