"""The GPT: a decoder-only Transformer whose every activation passes a named hook point.

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

Every activation passes through a named hook point (:mod:`model.nn.hooks` has the names, shapes and
their TransformerLens and :class:`~model.interp.trace.Trace` counterparts); the variant layers (norms,
positions, MLPs) come from the factories of :mod:`model.nn.layers`. Three ways to run:

* **plain** — ``model(idx)``: ``F.scaled_dot_product_attention`` (fused, never materialises the
  weights); used for training and generation, with an optional :class:`KVCache`;
* **record** — :func:`model.interp.trace.run_with_trace` (the one recorded run) hooks the points
  it records: a layer whose scores or pattern are recorded runs the explicit softmax; the logits equal
  the plain path's (float32, ``allclose``);
* **intervene** — ``with model.hooks({name: fn}):``: replace or edit any activation (head ablation,
  custom masks and activation patching are such hooks).
"""

from __future__ import annotations

import contextlib
import math
from typing import NamedTuple, TypedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.config import ConfigError, GPTConfig
from model.nn.hooks import HookPoint, attached, name_hook_points
from model.nn.layers import (
    STD,
    LearnedPositions,
    apply_rope,
    init_linear,
    make_mlp,
    make_norm,
    make_positions,
)


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
# attention and the block
# ---------------------------------------------------------------------------------------------
class Context(NamedTuple):
    """What attention needs to know of positions: RoPE's ``(cos, sin)`` [T, d_k/2] or None; the bool
    ``mask`` [T, S] (True = may attend; None = every key); ``is_causal``: the mask is the plain lower
    triangle, so the fused kernel may use its own; ``triangular``: no query may see a later key (the
    config's causal or sliding-window mask), so a written-out softmax may skip the keys after each
    query; the :class:`KVCache` or None; ``scratch``: buffers that every layer of this one forward pass
    shares (:meth:`shared`)."""

    rope: tuple[torch.Tensor, torch.Tensor] | None
    mask: torch.Tensor | None
    is_causal: bool
    kv_cache: KVCache | None
    triangular: bool = False
    scratch: dict | None = None

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


class Attention(nn.Module):
    """Multi-head / grouped-query / multi-query causal self-attention.

    ``q_proj`` [H·d_k, d], ``k_proj`` and ``v_proj`` [H_kv·d_k, d], ``o_proj`` [d, H·d_k]. Hook points
    ``q``, ``k``, ``v``, ``scores``, ``pattern``, ``z``, ``out`` (see :mod:`model.nn.hooks`).
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
            self.scale = nn.Parameter(torch.empty(H))
        elif config.attn_scale == "qk_norm":
            self.qk_gain = nn.Parameter(torch.empty(H))
        if config.qk_rmsnorm:  # Qwen3's QK-norm: RMSNorm over d_k, one [d_k] weight shared by the heads
            self.q_norm, self.k_norm = make_norm(config, d_k, rms=True), make_norm(config, d_k, rms=True)
        self.attn_dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)
        self.q, self.k, self.v, self.scores, self.pattern, self.z, self.out = (HookPoint() for _ in range(7))

    #: query rows per block of the written-out causal softmax (:meth:`attend`)
    QUERY_BLOCK = 64

    def init_weights(self) -> None:
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            init_linear(proj)
        init_linear(self.o_proj, STD / math.sqrt(2 * self.config.n_layers))  # writes into the residual stream
        if self.config.attn_scale == "learned":
            nn.init.constant_(self.scale, 1.0 / math.sqrt(self.config.d_head))
        elif self.config.attn_scale == "qk_norm":
            nn.init.constant_(self.qk_gain, math.sqrt(self.config.d_head))
        if self.config.qk_rmsnorm:
            self.q_norm.reset_parameters()
            self.k_norm.reset_parameters()

    def scaled_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The scaling rule ``s`` as ``(q', k', c)`` with ``s(Q Kᵀ) = c · q' k'ᵀ``: ``c = 1/√d_k`` (sqrt_dk),
        1 (none), ``q' = τ_h q`` (learned), ``q' = g_h q/‖q‖, k' = k/‖k‖`` (qk_norm)."""
        rule = self.config.attn_scale
        if rule == "sqrt_dk":
            return q, k, 1.0 / math.sqrt(q.shape[-1])
        if rule == "none":
            return q, k, 1.0
        if rule == "learned":
            return q * self.scale.view(1, -1, 1, 1).to(q.dtype), k, 1.0
        if rule == "qk_norm":
            qn = F.normalize(q, dim=-1) * self.qk_gain.view(1, -1, 1, 1).to(q.dtype)
            return qn, F.normalize(k, dim=-1), 1.0
        raise ValueError(f"attn_scale={rule!r} is not a scaling rule: use sqrt_dk, none, learned or qk_norm")

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: Context) -> torch.Tensor:
        """``z = softmax(mask(s(Q Kᵀ))) V`` written out, for the hook points: [B, H, T, d_k]."""
        n_rep = self.config.n_rep
        if n_rep > 1:  # GQA: query head h reads key/value head h // n_rep
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        qs, ks, c = self.scaled_qk(q, k)
        dropout = self.attn_dropout if self.training else 0.0
        if ctx.triangular and not self.scores.fns and dropout == 0:
            return self.attend_causal(qs * c if c != 1.0 else qs, ks, v, ctx)
        scores = self.scores((qs @ ks.transpose(-2, -1)).mul_(c))  # [B, H, T, S], before the mask
        if ctx.mask is not None:  # in place unless a hook may have kept the unmasked scores
            fill = scores.masked_fill if self.scores.fns else scores.masked_fill_
            scores = fill(~ctx.mask, float("-inf"))
        pattern = self.pattern(torch.softmax(scores, dim=-1))
        return (F.dropout(pattern, p=dropout) if dropout > 0 else pattern) @ v

    def attend_causal(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: Context) -> torch.Tensor:
        """:meth:`attend` under a triangular mask (no query sees a later key), ``q`` already scaled
        (``c·(q kᵀ) = (c·q) kᵀ``: T×d_k products, not T×S): query rows are taken in blocks of
        :attr:`QUERY_BLOCK`, each reading only the keys it may see, so half the products and the softmax
        of the full square are skipped and each block stays in cache. The pattern [B, H, T, S] is zero
        above the diagonal; an intervention on it (a new tensor, or an edit in place) is what ``z``
        uses."""
        assert ctx.mask is not None  # a triangular mask is never "every key"
        B, H, T, _ = q.shape
        S = k.shape[2]
        # one pattern array for every layer when its hooks only read it (they copy what they keep)
        pattern = ctx.shared((B, H, T, S), q) if self.pattern.readers_only else q.new_zeros(B, H, T, S)
        z = q.new_empty(B, H, T, v.shape[-1])
        past = S - T  # keys cached before these queries
        for i in range(0, T, self.QUERY_BLOCK):
            rows = slice(i, min(T, i + self.QUERY_BLOCK))
            seen = past + rows.stop  # these queries see keys 0..seen-1 at most; the rest stay 0
            s = q[:, :, rows] @ k[:, :, :seen].transpose(-2, -1)
            # the plain causal mask hides only keys of the diagonal square; a window hides earlier ones too
            first = past + i if ctx.is_causal else 0
            s[..., first:].masked_fill_(~ctx.mask[rows, first:seen], float("-inf"))
            block = torch.softmax(s, dim=-1)
            pattern[:, :, rows, :seen] = block
            z[:, :, rows] = block @ v[:, :, :seen]
        version = pattern._version
        hooked = self.pattern(pattern)
        if hooked is not pattern or hooked._version != version:  # an intervention changed the weights
            z = hooked @ v
        return z

    def forward(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        """``x`` [B, T, d] → ``W_O concat_h(z_h)`` [B, T, d]."""
        B, T, _ = x.shape
        H, H_kv, d_k = self.config.n_heads, self.config.kv_heads, self.config.d_head
        q = self.q_proj(x).view(B, T, H, d_k).transpose(1, 2)  # [B, H, T, d_k]
        k = self.k_proj(x).view(B, T, H_kv, d_k).transpose(1, 2)  # [B, H_kv, T, d_k]
        v = self.v_proj(x).view(B, T, H_kv, d_k).transpose(1, 2)
        if self.config.qk_rmsnorm:
            q, k = self.q_norm(q), self.k_norm(k)
        if ctx.rope is not None:
            q, k = apply_rope(q, *ctx.rope), apply_rope(k, *ctx.rope)
        if ctx.kv_cache is not None:
            k, v = ctx.kv_cache.update(self.layer, k, v)  # [B, H_kv, S, d_k]
        q, k, v = self.q(q), self.k(k), self.v(v)
        if self.scores.fns or self.pattern.fns:  # someone looks at the weights: form them
            z = self.attend(q, k, v, ctx)
        else:  # the fused kernel, which never materialises them
            qs, ks, c = self.scaled_qk(q, k)
            z = F.scaled_dot_product_attention(
                qs,
                ks,
                v,
                attn_mask=None if ctx.is_causal else ctx.mask,
                is_causal=ctx.is_causal,
                dropout_p=self.attn_dropout if self.training else 0.0,
                scale=c,
                enable_gqa=H_kv != H,
            )
        z = self.z(z)  # [B, H, T, d_k]: each head's output
        return self.out(self.resid_dropout(self.o_proj(z.transpose(1, 2).reshape(B, T, H * d_k))))


class Block(nn.Module):
    """One Transformer layer: attention then MLP, each writing into the residual stream.

    With ``parallel_residual`` (GPT-NeoX) both read the block's input: ``resid_mid = x + Attn(Norm1(x))``,
    ``resid_post = resid_mid + MLP(Norm2(x))``.
    """

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.pre = config.norm_position == "pre"
        self.parallel = config.parallel_residual
        self.norm1 = make_norm(config)
        self.attn = Attention(config, layer)
        self.norm2 = make_norm(config)
        self.mlp = make_mlp(config)
        self.resid_pre, self.resid_mid, self.resid_post = HookPoint(), HookPoint(), HookPoint()

    def init_weights(self) -> None:
        self.norm1.reset_parameters()
        self.attn.init_weights()
        self.norm2.reset_parameters()
        self.mlp.init_weights()

    def forward(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        x = self.resid_pre(x)
        if self.parallel:  # GPT-NeoX: attention and MLP both read Norm(x)
            mid = self.resid_mid(x + self.attn(self.norm1(x), ctx))
            return self.resid_post(mid + self.mlp(self.norm2(x)))
        if self.pre:  # Pre-LN: x + Attn(Norm(x)), then + MLP(Norm(·))
            mid = self.resid_mid(x + self.attn(self.norm1(x), ctx))
            return self.resid_post(mid + self.mlp(self.norm2(mid)))
        # Post-LN: Norm(x + Attn(x)), then Norm(· + MLP(·))
        mid = self.resid_mid(self.norm1(x + self.attn(x, ctx)))
        return self.resid_post(self.norm2(mid + self.mlp(mid)))


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
class ParamGroup(TypedDict):
    """One of AdamW's parameter groups from :meth:`GPT.optimizer_groups` (a plain dict at runtime)."""

    params: list[nn.Parameter]
    names: list[str]
    weight_decay: float


class GPT(nn.Module):
    """Token embedding → (positions) → L blocks → (final norm) → unembedding.

    Hook points ``embed``, ``pos_embed`` (added positions only), ``mask``, ``blocks.l.*``, ``ln_final``,
    ``logits``: :meth:`hook_points`, :meth:`hooks` (intervene; recording is
    :func:`model.interp.trace.run_with_trace`).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        config.validate()
        if config.vocab_size is None:
            raise ConfigError(["vocab_size is not set: give it, or let the tokenizer decide it"])
        self.config = config
        d, V = config.d_model, config.vocab_size
        self.tok_emb = nn.Embedding(V, d)
        self.pos_emb = make_positions(config)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm_f = make_norm(config) if config.norm_position == "pre" else None
        self.lm_head = None if config.tie_embeddings else nn.Linear(d, V, bias=False)
        self.embed, self.mask, self.ln_final, self.logits = HookPoint(), HookPoint(), HookPoint(), HookPoint()
        self.pos_embed = HookPoint() if getattr(self.pos_emb, "additive", False) else None
        self._hook_points = name_hook_points(self)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 init, each module its own (``init_weights``): N(0, 0.02) for matrices and embeddings,
        zero biases, residual writes (``o_proj``, ``fc_out``, ``w_down``) N(0, 0.02/√(2L))."""
        init_linear(self.tok_emb)
        if self.pos_emb is not None:
            self.pos_emb.init_weights()
        for block in self.blocks:
            assert isinstance(block, Block)  # a ModuleList yields Modules
            block.init_weights()
        if self.norm_f is not None:
            self.norm_f.reset_parameters()
        if self.lm_head is not None:
            init_linear(self.lm_head)

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
            if isinstance(self.pos_emb, LearnedPositions):  # positions == "learned"
                n -= self.pos_emb.weight.numel()
            if self.lm_head is not None:
                n -= self.lm_head.weight.numel()
        return n

    def attention_mask(self, T: int, S: int | None = None) -> torch.Tensor | None:
        """The config's bool mask [T, S] (True = may attend) for T queries after ``S - T`` cached
        positions; ``None`` means every query sees every key (non-causal, or a single new token)."""
        S = T if S is None else S
        W = self.config.sliding_window
        if not self.config.causal or (T == 1 and (W is None or S <= W)):
            return None
        q_pos = torch.arange(S - T, S, device=self.device)[:, None]
        k_pos = torch.arange(S, device=self.device)[None, :]
        if W is not None:  # sliding window (Mistral): only the last W keys, the query's own included
            return (k_pos <= q_pos) & (k_pos > q_pos - W)
        return k_pos <= q_pos

    # ---- hooks -------------------------------------------------------------------------------
    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by name, in forward order within each module (see :mod:`model.nn.hooks`)."""
        return dict(self._hook_points)

    def hooks(self, fns) -> contextlib.AbstractContextManager:
        """Intervene: ``with model.hooks({name: fn}):`` runs ``fn(x, hook)`` on the activation at each
        named point, in every forward inside the block (a returned tensor replaces ``x``)."""
        return attached(self._hook_points, fns)

    # ---- forward -----------------------------------------------------------------------------
    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        kv_cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``idx`` [B, T] token ids → (logits [B, T, V], mean cross-entropy or None).

        ``targets`` [B, T] (−100 = ignore). With ``kv_cache`` the new tokens continue after the cached
        positions. Ablations, custom masks and patches are interventions: :meth:`hooks` with
        :func:`~model.nn.hooks.ablate_heads`, :func:`~model.nn.hooks.use_mask`, :func:`~model.nn.hooks.patch`.
        """
        cfg = self.config
        T = idx.shape[1]
        start = kv_cache.length if kv_cache is not None else 0
        if start + T > cfg.context_length and cfg.positions != "none":
            raise ValueError(
                f"sequence of {start + T} tokens is longer than context_length={cfg.context_length}"
            )
        x = self.tok_emb(idx)  # [B, T, d]
        if cfg.embed_scale:  # Gemma: E[tok]·√d
            x = x * torch.tensor(math.sqrt(cfg.d_model), dtype=x.dtype)
        x = self.embed(x)
        if self.pos_emb is not None and self.pos_emb.additive:
            assert self.pos_embed is not None  # made with every additive position module
            x = x + self.pos_embed(self.pos_emb(start, T).to(x.dtype))
        logits, loss = self._from_block(0, self.drop(x), self._context(T, start, kv_cache), targets)
        if kv_cache is not None:
            kv_cache.length += T
        return logits, loss

    def forward_from(self, layer: int, resid_pre: torch.Tensor) -> torch.Tensor:
        """The rest of a forward pass that enters block ``layer`` with ``resid_pre`` [B, T, d] (what
        ``blocks.{layer}.resid_pre`` holds: the embeddings plus blocks 0..layer-1's writes): logits
        [B, T, V]. Equal to :meth:`forward` whose earlier blocks wrote ``resid_pre``; patching uses it to
        skip the blocks a patch at ``layer`` cannot change."""
        if not 0 <= layer < self.config.n_layers:
            raise ValueError(f"layer {layer} is not one of the model's {self.config.n_layers} blocks")
        return self._from_block(layer, resid_pre, self._context(resid_pre.shape[1], 0, None), None)[0]

    def _context(self, T: int, start: int, kv_cache: KVCache | None) -> Context:
        """RoPE's angles, the mask (through the ``mask`` hook point) and the cache of ``T`` new
        positions after ``start`` cached ones."""
        cfg = self.config
        rope = None
        if self.pos_emb is not None and not self.pos_emb.additive:
            rope = self.pos_emb(start, T)
        own = self.attention_mask(T, start + T)
        mask = self.mask(own)
        ours = mask is own  # no hook replaced the config's mask (recording it keeps it)
        plain = cfg.sliding_window is None or T <= cfg.sliding_window  # the mask is the lower triangle
        is_causal = cfg.causal and plain and start == 0 and T > 1 and ours
        triangular = cfg.causal and own is not None and ours
        return Context(rope, mask, is_causal, kv_cache, triangular, scratch={})

    def _from_block(
        self, layer: int, x: torch.Tensor, ctx: Context, targets: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Blocks ``layer``.. on the stream ``x``, then the final norm and the unembedding."""
        for block in self.blocks[layer:]:
            x = block(x, ctx)
        x = self.ln_final(self.norm_f(x) if self.norm_f is not None else x)
        logits = self.logits(self.lm_head(x) if self.lm_head is not None else x @ self.tok_emb.weight.t())
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
        return logits, loss

    def optimizer_groups(self, weight_decay: float) -> list[ParamGroup]:
        """AdamW's two parameter groups, as nanoGPT's ``configure_optimizers``: ``weight_decay`` on
        every trainable parameter with two or more dimensions (the projection matrices and the
        embedding tables, as GPT-2 and nanoGPT do), none on biases, norm gains or per-head scales.

        ``[{"params", "names", "weight_decay"}, ...]``: decayed first, each in ``named_parameters()``
        order; ``names`` are the parameters' names (take them out before handing the groups to torch).
        """
        decay = ParamGroup(params=[], names=[], weight_decay=weight_decay)
        no_decay = ParamGroup(params=[], names=[], weight_decay=0.0)
        for name, p in self.named_parameters():
            if p.requires_grad:
                group = decay if p.dim() >= 2 else no_decay
                group["params"].append(p)
                group["names"].append(name)
        return [decay, no_decay]


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
