"""GPTConfig: every architectural choice of a decoder-only Transformer, as one validated dataclass.

The JSON field names are a user-facing format (config files, checkpoints, the command line):
``vocab_size, context_length, n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff, mlp, norm,
norm_position, positions, attn_scale, causal, bias, tie_embeddings, dropout`` plus the numerical
details pretrained models need (``norm_eps``, ``norm_bias``, ``gelu_approx``, ``rope_base``) and the
parts of today's open models (Llama, Mistral, Qwen, Gemma, GPT-NeoX):

=========================  ==================================================  ===================
field                      what it does                                        used by
=========================  ==================================================  ===================
``rope_scaling``           rescaled RoPE frequencies: ``linear`` (θ_i/factor)   Llama 3.x
                           or ``llama3`` (low frequencies /factor, high ones
                           kept, smooth in between), with ``rope_factor``,
                           ``rope_low_freq_factor``, ``rope_high_freq_factor``,
                           ``rope_original_context``
``rotary_pct``             fraction of each head's d_k that RoPE rotates;       GPT-NeoX (Pythia)
                           the rest passes unrotated
``sliding_window``         a query sees only the last W keys (itself included)  Mistral
``qk_rmsnorm``             RMSNorm over d_k on every query and key head         Qwen3
                           (weights [d_k], shared by the heads), before RoPE
                           (not ``attn_scale="qk_norm"``: that is cosine
                           attention with a learned gain)
``embed_scale``            token embeddings multiplied by √d                    Gemma
``norm_offset``            RMSNorm scales by (1 + γ), γ initialised to 0        Gemma
``parallel_residual``      ``x + Attn(Norm1(x)) + MLP(Norm2(x))``: both read x  GPT-NeoX (Pythia)
=========================  ==================================================  ===================

Q/K/V biases without an output bias (Qwen2) are ``bias="qkv"``; GeGLU with GELU's tanh form (Gemma) is
``mlp="geglu"`` with ``gelu_approx="tanh"``; Gemma's head_dim 256 ≠ d/h is ``head_dim``.

Derived sizes (``None`` means "derive it"):

* ``n_kv_heads``: ``n_heads`` (multi-head attention). ``1 < n_kv_heads < n_heads`` is grouped-query
  attention (GQA), ``n_kv_heads = 1`` is multi-query attention (MQA).
* ``head_dim`` (d_k = d_v): ``d_model // n_heads``; it may be set freely (Gemma-style), in which case
  Q has width ``n_heads * head_dim`` and the output projection maps that back to ``d_model``.
* ``d_ff``: ``4 * d_model``.

``validate()`` collects every problem at once and raises :class:`ConfigError` whose ``problems``
list names each field and how to fix it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from model.errors import AttentionLabError

CHOICES: dict[str, tuple[str, ...]] = {
    "mlp": ("gelu", "relu", "swiglu", "geglu"),
    "norm": ("layernorm", "rmsnorm"),
    "norm_position": ("pre", "post"),
    "positions": ("learned", "sinusoidal", "rope", "none"),
    "attn_scale": ("sqrt_dk", "none", "learned", "qk_norm"),
    "bias": ("all", "qkv", "none"),
    "gelu_approx": ("none", "tanh"),
    "rope_scaling": ("none", "linear", "llama3"),
}

#: One line per field, shown as tooltips in the app and as ``--help`` text.
FIELD_HELP: dict[str, str] = {
    "vocab_size": "V, the number of distinct tokens; usually decided by the tokenizer.",
    "context_length": "T_max, the longest sequence the model reads (size of the learned position table).",
    "n_layers": "L, the number of Transformer blocks stacked on the residual stream.",
    "d_model": "d, the width of the residual stream and of every token vector.",
    "n_heads": "h, query heads per layer; each attends independently.",
    "n_kv_heads": "Key/value heads. = n_heads: MHA; 1: MQA; in between: GQA (K/V shared by query groups).",
    "head_dim": "d_k = d_v, the size of one head; default d_model / n_heads.",
    "d_ff": "Hidden width of the MLP; default 4·d_model.",
    "mlp": "gelu / relu: two matrices; swiglu / geglu: three (gate, up, down) as in Llama / Gemma.",
    "norm": "layernorm: subtract mean, divide by std, scale+shift; rmsnorm: divide by RMS, scale only.",
    "norm_position": "pre: x + f(Norm(x)) (GPT-2, modern); post: Norm(x + f(x)) (original Transformer).",
    "positions": "learned table, fixed sinusoids, rotary (RoPE) on q and k, or none at all.",
    "attn_scale": "sqrt_dk: QKᵀ/√d_k; none: unscaled (saturates); learned: per-head temperature; "
    "qk_norm: cosine attention with a learned gain.",
    "causal": "True: a query sees only itself and earlier tokens (decoder); False: sees everything.",
    "bias": "all: every linear layer has a bias; qkv: only Q, K, V; none (Llama).",
    "tie_embeddings": "Share the token embedding with the output head (W_U = Eᵀ).",
    "dropout": "Dropout probability on embeddings, attention weights and residual writes.",
    "norm_eps": "ε inside the norm's square root.",
    "norm_bias": "LayerNorm with a learned shift β (GPT-2); false: scale only (nanoGPT's bias=False).",
    "gelu_approx": "GELU form: exact erf, or the tanh approximation GPT-2 used.",
    "rope_base": "θ base of the rotary frequencies θ_i = base^(-2i/d_k).",
    "rope_scaling": "none; linear: every θ_i / factor; llama3: low frequencies / factor, high ones kept.",
    "rope_factor": "The factor of rope_scaling (the context is stretched this many times).",
    "rope_low_freq_factor": "llama3: wavelengths above original_context / this are divided by the factor.",
    "rope_high_freq_factor": "llama3 scaling: wavelengths below original_context / this are kept.",
    "rope_original_context": "llama3 scaling: the context length the model was first trained with.",
    "rotary_pct": "Fraction of each head's d_k that RoPE rotates (GPT-NeoX: 0.25); the rest is not rotated.",
    "sliding_window": "W: a query sees only the last W keys, itself included (Mistral); empty: all of them.",
    "qk_rmsnorm": "RMSNorm on each query and key head vector before RoPE (Qwen3's QK-norm); weights [d_k].",
    "embed_scale": "Multiply the token embeddings by √d before the first block (Gemma).",
    "norm_offset": "RMSNorm scales by (1 + γ) with γ starting at 0 (Gemma), instead of by γ.",
    "parallel_residual": "x + Attn(Norm1(x)) + MLP(Norm2(x)): attention and MLP read the same x (GPT-NeoX).",
}


#: A config file larger than this is not a config (refused before it is read).
MAX_CONFIG_BYTES = 1024 * 1024


class ConfigError(AttentionLabError, ValueError):
    """Raised by :meth:`GPTConfig.validate` with every problem found, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass
class GPTConfig:
    """A decoder-only Transformer's shape and variant choices (defaults: a small GPT-2)."""

    vocab_size: int | None = None
    context_length: int = 256
    n_layers: int = 4
    d_model: int = 128
    n_heads: int = 4
    n_kv_heads: int | None = None
    head_dim: int | None = None
    d_ff: int | None = None
    mlp: str = "gelu"
    norm: str = "layernorm"
    norm_position: str = "pre"
    positions: str = "learned"
    attn_scale: str = "sqrt_dk"
    causal: bool = True
    bias: str = "all"
    tie_embeddings: bool = False
    dropout: float = 0.0
    norm_eps: float = 1e-5
    norm_bias: bool = True
    gelu_approx: str = "none"
    rope_base: float = 10000.0
    rope_scaling: str = "none"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_context: int = 8192
    rotary_pct: float = 1.0
    sliding_window: int | None = None
    qk_rmsnorm: bool = False
    embed_scale: bool = False
    norm_offset: bool = False
    parallel_residual: bool = False

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        """Number of key/value heads actually used (``n_kv_heads`` or ``n_heads``)."""
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def d_head(self) -> int:
        """d_k, the per-head width actually used (``head_dim`` or ``d_model // n_heads``)."""
        if self.head_dim is not None:
            return self.head_dim
        return self.d_model // self.n_heads if self.n_heads else 0

    @property
    def hidden(self) -> int:
        """The MLP hidden width actually used (``d_ff`` or ``4 * d_model``)."""
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @property
    def rotary_dim(self) -> int:
        """How many of each head's d_k dimensions RoPE rotates: ``int(d_k · rotary_pct)`` (GPT-NeoX)."""
        return int(self.d_head * self.rotary_pct)

    @property
    def n_rep(self) -> int:
        """Query heads per key/value head (n_heads / n_kv_heads): 1 for MHA, n_heads for MQA."""
        return self.n_heads // self.kv_heads

    # ---- validation ----------------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Every problem with this config, each naming the field and how to fix it (empty if valid)."""
        out: list[str] = []
        ints = {
            "context_length": self.context_length,
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "n_heads": self.n_heads,
        }
        optional_ints = {
            "vocab_size": self.vocab_size,
            "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "d_ff": self.d_ff,
            "sliding_window": self.sliding_window,
        }
        for name, value in {**ints, **optional_ints}.items():
            if value is None and name in optional_ints:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                out.append(f"{name}={value!r} must be a whole number")
            elif value <= 0:
                out.append(f"{name}={value} must be a positive number (at least 1)")
        for name, options in CHOICES.items():
            value = getattr(self, name)
            if value not in options:
                out.append(f"{name}={value!r} is not one of {', '.join(options)}")
        bools = ("causal", "tie_embeddings", "norm_bias", "qk_rmsnorm", "embed_scale", "norm_offset")
        out += [
            f"{name}={getattr(self, name)!r} must be true or false"
            for name in (*bools, "parallel_residual")
            if not isinstance(getattr(self, name), bool)
        ]
        if (
            not isinstance(self.dropout, (int, float))
            or isinstance(self.dropout, bool)
            or not (0.0 <= self.dropout < 1.0)
        ):
            out.append(f"dropout={self.dropout!r} must be a probability in [0, 1)")
        if not isinstance(self.norm_eps, (int, float)) or not (0.0 < self.norm_eps < 1.0):  # NaN fails too
            out.append(f"norm_eps={self.norm_eps!r} must be a small positive number such as 1e-5")
        if (
            not isinstance(self.rope_base, (int, float))
            or isinstance(self.rope_base, bool)
            or not math.isfinite(self.rope_base)
            or self.rope_base <= 1.0
        ):
            out.append(f"rope_base={self.rope_base!r} must be greater than 1 (10000 is usual)")
        out += self._newer_problems()

        def ok(v: object) -> TypeGuard[int]:
            return isinstance(v, int) and not isinstance(v, bool) and v > 0

        if ok(self.d_model) and ok(self.n_heads) and self.head_dim is None and self.d_model % self.n_heads:
            out.append(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: "
                f"change one of them or set head_dim explicitly"
            )
        if ok(self.n_heads) and ok(self.n_kv_heads):
            if self.n_kv_heads > self.n_heads:
                out.append(
                    f"n_kv_heads={self.n_kv_heads} is larger than n_heads={self.n_heads}: "
                    f"use at most n_heads key/value heads"
                )
            elif self.n_heads % self.n_kv_heads:
                out.append(
                    f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}: "
                    f"pick n_kv_heads dividing n_heads"
                )
        if self.positions == "rope" and ok(self.d_head) and self.d_head % 2 and self.rotary_pct == 1.0:
            out.append(f"head_dim={self.d_head} must be even for rope positions (pairs are rotated)")
        if (
            self.positions == "rope"
            and ok(self.d_head)
            and self.rotary_pct != 1.0
            and isinstance(self.rotary_pct, (int, float))
            and (self.rotary_dim % 2 or self.rotary_dim == 0)
        ):
            out.append(
                f"rotary_pct={self.rotary_pct} rotates {self.rotary_dim} of head_dim={self.d_head} "
                f"dimensions: that must be an even number, at least 2"
            )
        if self.positions == "sinusoidal" and ok(self.d_model) and self.d_model % 2:
            out.append(f"d_model={self.d_model} must be even for sinusoidal positions")
        return out

    def _newer_problems(self) -> list[str]:
        """The fields of today's open models (RoPE scaling, partial rotary, sliding window, norms)."""
        out: list[str] = []

        def number(v: object) -> TypeGuard[float]:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        for name in ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor"):
            v = getattr(self, name)
            if not number(v) or v <= 0:
                out.append(f"{name}={v!r} must be a positive number")
        v = self.rope_original_context
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            out.append(f"rope_original_context={v!r} must be a positive whole number")
        if (
            self.rope_scaling == "llama3"
            and number(self.rope_low_freq_factor)
            and number(self.rope_high_freq_factor)
            and self.rope_high_freq_factor <= self.rope_low_freq_factor
        ):
            out.append(
                f"rope_high_freq_factor={self.rope_high_freq_factor} must be larger than "
                f"rope_low_freq_factor={self.rope_low_freq_factor} for llama3 scaling"
            )
        if not number(self.rotary_pct) or not (0.0 < self.rotary_pct <= 1.0):
            out.append(f"rotary_pct={self.rotary_pct!r} must be a fraction in (0, 1]")
        for name, default in (("rope_scaling", "none"), ("rotary_pct", 1.0)):
            value = getattr(self, name)
            valid = value in CHOICES["rope_scaling"] if name == "rope_scaling" else number(value)
            if self.positions != "rope" and valid and value != default:
                out.append(f"{name}={value!r} needs positions='rope'")
        if self.sliding_window is not None and not self.causal:
            out.append("sliding_window needs causal=True (the window looks back from each query)")
        if self.qk_rmsnorm and self.attn_scale == "qk_norm":
            out.append("qk_rmsnorm and attn_scale='qk_norm' both normalise q and k: choose one")
        if self.norm_offset and self.norm != "rmsnorm":
            out.append("norm_offset (scale by 1 + γ) is an RMSNorm variant: set norm='rmsnorm'")
        if self.parallel_residual and self.norm_position != "pre":
            out.append("parallel_residual needs norm_position='pre' (both branches read Norm(x))")
        return out

    def validate(self) -> GPTConfig:
        """Raise :class:`ConfigError` listing every problem; return ``self`` when valid."""
        problems = self.problems()
        if problems:
            raise ConfigError(problems)
        return self

    # ---- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, validate: bool = True) -> GPTConfig:
        """Build from a mapping; omitted fields take defaults, unknown names are errors."""
        if not isinstance(data, dict):
            raise ConfigError([f"a config must be a JSON object of fields, not {type(data).__name__}"])
        known = set(cls.field_names())
        unknown = sorted(set(data) - known)
        if unknown:
            problems = []
            for name in unknown:
                near = _closest(name, known)
                hint = f" (did you mean {near!r}?)" if near else ""
                problems.append(f"unknown option {name!r}{hint}")
            raise ConfigError(problems)
        cfg = cls(**data)
        if validate:
            cfg.validate()
        return cfg

    @classmethod
    def from_json(cls, text: str, *, validate: bool = True) -> GPTConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError([f"config is not valid JSON: {exc.msg} at line {exc.lineno}"]) from None
        except RecursionError:
            raise ConfigError(["config is not a config: its JSON is nested too deeply"]) from None
        return cls.from_dict(data, validate=validate)

    @classmethod
    def load(cls, path: str | Path, *, validate: bool = True) -> GPTConfig:
        path = Path(path)
        if path.exists() and not path.is_file():  # a folder, device or FIFO (which would block)
            raise ConfigError([f"config file {str(path)!r} is not a regular file"])
        try:
            if path.stat().st_size > MAX_CONFIG_BYTES:
                raise ConfigError([f"config file {str(path)!r} is too large for a config (over 1 MiB)"])
            text = path.read_text(encoding="utf-8-sig")  # a BOM from a Windows editor is fine
        except FileNotFoundError:
            raise ConfigError([f"config file {str(path)!r} does not exist"]) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([f"config file {str(path)!r} cannot be read: {exc}"]) from None
        return cls.from_json(text, validate=validate)

    def replace(self, **changes: Any) -> GPTConfig:
        """A copy with some fields changed (not validated)."""
        return dataclasses.replace(self, **changes)

    def with_vocab(self, vocab_size: int) -> GPTConfig:
        """A copy whose vocabulary is set by a tokenizer."""
        return dataclasses.replace(self, vocab_size=vocab_size)


def _closest(name: str, options: set[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(name, sorted(options), n=1, cutoff=0.6)
    return found[0] if found else None


def default_config(vocab_size: int | None = None) -> GPTConfig:
    """The built-in default: a GPT-2-style model that trains in about a minute on 2 CPU cores."""
    return GPTConfig(vocab_size=vocab_size)


__all__ = ["CHOICES", "FIELD_HELP", "ConfigError", "GPTConfig", "default_config"]
