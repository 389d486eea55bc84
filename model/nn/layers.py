"""The variant layers of the GPT, each chosen by one config field through a small factory.

* :func:`make_norm` — ``norm``: LayerNorm or RMSNorm;
* :func:`make_positions` — ``positions``: a learned or sinusoidal table added to the token embeddings,
  RoPE (rotations of q and k inside attention: :func:`apply_rope`), or none;
* :func:`make_mlp` — ``mlp``: GELU / ReLU, or gated SwiGLU (gpt-oss's clamped one with
  ``swiglu_limit``) / GeGLU.

Each module declares its own initialisation (``init_weights``) with :func:`init_linear`: GPT-2's
N(0, 0.02) for matrices and embeddings, zero biases, and N(0, 0.02/√(2L)) for the matrices that write
into the residual stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn as nn

from model.config import GPTConfig
from model.nn.hooks import HookPoint

STD = 0.02  # GPT-2's init: N(0, 0.02) for matrices and embeddings, zero biases


def init_linear(layer: nn.Linear | nn.Embedding, std: float = STD) -> None:
    """``W ~ N(0, std²)``, ``b = 0``."""
    nn.init.normal_(layer.weight, mean=0.0, std=std)
    bias = getattr(layer, "bias", None)  # an Embedding has none; a Linear's may be None
    if bias is not None:
        nn.init.zeros_(bias)


class OffsetRMSNorm(nn.Module):
    """Gemma's RMSNorm ``x/√(mean(x²)+ε)·(1 + γ)``, γ [n] initialised to 0 (so it starts as identity scale).

    Computed in float32 whatever the input's dtype, as Gemma does, then cast back.
    """

    def __init__(self, n: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)


#: What :func:`make_norm` builds.
Norm = nn.LayerNorm | nn.RMSNorm | OffsetRMSNorm


def make_norm(config: GPTConfig, n: int | None = None, *, rms: bool = False) -> Norm:
    """LayerNorm ``(x-μ)/√(σ²+ε)·γ + β`` (β only when ``norm_bias``) or RMSNorm ``x/√(mean(x²)+ε)·γ``
    (``·(1 + γ)`` with ``norm_offset``), over the last ``n`` features (default ``d_model``);
    ``rms``: RMSNorm whatever ``norm`` says (the per-head QK-norm, ``qk_rmsnorm``)."""
    n = config.core.d_model if n is None else n
    if config.normalization.norm == "rmsnorm" or rms:
        if config.normalization.norm_offset:
            return OffsetRMSNorm(n, eps=config.normalization.norm_eps)
        return nn.RMSNorm(n, eps=config.normalization.norm_eps)
    return nn.LayerNorm(n, eps=config.normalization.norm_eps, bias=config.normalization.norm_bias)


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


def rope_frequencies(config: GPTConfig, *, local: bool = False) -> torch.Tensor:
    """The rotary frequencies θ_i [r/2] of ``config`` (``r = rotary_dim``), after ``rope_scaling``;
    ``local``: those of the local layers (``rope_local_base``, unscaled).

    ``θ_i = base^(-2i/r)``; ``linear`` divides every θ_i by ``rope_factor``; ``llama3`` (Llama 3.1)
    looks at each wavelength λ_i = 2π/θ_i: above ``C₀/low_freq_factor`` (C₀ = ``rope_original_context``)
    θ_i / factor, below ``C₀/high_freq_factor`` θ_i unchanged, in between the blend
    ``(1-s)·θ_i/factor + s·θ_i`` with ``s = (C₀/λ_i - low) / (high - low)``; ``yarn``:
    :func:`yarn_frequencies`.
    """
    r = config.rotary_dim
    if local and config.positional.rope_local_base is not None:
        return 1.0 / (config.positional.rope_local_base ** (torch.arange(0, r, 2, dtype=torch.float32) / r))
    inv_freq = 1.0 / (config.positional.rope_base ** (torch.arange(0, r, 2, dtype=torch.float32) / r))
    if config.positional.rope_scaling == "linear":
        return inv_freq / config.positional.rope_factor
    if config.positional.rope_scaling == "llama3":
        c = config
        return llama3_frequencies(
            inv_freq,
            c.positional.rope_factor,
            c.positional.rope_low_freq_factor,
            c.positional.rope_high_freq_factor,
            c.positional.rope_original_context,
        )
    if config.positional.rope_scaling == "yarn":
        return yarn_frequencies(config)
    return inv_freq


def yarn_frequencies(config: GPTConfig) -> torch.Tensor:
    """YaRN's frequencies (Peng et al. 2023), as transformers' ``_compute_yarn_parameters`` computes them.

    With ``r = rotary_dim``, base ``b``, factor ``s``, C₀ = ``rope_original_context``: dimension pair
    ``i`` turns ``C₀·θ_i/2π`` times over C₀; the pairs between ``lo = d(β_fast)`` and ``hi = d(β_slow)``,
    ``d(n) = r·ln(C₀/(2πn)) / (2·ln b)`` (floored / ceiled with ``rope_truncate``, clipped to [0, r-1]),
    blend ``θ_i/s`` and ``θ_i`` along the ramp ``γ_i = clamp((i - lo)/(hi - lo), 0, 1)``:
    ``θ'_i = θ_i/s·γ_i + θ_i·(1 - γ_i)``. The attention factor (:attr:`GPTConfig.rope_attention`)
    scales cos and sin (:class:`RotaryPositions`).
    """
    r, base, factor = config.rotary_dim, config.positional.rope_base, config.positional.rope_factor
    c0 = config.positional.rope_original_context

    def correction_dim(rotations: float) -> float:
        return (r * math.log(c0 / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = (
        correction_dim(config.positional.rope_beta_fast),
        correction_dim(config.positional.rope_beta_slow),
    )
    if config.positional.rope_truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, r - 1)
    if low == high:
        high += 0.001  # as transformers does: no division by zero
    ramp = torch.clamp((torch.arange(r // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    pos_freqs = base ** (torch.arange(0, r, 2, dtype=torch.float32) / r)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor


def llama3_frequencies(
    inv_freq: torch.Tensor, factor: float, low: float, high: float, c0: float
) -> torch.Tensor:
    """``llama3`` scaling of the frequencies ``inv_freq`` [r/2] (see :func:`rope_frequencies`); a GGUF
    file stores ``inv_freq / llama3_frequencies(inv_freq, ...)`` as its ``rope_freqs`` tensor."""
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > c0 / low, inv_freq / factor, inv_freq)
    smooth = (c0 / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < c0 / high) * ~(wavelen > c0 / low)
    return torch.where(medium, blended, scaled)


def rope_tables(
    n_positions: int,
    head_dim: int,
    base: float = 10000.0,
    inv_freq: torch.Tensor | None = None,
    scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles ``p·θ_i`` with ``θ_i = base^(-2i/d_k)`` (or the given
    ``inv_freq``), each times ``scale`` (YaRN's attention factor; 1 otherwise): each [n_positions, d_k/2]."""
    if inv_freq is None:
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
    if scale != 1.0:
        return torch.cos(angles) * scale, torch.sin(angles) * scale
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs ``(x_i, x_{i+d_k/2})`` of every head vector by the angle of its position.

    ``x`` [B, H, T, d_k]; ``cos``/``sin`` [T, r/2]. After rotation ``q_m · k_n`` depends on
    positions only through ``m - n`` (the half-split convention of GPT-NeoX and Llama). When
    ``r < d_k`` (partial rotary, ``rotary_pct``) only the first ``r`` dimensions are rotated, as pairs
    ``(x_i, x_{i+r/2})``; the others pass unchanged.
    """
    r = 2 * cos.shape[-1]
    if r < x.shape[-1]:
        return torch.cat([apply_rope(x[..., :r], cos, sin), x[..., r:]], dim=-1)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class LearnedPositions(nn.Embedding):
    """A learned table ``P`` [C, d] added to the token embeddings: ``x_t = E[tok_t] + P[t]``."""

    additive = True

    # Every position module is called as (start, T), not as an Embedding on ids: a deliberate override
    def forward(self, start: int, T: int) -> torch.Tensor:  # type: ignore[override]  # [T, d]
        return super().forward(torch.arange(start, start + T, device=self.weight.device))

    def init_weights(self) -> None:
        init_linear(self)


class SinusoidalPositions(nn.Module):
    """The fixed table of :func:`sinusoidal_table`, added to the token embeddings."""

    additive = True
    table: torch.Tensor  # a buffer

    def __init__(self, config: GPTConfig):
        super().__init__()
        table = sinusoidal_table(config.core.context_length, config.core.d_model)
        self.register_buffer("table", table, persistent=False)

    def forward(self, start: int, T: int) -> torch.Tensor:  # [T, d]
        return self.table[start : start + T]

    def init_weights(self) -> None:
        pass


class RotaryPositions(nn.Module):
    """RoPE: nothing is added; attention rotates q and k by the angles of :func:`rope_tables` (times
    YaRN's attention factor). With ``rope_local_base`` (Gemma 3) the local layers have tables of their
    own, ``local_cos`` / ``local_sin`` (:meth:`local`)."""

    additive = False
    cos: torch.Tensor  # buffers
    sin: torch.Tensor
    local_cos: torch.Tensor | None
    local_sin: torch.Tensor | None

    def __init__(self, config: GPTConfig):
        super().__init__()
        C, d_k = config.core.context_length, config.d_head
        cos, sin = rope_tables(C, d_k, inv_freq=rope_frequencies(config), scale=config.rope_attention)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        local = (
            rope_tables(C, d_k, inv_freq=rope_frequencies(config, local=True))
            if config.positional.rope_local_base is not None
            else (None, None)
        )
        self.register_buffer("local_cos", local[0], persistent=False)
        self.register_buffer("local_sin", local[1], persistent=False)

    def forward(self, start: int, T: int) -> tuple[torch.Tensor, torch.Tensor]:  # each [T, d_k/2]
        return self.cos[start : start + T], self.sin[start : start + T]

    def local(self, start: int, T: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The local layers' (cos, sin) [T, d_k/2] when they have their own base, else None."""
        if self.local_cos is None or self.local_sin is None:
            return None
        return self.local_cos[start : start + T], self.local_sin[start : start + T]

    def init_weights(self) -> None:
        pass


def make_positions(config: GPTConfig) -> Positions | None:
    """How positions enter: ``learned``, ``sinusoidal`` (added to x), ``rope`` (rotates q, k), ``none``."""
    if config.positional.positions == "learned":
        return LearnedPositions(config.core.context_length, config.core.d_model)
    if config.positional.positions == "sinusoidal":
        return SinusoidalPositions(config)
    if config.positional.positions == "rope":
        return RotaryPositions(config)
    return None


#: What :func:`make_positions` builds (or None).
Positions = LearnedPositions | SinusoidalPositions | RotaryPositions


class MLP(nn.Module):
    """Position-wise feed-forward ``W_out φ(W_in x)``, φ = GELU or ReLU; ``d_ff`` wide (an expert's
    width for a mixture of experts), its output through the hook point ``out`` when ``hooked``."""

    def __init__(self, config: GPTConfig, act: nn.Module, d_ff: int | None = None, hooked: bool = True):
        super().__init__()
        d, d_ff, bias = config.core.d_model, d_ff or config.hidden, config.core.bias == "all"
        self.fc_in = nn.Linear(d, d_ff, bias=bias)
        self.fc_out = nn.Linear(d_ff, d, bias=bias)
        self.act = act
        self.dropout = nn.Dropout(config.core.dropout)
        self.out = HookPoint() if hooked else nn.Identity()
        self.resid_std = STD / math.sqrt(2 * config.core.n_layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(self.fc_out(self.act(self.fc_in(x)))))

    def init_weights(self) -> None:
        init_linear(self.fc_in)
        init_linear(self.fc_out, self.resid_std)  # writes into the residual stream


class GatedMLP(nn.Module):
    """Gated feed-forward ``W_down(φ(W_gate x) ⊙ W_up x)``: SwiGLU (φ = SiLU), GeGLU (φ = GELU)."""

    def __init__(self, config: GPTConfig, act: nn.Module, d_ff: int | None = None, hooked: bool = True):
        super().__init__()
        d, d_ff, bias = config.core.d_model, d_ff or config.hidden, config.core.bias == "all"
        self.w_gate = nn.Linear(d, d_ff, bias=bias)
        self.w_up = nn.Linear(d, d_ff, bias=bias)
        self.w_down = nn.Linear(d_ff, d, bias=bias)
        self.act = act
        self.dropout = nn.Dropout(config.core.dropout)
        self.out = HookPoint() if hooked else nn.Identity()
        self.resid_std = STD / math.sqrt(2 * config.core.n_layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(self.w_down(self.act(self.w_gate(x)) * self.w_up(x))))

    def init_weights(self) -> None:
        init_linear(self.w_gate)
        init_linear(self.w_up)
        init_linear(self.w_down, self.resid_std)  # writes into the residual stream


class ClampedSwiGLU(GatedMLP):
    """gpt-oss's SwiGLU (``swiglu_limit`` = c): ``g = min(W_gate x, c)``, ``u = clamp(W_up x, -c, c)``,
    ``W_down((u + 1) ⊙ g·σ(α·g))`` with ``α`` = :attr:`ALPHA`; the same three matrices as SwiGLU."""

    #: gpt-oss's swiglu_alpha
    ALPHA = 1.702

    def __init__(self, config: GPTConfig, d_ff: int | None = None, hooked: bool = True):
        super().__init__(config, nn.SiLU(), d_ff, hooked)
        self.limit = float(config.feed_forward.swiglu_limit or 0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.w_gate(x).clamp(max=self.limit)
        up = self.w_up(x).clamp(min=-self.limit, max=self.limit)
        glu = gate * torch.sigmoid(gate * self.ALPHA)
        return self.out(self.dropout(self.w_down((up + 1) * glu)))


def make_mlp(config: GPTConfig, d_ff: int | None = None, *, hooked: bool = True) -> MLP | GatedMLP:
    """The MLP named by ``config.feed_forward.mlp``: gelu, relu, swiglu (gpt-oss's clamped form with
    ``swiglu_limit``; and geglu, for a model that needs it), ``d_ff`` wide (default ``config.hidden``);
    ``hooked=False`` for an expert inside a mixture, whose output is the mixture's
    (:class:`model.nn.moe.MoE`)."""
    gelu = nn.GELU(approximate=config.feed_forward.gelu_approx)
    makers: dict[str, Callable[[], MLP | GatedMLP]] = {
        "gelu": lambda: MLP(config, gelu, d_ff, hooked),
        "relu": lambda: MLP(config, nn.ReLU(), d_ff, hooked),
        "swiglu": lambda: (
            ClampedSwiGLU(config, d_ff, hooked)
            if config.feed_forward.swiglu_limit is not None
            else GatedMLP(config, nn.SiLU(), d_ff, hooked)
        ),
        "geglu": lambda: GatedMLP(config, gelu, d_ff, hooked),
    }
    return makers[config.feed_forward.mlp]()
