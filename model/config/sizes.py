"""The sizes a :class:`~model.config.GPTConfig` derives from its fields (d_k, the MLP's width, GQA's
repeat, latent attention's parts, which layers are local or mixtures of experts): :class:`DerivedSizes`,
a base of ``GPTConfig`` whose properties read its parts.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from model.config.parts import AttentionPart, CorePart, FeedForwardPart, PositionPart


class DerivedSizes:
    """The derived sizes of :class:`~model.config.GPTConfig` (its base; holds no fields of its own)."""

    if TYPE_CHECKING:  # GPTConfig's parts, which the sizes are derived from
        core: CorePart
        attention: AttentionPart
        feed_forward: FeedForwardPart
        positional: PositionPart

    @property
    def kv_heads(self) -> int:
        """Number of key/value heads actually used (``n_kv_heads`` or ``n_heads``)."""
        return self.attention.n_kv_heads if self.attention.n_kv_heads is not None else self.attention.n_heads

    @property
    def d_head(self) -> int:
        """d_k, the per-head width actually used (``head_dim`` or ``d_model // n_heads``)."""
        if self.attention.head_dim is not None:
            return self.attention.head_dim
        return self.core.d_model // self.attention.n_heads if self.attention.n_heads else 0

    @property
    def hidden(self) -> int:
        """The MLP hidden width actually used (``d_ff`` or ``4 * d_model``)."""
        return self.feed_forward.d_ff if self.feed_forward.d_ff is not None else 4 * self.core.d_model

    @property
    def rotary_dim(self) -> int:
        """How many of each head's d_k dimensions RoPE rotates: ``int(d_k · rotary_pct)`` (GPT-NeoX), or
        latent attention's rotary part (``qk_rope_dim``)."""
        if self.mla:
            return self.qk_rope_dim
        return int(self.d_head * self.positional.rotary_pct)

    @property
    def rope_attention(self) -> float:
        """What cos and sin of the rotary angles are multiplied by: YaRN's attention factor
        (``rope_attn_factor``, or ``0.1·ln(factor) + 1`` when the factor exceeds 1), else 1."""
        if self.positional.rope_scaling != "yarn":
            return 1.0
        if self.positional.rope_attn_factor is not None:
            return float(self.positional.rope_attn_factor)
        return 0.1 * math.log(self.positional.rope_factor) + 1.0 if self.positional.rope_factor > 1 else 1.0

    @property
    def expert_hidden(self) -> int:
        """One expert MLP's hidden width (``expert_d_ff`` or :attr:`hidden`)."""
        return self.feed_forward.expert_d_ff if self.feed_forward.expert_d_ff is not None else self.hidden

    @property
    def shared_hidden(self) -> int:
        """The shared experts' MLP hidden width: ``shared_expert_d_ff``, else ``n_shared_experts`` ·
        :attr:`expert_hidden` (0 without shared experts)."""
        if not self.feed_forward.n_shared_experts:
            return 0
        if self.feed_forward.shared_expert_d_ff is not None:
            return self.feed_forward.shared_expert_d_ff
        return self.feed_forward.n_shared_experts * self.expert_hidden

    def is_moe_layer(self, layer: int) -> bool:
        """Whether block ``layer`` has a mixture-of-experts feed-forward (not one of the dense first)."""
        return self.feed_forward.n_experts is not None and layer >= self.feed_forward.moe_dense_layers

    def is_local_layer(self, layer: int) -> bool:
        """Whether block ``layer`` attends through ``sliding_window`` (``window_pattern``'s ``L``)."""
        if self.attention.sliding_window is None:
            return False
        return (
            not self.attention.window_pattern
            or self.attention.window_pattern[layer % len(self.attention.window_pattern)] == "L"
        )

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (``kv_lora_rank`` set)."""
        return self.attention.kv_lora_rank is not None

    @property
    def qk_rope_dim(self) -> int:
        """MLA: the rotated part of a query/key head (``qk_rope_head_dim`` or half of d_k, even)."""
        if self.attention.qk_rope_head_dim is not None:
            return self.attention.qk_rope_head_dim
        return (self.d_head // 2) // 2 * 2

    @property
    def qk_nope_dim(self) -> int:
        """MLA: the unrotated part of a query/key head (``qk_nope_head_dim`` or d_k)."""
        return self.attention.qk_nope_head_dim if self.attention.qk_nope_head_dim is not None else self.d_head

    @property
    def qk_dim(self) -> int:
        """The size of a query/key head: d_k, or MLA's nope + rope parts."""
        return self.qk_nope_dim + self.qk_rope_dim if self.mla else self.d_head

    @property
    def v_dim(self) -> int:
        """The size of a value head: d_k, or MLA's ``v_head_dim``."""
        if self.mla and self.attention.v_head_dim is not None:
            return self.attention.v_head_dim
        return self.d_head

    @property
    def n_rep(self) -> int:
        """Query heads per key/value head (n_heads / n_kv_heads): 1 for MHA, n_heads for MQA."""
        return self.attention.n_heads // self.kv_heads
