"""The GPT: a decoder-only Transformer whose every activation passes a named hook point.

Shapes: batch ``B``, sequence ``T`` (keys ``S`` when a KV cache holds earlier positions), width
``d = d_model``, query heads ``H = n_heads``, key/value heads ``H_kv = n_kv_heads``, head size
``d_k = head_dim``, vocabulary ``V``.

One block (Pre-LN, the default)::

    resid_mid  = resid_pre + Attn(Norm1(resid_pre))
    resid_post = resid_mid + FFN(Norm2(resid_mid))

Post-LN (the original Transformer) renormalises the sum instead: ``resid_mid = Norm1(resid_pre +
Attn(resid_pre))``, ``resid_post = Norm2(resid_mid + FFN(resid_mid))``, and has no final norm.
``sandwich`` (Gemma 2/3) normalises each sublayer's output too: ``resid_pre + Norm1'(Attn(Norm1(·)))``;
``output`` (OLMo 2) only its output: ``resid_pre + Norm1(Attn(resid_pre))``.

Attention for head ``h``: ``A_h = softmax(mask(s(Q_h K_hᵀ))) V_h`` where ``s`` is the scaling chosen
by ``attn_scale``: ``x/√d_k`` (sqrt_dk), identity (none), ``τ_h·x`` with a learned ``τ_h`` initialised
to ``1/√d_k`` (learned), or ``g_h · cos(q, k)`` (qk_norm). With GQA, query head ``h`` reads key/value
head ``h // (H / H_kv)``. Sliding windows per layer, soft-capping, attention sinks and latent attention
are in :mod:`model.nn.attention`. The feed-forward ``FFN`` is an MLP (:mod:`model.nn.layers`) or a
mixture of experts (:mod:`model.nn.moe`, whose load-balancing loss joins the training loss); Gemma 2's
``final_softcap`` caps the logits, ``c·tanh(z/c)``.

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
from typing import TypedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.config import ConfigError, GPTConfig
from model.nn.attention import Attention, Context, KVCache, LatentAttention, make_attention
from model.nn.hooks import HookPoint, attached, name_hook_points
from model.nn.layers import (
    LearnedPositions,
    RotaryPositions,
    init_linear,
    make_mlp,
    make_norm,
    make_positions,
)
from model.nn.moe import MoE, aux_loss_of
from model.nn.quantized import StoredEmbedding, StoredLinear, has_stored, stored_numel
from model.progress import check as cancel_point


# ---------------------------------------------------------------------------------------------
# the block
# ---------------------------------------------------------------------------------------------
class Block(nn.Module):
    """One Transformer layer: attention then the feed-forward (an MLP, or a mixture of experts), each
    writing into the residual stream, the norms where ``norm_position`` puts them (module docstring).

    With ``parallel_residual`` (GPT-NeoX) both read the block's input: ``resid_mid = x + Attn(Norm1(x))``,
    ``resid_post = resid_mid + MLP(Norm2(x))``.
    """

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.position = config.normalization.norm_position
        self.parallel = config.normalization.parallel_residual
        self.norm1 = make_norm(config)
        self.attn = make_attention(config, layer)
        self.norm2 = make_norm(config)
        self.mlp = MoE(config) if config.is_moe_layer(layer) else make_mlp(config)
        if self.position == "sandwich":  # Gemma 2/3: a norm after each sublayer too
            self.post_norm1, self.post_norm2 = make_norm(config), make_norm(config)
        self.resid_pre, self.resid_mid, self.resid_post = HookPoint(), HookPoint(), HookPoint()

    def init_weights(self) -> None:
        self.norm1.reset_parameters()
        self.attn.init_weights()
        self.norm2.reset_parameters()
        self.mlp.init_weights()
        if self.position == "sandwich":
            self.post_norm1.reset_parameters()
            self.post_norm2.reset_parameters()

    def forward(self, x: torch.Tensor, ctx: Context) -> torch.Tensor:
        x = self.resid_pre(x)
        if self.parallel:  # GPT-NeoX: attention and MLP both read Norm(x)
            mid = self.resid_mid(x + self.attn(self.norm1(x), ctx))
            return self.resid_post(mid + self.mlp(self.norm2(x)))
        if self.position == "pre":  # Pre-LN: x + Attn(Norm(x)), then + MLP(Norm(·))
            mid = self.resid_mid(x + self.attn(self.norm1(x), ctx))
            return self.resid_post(mid + self.mlp(self.norm2(mid)))
        if self.position == "sandwich":  # Gemma 2/3: x + Norm(Attn(Norm(x))), then the same for the MLP
            mid = self.resid_mid(x + self.post_norm1(self.attn(self.norm1(x), ctx)))
            return self.resid_post(mid + self.post_norm2(self.mlp(self.norm2(mid))))
        if self.position == "output":  # OLMo 2: x + Norm(Attn(x)), then x + Norm(MLP(x))
            mid = self.resid_mid(x + self.norm1(self.attn(x, ctx)))
            return self.resid_post(mid + self.norm2(self.mlp(mid)))
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
        if config.core.vocab_size is None:
            raise ConfigError(["vocab_size is not set: give it, or let the tokenizer decide it"])
        self.config = config
        d, V = config.core.d_model, config.core.vocab_size
        self.tok_emb: nn.Embedding | StoredEmbedding = nn.Embedding(V, d)
        self.pos_emb = make_positions(config)
        self.drop = nn.Dropout(config.core.dropout)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.core.n_layers))
        self.norm_f = make_norm(config) if config.normalization.norm_position != "post" else None
        self.lm_head: nn.Linear | StoredLinear | None = (
            None if config.core.tie_embeddings else nn.Linear(d, V, bias=False)
        )
        self.embed, self.mask, self.ln_final, self.logits = HookPoint(), HookPoint(), HookPoint(), HookPoint()
        self.pos_embed = HookPoint() if getattr(self.pos_emb, "additive", False) else None
        self._hook_points = name_hook_points(self)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 init, each module its own (``init_weights``): N(0, 0.02) for matrices and embeddings,
        zero biases, residual writes (``o_proj``, ``fc_out``, ``w_down``) N(0, 0.02/√(2L)). A model
        holding matrices as stored (opened from a file, read-only) has none to draw."""
        if has_stored(self):
            raise ValueError("a model holding its matrices as stored cannot be re-initialised")
        assert isinstance(self.tok_emb, nn.Embedding)
        init_linear(self.tok_emb)
        if self.pos_emb is not None:
            self.pos_emb.init_weights()
        for block in self.blocks:
            assert isinstance(block, Block)  # a ModuleList yields Modules
            block.init_weights()
        if self.norm_f is not None:
            self.norm_f.reset_parameters()
        if isinstance(self.lm_head, nn.Linear):
            init_linear(self.lm_head)

    # ---- helpers -----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Where the parameters are (the first one's device; read without decoding a stored matrix)."""
        return next(self.parameters()).device

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameter count, matrices kept as stored (:mod:`model.nn.quantized`) included;
        ``non_embedding`` follows Kaplan et al. (and the budget calculator): it leaves out the token
        table, the learned position table and an untied output head."""
        n = sum(p.numel() for p in self.parameters()) + stored_numel(self)
        if non_embedding:
            n -= self.tok_emb.num_embeddings * self.tok_emb.embedding_dim
            if isinstance(self.pos_emb, LearnedPositions):  # positions == "learned"
                n -= self.pos_emb.weight.numel()
            if self.lm_head is not None:
                n -= self.lm_head.in_features * self.lm_head.out_features
        return n

    def attention_mask(
        self, T: int, S: int | None = None, *, layer: int | None = None
    ) -> torch.Tensor | None:
        """The config's bool mask [T, S] (True = may attend) for T queries after ``S - T`` cached
        positions: of block ``layer``, or (None) of the global layers (every layer when there is no
        ``window_pattern``); ``None`` means every query sees every key (non-causal, or one new token)."""
        S = T if S is None else S
        local = (
            self.config.is_local_layer(layer)
            if layer is not None
            else not self.config.attention.window_pattern
        )
        W = self.config.attention.sliding_window if local else None
        if not self.config.core.causal or (T == 1 and (W is None or S <= W)):
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
        position_offset: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``idx`` [B, T] token ids → (logits [B, T, V], mean cross-entropy or None).

        ``targets`` [B, T] (−100 = ignore). With ``kv_cache`` the new tokens continue after the cached
        positions. ``position_offset`` moves the whole sequence to positions ``offset..offset+T−1``
        (Hugging Face's ``position_ids``; RoPE's shift invariance is tested with it). Ablations, custom
        masks and patches are interventions: :meth:`hooks` with
        :func:`~model.nn.hooks.ablate_heads`, :func:`~model.nn.hooks.use_mask`, :func:`~model.nn.hooks.patch`.
        """
        cfg = self.config
        T = idx.shape[1]
        start = kv_cache.length if kv_cache is not None else 0
        if position_offset < 0:
            raise ValueError(f"position_offset must be 0 or more, got {position_offset}")
        end = position_offset + start + T
        if end > cfg.core.context_length and cfg.positional.positions != "none":
            raise ValueError(
                f"sequence of {end} positions is longer than context_length={cfg.core.context_length}"
            )
        x = self.tok_emb(idx)  # [B, T, d]
        if cfg.core.embed_scale:  # Gemma: E[tok]·√d
            x = x * torch.tensor(math.sqrt(cfg.core.d_model), dtype=x.dtype)
        x = self.embed(x)
        if self.pos_emb is not None and self.pos_emb.additive:
            assert self.pos_embed is not None  # made with every additive position module
            x = x + self.pos_embed(self.pos_emb(position_offset + start, T).to(x.dtype))
        ctx = self._context(T, start, kv_cache, position_offset)
        logits, loss = self._from_block(0, self.drop(x), ctx, targets)
        if kv_cache is not None:
            kv_cache.length += T
        return logits, loss

    def forward_from(self, layer: int, resid_pre: torch.Tensor) -> torch.Tensor:
        """The rest of a forward pass that enters block ``layer`` with ``resid_pre`` [B, T, d] (what
        ``blocks.{layer}.resid_pre`` holds: the embeddings plus blocks 0..layer-1's writes): logits
        [B, T, V]. Equal to :meth:`forward` whose earlier blocks wrote ``resid_pre``; patching uses it to
        skip the blocks a patch at ``layer`` cannot change."""
        if not 0 <= layer < self.config.core.n_layers:
            raise ValueError(f"layer {layer} is not one of the model's {self.config.core.n_layers} blocks")
        return self._from_block(layer, resid_pre, self._context(resid_pre.shape[1], 0, None), None)[0]

    def _context(self, T: int, start: int, kv_cache: KVCache | None, position_offset: int = 0) -> Context:
        """RoPE's angles, the mask (through the ``mask`` hook point) and the cache of ``T`` new
        positions after ``start`` cached ones (RoPE's angles from position ``position_offset + start``)."""
        cfg = self.config
        rope = local_rope = None
        if isinstance(self.pos_emb, RotaryPositions):
            p0 = position_offset + start
            rope, local_rope = self.pos_emb(p0, T), self.pos_emb.local(p0, T)
        # keys the queries see: every position so far, or in a local layer what the cache kept of them
        S = start + T
        S_local = kv_cache.seen(T, local=True) if kv_cache is not None else S
        own = self.attention_mask(
            T, S_local if cfg.attention.sliding_window and not cfg.attention.window_pattern else S
        )
        mask = self.mask(own)
        ours = mask is own  # no hook replaced the config's mask (recording it keeps it)
        W = cfg.attention.sliding_window
        short = W is None or T <= W  # a window longer than the prompt hides nothing
        first = start == 0 and T > 1
        is_causal = cfg.core.causal and (short or bool(cfg.attention.window_pattern)) and first and ours
        triangular = cfg.core.causal and own is not None and ours
        window_mask, window_is_causal = None, False
        if cfg.attention.window_pattern and ours:  # local layers: the window; global ones: the plain mask
            window_mask = self.attention_mask(T, S_local, layer=cfg.attention.window_pattern.index("L"))
            window_is_causal = cfg.core.causal and short and first
        return Context(
            rope, mask, is_causal, kv_cache, triangular, {}, window_mask, window_is_causal, local_rope
        )

    def _from_block(
        self, layer: int, x: torch.Tensor, ctx: Context, targets: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Blocks ``layer``.. on the stream ``x``, then the final norm and the unembedding."""
        for block in self.blocks[layer:]:
            cancel_point()  # a cancelled inspection stops here (model.progress); nothing outside one
            x = block(x, ctx)
        if ctx.scratch:  # the layers' shared buffers go before the logits [T, V] come
            ctx.scratch.clear()
        x = self.ln_final(self.norm_f(x) if self.norm_f is not None else x)
        logits = self.logits(self.unembed(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))
            aux = aux_loss_of(self) if self.training and self.config.feed_forward.router_aux_loss else None
            if aux is not None:  # load balancing of the mixture-of-experts layers (model.nn.moe)
                loss = loss + self.config.feed_forward.router_aux_loss * aux
        return logits, loss

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``W_U x`` [..., V] of the stream after the final norm ``x`` [..., d] (``ln_final``):
        the output head (or the tied token table; a table kept as stored by blocks of vocabulary rows,
        :meth:`~model.nn.quantized.StoredEmbedding.unembed`), soft-capped ``c·tanh(z/c)`` with
        ``final_softcap``."""
        if self.lm_head is not None:
            logits = self.lm_head(x)
        elif isinstance(self.tok_emb, StoredEmbedding):
            logits = self.tok_emb.unembed(x)
        else:
            logits = x @ self.tok_emb.weight.t()
        cap = self.config.core.final_softcap
        if cap is not None:  # Gemma 2: c·tanh(z/c), in place unless a gradient needs the input
            logits = (
                torch.tanh(logits / cap) * cap if logits.requires_grad else logits.div_(cap).tanh_().mul_(cap)
            )
        return logits

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


def init_model(config: GPTConfig, *, seed: int | None = None, device: str | torch.device = "cpu") -> GPT:
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


__all__ = ["GPT", "Attention", "Block", "Context", "KVCache", "LatentAttention", "ParamGroup", "init_model"]
