"""Open the model families people study today from a local Hugging Face folder, exactly.

A folder is recognised by ``config.json``'s ``model_type``; each family maps onto :class:`GPTConfig`
fields (:func:`family_config`) and its tensor names onto ours (:func:`family_entries`):

==============  ===========================================================================================
``model_type``  what it sets beyond a Llama-shaped config (RoPE, RMSNorm, SwiGLU, no biases, GQA)
==============  ===========================================================================================
``llama``       ``rope_base`` (rope_theta), ``rope_scaling`` ``linear`` / ``llama3`` and its factors
``mistral``     ``sliding_window`` (applied as a mask: a query sees the last W keys)
``qwen2``       ``bias="qkv"`` (Q, K, V biases; none on the output or the MLP)
``qwen3``       ``qk_rmsnorm`` (per-head RMSNorm of q and k, before RoPE); an explicit ``head_dim``
``gemma``       ``embed_scale`` (×√d), ``norm_offset`` (RMSNorm ×(1+γ)), ``mlp="geglu"`` with tanh GELU,
                ``head_dim`` (256 in the real ones ≠ d/h), tied embeddings
``gpt_neox``    LayerNorm with biases, ``parallel_residual``, ``rotary_pct``, every linear layer biased,
                exact GELU MLP, untied head (``embed_out``)
==============  ===========================================================================================

Tensor names, layer ``i`` (Llama-shaped families: prefix ``model.``):

================================================  =====================================  ============
theirs                                            ours                                   how
================================================  =====================================  ============
``embed_tokens``, ``norm``, ``lm_head``           ``tok_emb``, ``norm_f``, ``lm_head``   as is
``layers.i.input_layernorm``                      ``blocks.i.norm1``                     as is
``layers.i.post_attention_layernorm``             ``blocks.i.norm2``                     as is
``layers.i.self_attn.{q,k,v,o}_proj``             ``blocks.i.attn.{q,k,v,o}_proj``       as is
``layers.i.self_attn.{q,k}_norm`` (qwen3)         ``blocks.i.attn.{q,k}_norm``           as is
``layers.i.mlp.{gate,up,down}_proj``              ``blocks.i.mlp.w_{gate,up,down}``      as is
``gpt_neox.embed_in``, ``final_layer_norm``       ``tok_emb``, ``norm_f``                as is
``embed_out``                                     ``lm_head``                            as is
``gpt_neox.layers.i.attention.query_key_value``   ``q_proj``, ``k_proj``, ``v_proj``     per head
``gpt_neox.layers.i.attention.dense``             ``o_proj``                             as is
``gpt_neox.layers.i.mlp.dense_h_to_4h``, ``4h_to_h``  ``mlp.fc_in``, ``mlp.fc_out``      as is
================================================  =====================================  ============

GPT-NeoX fuses Q, K and V per head: the rows of ``query_key_value`` [3·H·d_k, d] are H groups of
``[q_h; k_h; v_h]`` (each d_k rows), so ``W.view(H, 3, d_k, d)[:, j]`` is Q (j=0), K, V.

What is not implemented is refused with one line naming it (logit soft-capping, RoPE scaling other
than linear/llama3, windows on only some layers, attention biases without MLP biases or the reverse).
Tensors are read one at a time from safetensors (sharded with an index) or ``pytorch_model.bin`` via
``torch.load(weights_only=True)``; bf16 / fp16 weights are upcast to ``dtype`` (float32 by default;
``dtype=torch.bfloat16`` keeps them): :func:`model.io.hf.load_hf_family` does the reading. Each row is
a :class:`~model.io.weights.WeightMap`, as GPT-2's and nanoGPT's are.
"""

from __future__ import annotations

import re
from typing import Any

from model.config import ConfigError, GPTConfig
from model.io.checkpoint import CheckpointError
from model.io.weights import WeightMap, vocab_of

__all__ = ["FAMILIES", "IGNORED", "family_config", "family_entries", "family_kind"]

#: ``model_type`` values opened here, each as kind ``"hf-" + model_type``.
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gpt_neox")

#: HF activation names -> our GELU form (``silu`` is SwiGLU's).
_GELU_FORMS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}

#: Buffers some files carry that are not weights (causal masks, RoPE frequencies).
IGNORED = re.compile(r"(\.attention\.(bias|masked_bias)|rotary_emb\.inv_freq)$")


def family_kind(model_type: str) -> str:
    """The :data:`model.io.pretrained.KINDS` entry of a family: ``"hf-llama"`` etc."""
    return f"hf-{model_type}"


def _rope_fields(hf: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """``rope_base``, ``rope_scaling`` (+ factors) and ``rotary_pct`` from either form transformers writes:
    ``rope_parameters`` (v5) or ``rope_theta`` + ``rope_scaling`` (+ ``rotary_pct``, ``rotary_emb_base``)."""
    params = hf.get("rope_parameters")
    params = dict(params) if isinstance(params, dict) else {}
    scaling = hf.get("rope_scaling")
    if isinstance(scaling, dict):
        params = {**scaling, **params}
    theta = params.get("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    pct = params.get("partial_rotary_factor", hf.get("partial_rotary_factor", hf.get("rotary_pct", 1.0)))
    out: dict[str, Any] = {"rope_base": float(theta), "rotary_pct": float(pct)}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return out
    if kind not in ("linear", "llama3"):
        problems.append(f"rope_scaling of type {kind!r} is not implemented (only linear and llama3 are)")
        return out
    out.update(rope_scaling=kind, rope_factor=float(params.get("factor", 1.0)))
    if kind == "llama3":
        try:
            out.update(
                rope_low_freq_factor=float(params["low_freq_factor"]),
                rope_high_freq_factor=float(params["high_freq_factor"]),
                rope_original_context=int(params["original_max_position_embeddings"]),
            )
        except (KeyError, TypeError, ValueError):
            problems.append(
                "llama3 rope_scaling needs low_freq_factor, high_freq_factor and "
                "original_max_position_embeddings"
            )
    return out


def _window(hf: dict[str, Any], model_type: str, n_layers: Any, problems: list[str]) -> int | None:
    """The sliding window applied to every layer, or None; windows on only some layers are refused."""
    W = hf.get("sliding_window")
    types = hf.get("layer_types")
    if isinstance(types, list) and types:
        sliding = [t == "sliding_attention" for t in types]
        if all(sliding):
            return W
        if any(sliding):
            problems.append("sliding-window attention on only some layers (layer_types) is not implemented")
        return None
    if model_type == "mistral":
        return W
    if hf.get("use_sliding_window") and W is not None:  # Qwen: layers from max_window_layers on slide
        first = hf.get("max_window_layers") or 0
        if first >= n_layers:
            return None
        if first > 0:
            problems.append(
                "sliding-window attention on only some layers (max_window_layers) is not implemented"
            )
            return None
        return W
    return None


def family_config(hf: dict[str, Any]) -> GPTConfig:
    """Our config for a ``config.json`` of one of :data:`FAMILIES` (transformers' defaults for what it
    omits). Raises :class:`CheckpointError` naming every missing field or unsupported feature."""
    try:
        return _family_config(hf)
    except (TypeError, ValueError, AttributeError) as exc:  # e.g. "rope_theta": "ten thousand"
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(
            f"config.json ({hf.get('model_type')}): a setting has a value of the wrong kind ({exc})"
        ) from None


def _family_config(hf: dict[str, Any]) -> GPTConfig:
    model_type = hf.get("model_type")
    if model_type not in FAMILIES:
        raise CheckpointError(f"config.json: model_type {model_type!r} is not one of {', '.join(FAMILIES)}")
    problems: list[str] = []
    required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    missing = [f for f in required if f not in hf]
    if missing:
        raise CheckpointError(f"config.json ({model_type}): missing {', '.join(missing)}")
    problems += [
        f"{cap}={hf[cap]} (logit soft-capping) is not implemented"
        for cap in ("final_logit_softcapping", "attn_logit_softcapping")
        if hf.get(cap) is not None
    ]
    neox = model_type == "gpt_neox"
    n_layers = hf["num_hidden_layers"]
    fields: dict[str, Any] = dict(
        vocab_size=hf["vocab_size"],
        context_length=hf.get("max_position_embeddings", 2048),
        n_layers=n_layers,
        d_model=hf["hidden_size"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        positions="rope",
        attn_scale="sqrt_dk",
        causal=True,
        dropout=0.0,
        **_rope_fields(hf, problems),
    )
    if not neox:
        fields["n_kv_heads"] = hf.get("num_key_value_heads") or hf["num_attention_heads"]
        head_dim = hf.get("head_dim")
        d, H = hf["hidden_size"], hf["num_attention_heads"]
        if head_dim is not None and (head_dim != d // H or d % H):  # not the d / H the config implies
            fields["head_dim"] = head_dim
    if neox:
        act = hf.get("hidden_act", "gelu")
        if act not in _GELU_FORMS:
            problems.append(f"hidden_act {act!r} is not one of {', '.join(_GELU_FORMS)}")
        if not hf.get("attention_bias", True):
            problems.append(
                "attention_bias=false (an unbiased attention beside a biased MLP) is not implemented"
            )
        fields.update(
            mlp="gelu",
            gelu_approx=_GELU_FORMS.get(act, "none"),
            norm="layernorm",
            norm_bias=True,
            norm_eps=float(hf.get("layer_norm_eps", 1e-5)),
            bias="all",
            parallel_residual=bool(hf.get("use_parallel_residual", True)),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        )
    else:
        gemma = model_type == "gemma"
        act = (
            hf.get("hidden_activation") or hf.get("hidden_act") or ("gelu_pytorch_tanh" if gemma else "silu")
        )
        if gemma and act == "gelu":  # transformers reads Gemma's legacy "gelu" as the tanh form
            act = "gelu_pytorch_tanh"
        if act == "silu":
            fields.update(mlp="swiglu")
        elif act in _GELU_FORMS:
            fields.update(mlp="geglu", gelu_approx=_GELU_FORMS[act])
        else:
            problems.append(f"hidden_act {act!r} is not silu or a GELU")
        attn_bias = bool(hf.get("attention_bias", False))
        mlp_bias = bool(hf.get("mlp_bias", False))
        if model_type == "qwen2":
            bias = "qkv"
        elif attn_bias and mlp_bias:
            bias = "all"
        elif attn_bias or mlp_bias:
            bias = "none"
            problems.append(
                f"attention_bias={attn_bias} with mlp_bias={mlp_bias} is not implemented (biases on "
                f"attention and MLP alike, or on neither)"
            )
        else:
            bias = "none"
        fields.update(
            norm="rmsnorm",
            norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            bias=bias,
            tie_embeddings=bool(hf.get("tie_word_embeddings", gemma)),
            sliding_window=_window(hf, model_type, n_layers, problems),
            qk_rmsnorm=model_type == "qwen3",
            embed_scale=gemma,
            norm_offset=gemma,
        )
    if problems:
        raise CheckpointError(f"config.json ({model_type}): " + "; ".join(problems))
    try:
        return GPTConfig(**fields).validate()
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"config.json ({model_type}): {exc}") from None


def family_entries(model_type: str, cfg: GPTConfig) -> list[WeightMap]:
    """The tensors a ``model_type`` file must hold for ``cfg`` and where each goes (``lm_head`` included
    when untied)."""
    d, dff, V = cfg.d_model, cfg.hidden, vocab_of(cfg)
    H, H_kv, d_k = cfg.n_heads, cfg.kv_heads, cfg.d_head
    es: list[WeightMap] = []
    if model_type == "gpt_neox":
        p = "gpt_neox."
        es.append(WeightMap(p + "embed_in.weight", (V, d), ("tok_emb.weight",)))
        for i in range(cfg.n_layers):
            t, b = f"{p}layers.{i}.", f"blocks.{i}."
            qkv = tuple(f"{b}attn.{n}_proj" for n in "qkv")
            es += [
                WeightMap(f"{t}{theirs}.{kind}", (d,), (f"{b}{ours}.{kind}",))
                for theirs, ours in (("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2"))
                for kind in ("weight", "bias")
            ]
            es.append(
                WeightMap(
                    t + "attention.query_key_value.weight",
                    (3 * H * d_k, d),
                    tuple(n + ".weight" for n in qkv),
                    heads=H,
                )
            )
            es.append(
                WeightMap(
                    t + "attention.query_key_value.bias",
                    (3 * H * d_k,),
                    tuple(n + ".bias" for n in qkv),
                    heads=H,
                )
            )
            for theirs, ours, shape in (
                ("attention.dense", "attn.o_proj", (d, H * d_k)),
                ("mlp.dense_h_to_4h", "mlp.fc_in", (dff, d)),
                ("mlp.dense_4h_to_h", "mlp.fc_out", (d, dff)),
            ):
                es.append(WeightMap(f"{t}{theirs}.weight", shape, (f"{b}{ours}.weight",)))
                es.append(WeightMap(f"{t}{theirs}.bias", shape[:1], (f"{b}{ours}.bias",)))
        es.append(WeightMap(p + "final_layer_norm.weight", (d,), ("norm_f.weight",)))
        es.append(WeightMap(p + "final_layer_norm.bias", (d,), ("norm_f.bias",)))
        if not cfg.tie_embeddings:
            es.append(WeightMap("embed_out.weight", (V, d), ("lm_head.weight",)))
        return es
    p = "model."
    es.append(WeightMap(p + "embed_tokens.weight", (V, d), ("tok_emb.weight",)))
    qkv_bias, o_bias = cfg.bias in ("all", "qkv"), cfg.bias == "all"
    for i in range(cfg.n_layers):
        t, b = f"{p}layers.{i}.", f"blocks.{i}."
        es.append(WeightMap(t + "input_layernorm.weight", (d,), (b + "norm1.weight",)))
        es.append(WeightMap(t + "post_attention_layernorm.weight", (d,), (b + "norm2.weight",)))
        for n, rows in (("q", H * d_k), ("k", H_kv * d_k), ("v", H_kv * d_k)):
            es.append(WeightMap(f"{t}self_attn.{n}_proj.weight", (rows, d), (f"{b}attn.{n}_proj.weight",)))
            if qkv_bias:
                es.append(WeightMap(f"{t}self_attn.{n}_proj.bias", (rows,), (f"{b}attn.{n}_proj.bias",)))
        es.append(WeightMap(t + "self_attn.o_proj.weight", (d, H * d_k), (b + "attn.o_proj.weight",)))
        if o_bias:
            es.append(WeightMap(t + "self_attn.o_proj.bias", (d,), (b + "attn.o_proj.bias",)))
        if cfg.qk_rmsnorm:
            es += [
                WeightMap(f"{t}self_attn.{n}_norm.weight", (d_k,), (f"{b}attn.{n}_norm.weight",))
                for n in "qk"
            ]
        for theirs, ours, shape in (
            ("gate", "w_gate", (dff, d)),
            ("up", "w_up", (dff, d)),
            ("down", "w_down", (d, dff)),
        ):
            es.append(WeightMap(f"{t}mlp.{theirs}_proj.weight", shape, (f"{b}mlp.{ours}.weight",)))
            if cfg.bias == "all":
                es.append(WeightMap(f"{t}mlp.{theirs}_proj.bias", shape[:1], (f"{b}mlp.{ours}.bias",)))
    es.append(WeightMap(p + "norm.weight", (d,), ("norm_f.weight",)))
    if not cfg.tie_embeddings:
        es.append(WeightMap("lm_head.weight", (V, d), ("lm_head.weight",)))
    return es
