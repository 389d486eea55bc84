"""GPTConfig: every architectural choice of a decoder-only Transformer, as one validated dataclass.

The JSON field names are a user-facing format (config files, checkpoints, the command line):
``vocab_size, context_length, n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff, mlp, norm,
norm_position, positions, attn_scale, causal, bias, tie_embeddings, dropout`` plus the numerical
details pretrained models need (``norm_eps``, ``norm_bias``, ``gelu_approx``, ``rope_base``) and the
parts of today's open models (Llama, Mistral, Qwen, Gemma, GPT-NeoX):

=========================  ==================================================  ===================
field                      what it does                                        used by
=========================  ==================================================  ===================
``rope_scaling``           rescaled RoPE frequencies: ``linear`` (θ_i/factor)   Llama 3.x, gpt-oss,
                           or ``llama3`` (low frequencies /factor, high ones    DeepSeek-V3 (yarn)
                           kept, smooth in between), with ``rope_factor``,
                           ``rope_low_freq_factor``, ``rope_high_freq_factor``,
                           ``rope_original_context``; or ``yarn`` (YaRN: a ramp
                           between the two over the dimensions, from
                           ``rope_beta_fast`` / ``rope_beta_slow`` rotations,
                           ``rope_truncate``; cos and sin × ``rope_attn_factor``)
``rope_local_base``        the RoPE base of the local (sliding-window) layers,  Gemma 3
                           unscaled; the global ones keep ``rope_base`` and
                           ``rope_scaling``
``rotary_pct``             fraction of each head's d_k that RoPE rotates;       GPT-NeoX (Pythia)
                           the rest passes unrotated
``sliding_window``         a query sees only the last W keys (itself included)  Mistral
``qk_rmsnorm``             RMSNorm over d_k on every query and key head         Qwen3, Gemma 3
                           (weights [d_k], shared by the heads), before RoPE
                           (not ``attn_scale="qk_norm"``: that is cosine
                           attention with a learned gain); ``qk_norm_scope``
                           ``all``: over all heads' q [H·d_k] and k [H_kv·d_k]  OLMo 2
                           at once, before they are split into heads
``attn_scale_dim``         scores scaled by 1/√(this) instead of 1/√d_k         Gemma 2/3
                           (``query_pre_attn_scalar``)
``embed_scale``            token embeddings multiplied by √d                    Gemma
``norm_offset``            RMSNorm scales by (1 + γ), γ initialised to 0        Gemma
``parallel_residual``      ``x + Attn(Norm1(x)) + MLP(Norm2(x))``: both read x  GPT-NeoX (Pythia)
``window_pattern``         which layers use ``sliding_window``: ``L`` local,    Gemma 2/3, gpt-oss
                           ``G`` global, repeated over the layers ("LG",
                           "LLLLLG"); empty: every layer
``attn_softcap``           scores ← c·tanh(scores/c) before the mask            Gemma 2
``final_softcap``          logits ← c·tanh(logits/c)                            Gemma 2
``attn_sinks``             a learned logit per head joins each softmax's         gpt-oss
                           denominator (its share goes to no key)
``n_experts`` ...          mixture-of-experts feed-forward: ``n_experts``        Mixtral, Qwen3-MoE,
                           MLPs of width ``expert_d_ff``, ``n_experts_per_token`` DeepSeek-V3, gpt-oss
                           chosen per token by a router (``router``: how its
                           weights are normalised), ``n_shared_experts`` always
                           on (``shared_expert_d_ff`` wide, Qwen2-MoE's behind
                           a σ gate: ``shared_expert_gate``), the first ``moe_dense_layers`` layers dense, a
                           load-balancing loss ``router_aux_loss`` in training;
                           DeepSeek-V3's router: ``router_choice_bias`` (a
                           per-expert bias that only chooses),
                           ``router_groups`` / ``router_topk_groups`` (experts
                           chosen from the best groups), ``router_scale``
``swiglu_limit``           gpt-oss's clamped SwiGLU with biases: gate ≤ limit,  gpt-oss
                           up in ±limit, ``(up + 1)·gate·σ(1.702·gate)``
``kv_lora_rank`` ...       multi-head latent attention: keys and values from a   DeepSeek-V2/V3
                           shared latent of ``kv_lora_rank`` (the KV cache
                           holds it and one rotary key of ``qk_rope_head_dim``),
                           queries through ``q_lora_rank`` when set, heads of
                           ``qk_nope_head_dim`` + ``qk_rope_head_dim`` (q·k) and
                           ``v_head_dim`` (values)
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

The fields come in parts (:mod:`model.config.parts`), each declaring its fields once (type, default, a
line of help, the choices or bounds of its value: :func:`~model.config.parts.base.declare`; the mappings
:data:`FIELD_HELP`, :data:`CHOICES` and :data:`FLOAT_RANGES` are read from those declarations) with its
own checks and its own rows of the parameter count: ``cfg.core`` (vocab_size, context_length,
n_layers, d_model, causal, bias, tie_embeddings, dropout, embed_scale, final_softcap),
``cfg.attention``, ``cfg.feed_forward``, ``cfg.normalization`` and ``cfg.positional``. A config is
composed of them and is read through them (``cfg.attention.n_kv_heads``); the flat names survive only as
the file format: the constructor's keywords, ``from_dict``/``to_dict`` and the JSON, ``replace`` and
``get`` by name.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.config.checks import config_problems
from model.config.fields import MAX_CONFIG_BYTES, MAX_ROPE_BASE, MAX_ROPE_CONTEXT
from model.config.parts import (
    CHOICES,
    FIELD_HELP,
    FLOAT_RANGES,
    PARTS,
    AttentionPart,
    CorePart,
    FeedForwardPart,
    NormPart,
    Part,
    PositionPart,
)
from model.config.sizes import DerivedSizes
from model.errors import AttentionLabError
from model.files import check_input, parse_json


class ConfigError(AttentionLabError, ValueError):
    """Raised by :meth:`GPTConfig.validate` with every problem found, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass(init=False)
class GPTConfig(DerivedSizes):
    """A decoder-only Transformer's shape and variant choices (defaults: a small GPT-2), as its five
    parts; its derived sizes (``d_head``, ``hidden``, ``n_rep``, ...) are
    :class:`~model.config.sizes.DerivedSizes`'.

    ``GPTConfig(n_layers=2, n_kv_heads=1)`` takes the fields by their file names (the names of config
    files, checkpoints and ``--set``), each handed to the part that owns it; an omitted field keeps its
    part's default. A field is read from its part: ``cfg.attention.n_kv_heads``.
    """

    #: the model-level fields: vocabulary, context, width and depth, masking, biases, tying
    core: CorePart
    #: the attention sublayer's fields: heads, score scale, QK-norm, windows, sinks, latent attention
    attention: AttentionPart
    #: the feed-forward sublayer's fields: the MLP's kind and width, the mixture of experts
    feed_forward: FeedForwardPart
    #: the norms' fields: kind, ε, shift, offset, where they sit, the parallel residual
    normalization: NormPart
    #: the positional encoding's fields: the kind, RoPE's base, scaling and partial rotary
    positional: PositionPart

    def __init__(self, **fields: Any) -> None:
        unknown = sorted(set(fields) - set(_OWNER))
        if unknown:
            raise TypeError(f"GPTConfig() got an unexpected keyword argument {unknown[0]!r}")
        for kind in PARTS:
            mine = {name: fields[name] for name in kind.owns() if name in fields}
            setattr(self, kind.key, kind(**mine))

    @property
    def parts(self) -> tuple[Part, ...]:
        """Every part of this config, in :data:`~model.config.parts.PARTS` order."""
        return tuple(getattr(self, kind.key) for kind in PARTS)

    def get(self, name: str) -> Any:
        """The value of the field whose file name is ``name`` (``"n_kv_heads"``), from its part: for code
        that holds field names (forms, ``--set``, comparisons); code that knows the field reads the part."""
        return getattr(getattr(self, _OWNER[name].key), name)

    # ---- validation (model.config.checks) ------------------------------------------------------
    def problems(self) -> list[str]:
        """Every problem with this config, each naming the field and how to fix it (empty if valid)."""
        return config_problems(self)

    def validate(self) -> GPTConfig:
        """Raise :class:`ConfigError` listing every problem; return ``self`` when valid."""
        problems = self.problems()
        if problems:
            raise ConfigError(problems)
        return self

    # ---- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The fields by their file names, one flat mapping (the JSON of config files and checkpoints)."""
        return {name: value for part in self.parts for name, value in dataclasses.asdict(part).items()}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def field_names(cls) -> list[str]:
        """Every field's file name, part by part (:data:`~model.config.parts.PARTS` order)."""
        return list(_OWNER)

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        """Every field's declaration (name, default), part by part, as :func:`dataclasses.fields`."""
        return tuple(f for kind in PARTS for f in dataclasses.fields(kind))

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        """Every field's type by its file name, as :func:`typing.get_type_hints` gives a part's."""
        hints: dict[str, Any] = {}
        for kind in PARTS:
            own = typing.get_type_hints(kind)
            hints.update({name: own[name] for name in kind.owns()})
        return hints

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
        data = parse_json(text, error=lambda line: ConfigError([line]), what="config")
        return cls.from_dict(data, validate=validate)

    @classmethod
    def load(cls, path: str | Path, *, validate: bool = True) -> GPTConfig:
        path = check_input(path, error=lambda line: ConfigError([line]), what=f"config file {str(path)!r}")
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
        """A copy with some fields changed, named by their file names (not validated)."""
        return GPTConfig(**{**self.to_dict(), **changes})

    def with_vocab(self, vocab_size: int) -> GPTConfig:
        """A copy whose vocabulary is set by a tokenizer."""
        return self.replace(vocab_size=vocab_size)


#: Each field's file name → the kind of part that declares it, part by part.
_OWNER: dict[str, type[Part]] = {name: kind for kind in PARTS for name in kind.owns()}


def _closest(name: str, options: set[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(name, sorted(options), n=1, cutoff=0.6)
    return found[0] if found else None


def default_config(vocab_size: int | None = None) -> GPTConfig:
    """The built-in default: a GPT-2-style model that trains in about a minute on 2 CPU cores."""
    return GPTConfig(vocab_size=vocab_size)


__all__ = [
    "CHOICES",
    "FIELD_HELP",
    "FLOAT_RANGES",
    "MAX_CONFIG_BYTES",
    "MAX_ROPE_BASE",
    "MAX_ROPE_CONTEXT",
    "PARTS",
    "AttentionPart",
    "ConfigError",
    "CorePart",
    "FeedForwardPart",
    "GPTConfig",
    "NormPart",
    "Part",
    "PositionPart",
    "default_config",
]
