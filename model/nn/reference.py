"""The default GPT in one file, to read in one sitting: the model ``GPTConfig()`` describes, and nothing else.

:class:`model.nn.gpt.GPT` computes the same logits from the same weights (tests/model/test_reference.py
checks it under ``GPTConfig()`` itself) and adds what this file leaves out: named hook points on every
activation, the other families' parts (RMSNorm, RoPE, grouped-query and latent attention, SwiGLU,
mixtures of experts, ...), the KV cache, the fused attention kernel and weights kept as stored.

Shapes: batch ``B``, sequence ``T`` ≤ ``context_length``, width ``C = d_model``, heads ``H = n_heads``,
head size ``d_head = C/H``, vocabulary ``V``. The whole model (a GPT-2: Pre-LN, learned positions)::

    x_0    = E[idx] + P[0..T-1]                  [B, T, C]   token plus position embeddings
    x'     = x_l + Attn(LN_1(x_l))               [B, T, C]   each sublayer adds to the residual stream
    x_l+1  = x' + MLP(LN_2(x'))                  [B, T, C]   for l = 0 .. n_layers-1
    logits = LN_f(x_L) W_Uᵀ                      [B, T, V]   W_U [V, C], not tied to E

Dropout is 0 by default, so there is none. The parameter names are those of ``GPT``'s state dict, so
``ReferenceGPT(cfg).load_state_dict(GPT(cfg).state_dict())`` loads a trained model as it is.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.config import ConfigError, GPTConfig
from model.nn.layers import STD, init_linear  # STD = 0.02; init_linear: W ~ N(0, std²), b = 0

#: The config fields this file reads; every other one must keep ``GPTConfig()``'s value.
SIZES = ("vocab_size", "context_length", "n_layers", "d_model", "n_heads", "d_ff")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, each head ``h`` on its own slice of ``d_head`` features::

        Q_h, K_h, V_h = x W_Q,hᵀ, x W_K,hᵀ, x W_V,hᵀ          [B, H, T, d_head]
        A_h = softmax(Q_h K_hᵀ / √d_head + M)                [B, H, T, T]   each row sums to 1
        Attn(x) = concat_h(A_h V_h) W_Oᵀ                     [B, T, C]

    ``M[i, j] = 0`` for ``j ≤ i`` and ``−∞`` for ``j > i``: a query sees itself and earlier tokens only.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        C, self.n_heads = config.core.d_model, config.attention.n_heads
        self.q_proj = nn.Linear(C, C)  # W_Q [H·d_head, C] = [C, C]: every head's queries at once
        self.k_proj = nn.Linear(C, C)  # W_K, the keys
        self.v_proj = nn.Linear(C, C)  # W_V, the values
        self.o_proj = nn.Linear(C, C)  # W_O: the heads' outputs side by side, back to the stream

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        H, d_head = self.n_heads, C // self.n_heads
        q = self.q_proj(x).view(B, T, H, d_head).transpose(1, 2)  # [B, H, T, d_head]
        k = self.k_proj(x).view(B, T, H, d_head).transpose(1, 2)  # [B, H, T, d_head]
        v = self.v_proj(x).view(B, T, H, d_head).transpose(1, 2)  # [B, H, T, d_head]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # [B, H, T, T]: query i · key j
        mask = torch.full((T, T), float("-inf"), device=x.device).triu(1)  # −∞ above the diagonal
        pattern = torch.softmax(scores + mask, dim=-1)  # [B, H, T, T]: how much query i reads key j
        z = pattern @ v  # [B, H, T, d_head]: each head's output
        return self.o_proj(z.transpose(1, 2).reshape(B, T, C))  # heads side by side, then W_O


class MLP(nn.Module):
    """The position-wise feed-forward network ``MLP(x) = W_out GELU(W_in x + b_in) + b_out``, ``d_ff``
    (default ``4C``) wide: [B, T, C] → [B, T, d_ff] → [B, T, C]. GELU is the exact ``x·Φ(x)``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc_in = nn.Linear(config.core.d_model, config.hidden)  # W_in [d_ff, C]
        self.fc_out = nn.Linear(config.hidden, config.core.d_model)  # W_out [C, d_ff]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(F.gelu(self.fc_in(x)))


class Block(nn.Module):
    """One Pre-LN layer: ``x' = x + Attn(LN_1(x))``, then ``x' + MLP(LN_2(x'))``. LayerNorm is
    ``(x − μ)/√(σ² + ε)·γ + β`` over the C features of each position, ``ε = 1e-5``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(config.core.d_model), CausalSelfAttention(config)
        self.norm2, self.mlp = nn.LayerNorm(config.core.d_model), MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ReferenceGPT(nn.Module):
    """Token and position embeddings → ``n_layers`` blocks → final LayerNorm → unembedding."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        sizes = {name: config.get(name) for name in SIZES}
        if config.core.vocab_size is None or config != GPTConfig(**sizes):  # the default, up to its sizes
            only = ", ".join(SIZES)
            raise ConfigError([f"the reference is GPTConfig()'s model: set vocab_size, change only {only}"])
        config.validate()
        self.config, C, V = config, config.core.d_model, config.core.vocab_size
        self.tok_emb = nn.Embedding(V, C)  # E [V, C]
        self.pos_emb = nn.Embedding(config.core.context_length, C)  # P [context_length, C]
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.core.n_layers))
        self.norm_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)  # W_U [V, C]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's init: every weight ~ N(0, 0.02²), biases 0, LayerNorm γ = 1, β = 0; the two matrices
        that write into the residual stream (``o_proj``, ``fc_out``) ~ N(0, (0.02/√(2·n_layers))²), so
        the stream's variance does not grow with depth (the same draws, in the same order, as ``GPT``)."""
        resid_std = STD / math.sqrt(2 * self.config.core.n_layers)
        init_linear(self.tok_emb)
        init_linear(self.pos_emb)
        for block in self.blocks:
            assert isinstance(block, Block)  # a ModuleList yields Modules
            for norm in (block.norm1, block.norm2):
                norm.reset_parameters()
            for proj in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj):
                init_linear(proj)
            init_linear(block.attn.o_proj, resid_std)
            init_linear(block.mlp.fc_in)
            init_linear(block.mlp.fc_out, resid_std)
        self.norm_f.reset_parameters()
        init_linear(self.lm_head)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``idx`` [B, T] token ids → (logits [B, T, V], or with ``targets`` [B, T] also the mean
        cross-entropy ``−log softmax(logits)[target]`` over every position; −100 marks one to skip)."""
        T = idx.shape[1]
        if T > self.config.core.context_length:
            raise ValueError(
                f"sequence of {T} positions is longer than context_length={self.config.core.context_length}"
            )
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))  # [B, T, C]
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.norm_f(x))  # [B, T, V]
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


__all__ = ["MLP", "Block", "CausalSelfAttention", "ReferenceGPT"]
