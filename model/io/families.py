"""Open the model families people study today from a local Hugging Face folder, exactly.

A folder is recognised by ``config.json``'s ``model_type``; each family maps onto :class:`GPTConfig`
fields (:func:`family_config`) and its tensor names onto ours (:func:`family_entries`):

===============  ==========================================================================================
``model_type``   what it sets beyond a Llama-shaped config (RoPE, RMSNorm, SwiGLU, no biases, GQA)
===============  ==========================================================================================
``llama``        ``rope_base`` (rope_theta), ``rope_scaling`` ``linear`` / ``llama3`` and its factors
``mistral``      ``sliding_window`` (applied as a mask: a query sees the last W keys) on every layer
``qwen2``        ``bias="qkv"`` (Q, K, V biases; none on the output or the MLP); with ``use_sliding_window``,
                 ``window_pattern`` from ``layer_types`` (default: the layers from ``max_window_layers``
                 on slide), as Qwen3's
``qwen3``        ``qk_rmsnorm`` (per-head RMSNorm of q and k, before RoPE); an explicit ``head_dim``
``gemma``        ``embed_scale`` (×√d), ``norm_offset`` (RMSNorm ×(1+γ)), ``mlp="geglu"`` with tanh GELU,
                 ``head_dim`` (256 in the real ones ≠ d/h), tied embeddings
``gpt_neox``     LayerNorm with biases, ``parallel_residual``, ``rotary_pct``, every linear layer biased,
                 exact GELU MLP, untied head (``embed_out``)
``mixtral``      ``n_experts`` (num_local_experts) SwiGLU experts of ``intermediate_size``, ``k`` =
                 num_experts_per_tok, router ``softmax_topk_norm``; ``sliding_window`` on every layer
``qwen3_moe``    Qwen3's QK-norm; ``n_experts`` (num_experts) of ``moe_intermediate_size``, router
                 ``softmax_topk`` (``_norm`` with norm_topk_prob); dense first layers from
                 ``mlp_only_layers`` / ``decoder_sparse_step`` (``intermediate_size`` wide)
``deepseek_v3``  latent attention (``kv_lora_rank``, ``q_lora_rank``, ``qk_nope_head_dim``,
                 ``qk_rope_head_dim``, ``v_head_dim``), ``moe_dense_layers`` = first_k_dense_replace,
                 ``n_shared_experts``, router ``sigmoid_topk_norm`` with ``router_choice_bias``
                 (e_score_correction_bias), ``router_groups`` / ``router_topk_groups`` (n_group /
                 topk_group), ``router_scale`` (routed_scaling_factor); YaRN, its mscale² on the scores
                 (``attn_scale_dim``); ``rope_interleave`` undone by a row permutation
``gpt_oss``      ``attn_sinks``, ``window_pattern`` from ``layer_types`` (``"LG"``), ``bias="all"``
                 (attention, router and experts), ``swiglu_limit`` (the clamped SwiGLU), router
                 ``topk_softmax``, YaRN (``rope_scaling="yarn"``, ``rope_attn_factor``)
``gemma2``       Gemma's parts, ``norm_position="sandwich"``, ``attn_softcap`` / ``final_softcap``,
                 ``attn_scale_dim`` (query_pre_attn_scalar), ``window_pattern`` ``"LG"``
``gemma3_text``  Gemma 2's without the caps (unless set), QK-norm ×(1+γ), ``window_pattern``
                 ``"LLLLLG"``, ``rope_local_base`` (the local layers' θ, 10 000) beside the global θ and
                 its scaling
``olmo2``        ``norm_position="output"`` (norms after each sublayer), ``qk_rmsnorm`` with
                 ``qk_norm_scope="all"`` (over all heads' q and k)
``phi3``         fused ``qkv_proj`` and ``gate_up_proj`` split at load, ``sliding_window``, ``rotary_pct``
===============  ==========================================================================================

Fields a ``config.json`` omits take transformers' default for that family (:data:`_DEFAULTS`).

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
gemma2/3 ``post_attention_layernorm``             ``blocks.i.post_norm1``                as is
gemma2/3 ``pre_``, ``post_feedforward_layernorm`` ``blocks.i.norm2``, ``post_norm2``     as is
olmo2 ``post_attention_layernorm``, ``post_ffw``  ``blocks.i.norm1``, ``norm2``          as is
phi3 ``self_attn.qkv_proj``                       ``q_proj``, ``k_proj``, ``v_proj``     rows split
phi3 ``mlp.gate_up_proj``                         ``mlp.w_gate``, ``mlp.w_up``           halves
``self_attn.sinks`` (gpt_oss)                     ``blocks.i.attn.sinks``                as is
mixtral ``block_sparse_moe.gate``                 ``blocks.i.mlp.gate``                  as is
mixtral ``block_sparse_moe.experts.e.w{1,3,2}``   ``mlp.experts.e.w_{gate,up,down}``     as is
``mlp.gate``, ``mlp.experts.e.{gate,up,down}_proj``  ``mlp.gate``, ``mlp.experts.e.w_*``  as is
``mlp.gate.e_score_correction_bias`` (deepseek)   ``blocks.i.mlp.choice_bias``           as is
``mlp.shared_experts.*`` (deepseek)               ``blocks.i.mlp.shared.*``              as is
``mlp.router`` (gpt_oss)                          ``blocks.i.mlp.gate``                  as is
``mlp.experts.gate_up_proj`` [E, d, 2f] (gpt_oss) ``experts.e.w_gate``, ``w_up``         per expert,
                                                                                         transposed,
                                                                                         columns
                                                                                         interleaved
``mlp.experts.down_proj`` [E, f, d] (+ biases)    ``experts.e.w_down``                   per expert
``self_attn.q_a_proj``, ``q_a_layernorm``,        ``attn.q_a``, ``q_a_norm``, ``q_b``    q_b, kv_a:
``q_b_proj`` (or ``q_proj``), ``kv_a_proj_with_   (or ``q_proj``), ``kv_a``,             rotary rows
mqa``, ``kv_a_layernorm``, ``kv_b_proj``          ``kv_a_norm``, ``kv_b``                de-interleaved
================================================  =====================================  ============

GPT-NeoX fuses Q, K and V per head: the rows of ``query_key_value`` [3·H·d_k, d] are H groups of
``[q_h; k_h; v_h]`` (each d_k rows), so ``W.view(H, 3, d_k, d)[:, j]`` is Q (j=0), K, V. Phi-3 fuses
them one after the other: ``qkv_proj`` [(H + 2·H_kv)·d_k, d] is ``[W_Q; W_K; W_V]``. gpt-oss stores its
experts as ``[E, in, out]`` with the gate and up projections in alternate columns (gate ``0::2``, up
``1::2``). DeepSeek-V3 (``rope_interleave``) stores each rotary part in pairs ``(2i, 2i+1)`` rotated by
θ_i; transformers' rotation returns ``[even; odd]``, which is our rotate-half layout of the rows
reordered ``[0, 2, 4, …, 1, 3, 5, …]``: that permutation of the rotary rows of ``q_b`` (or ``q_proj``)
and ``kv_a`` makes q·k (and q and k after RoPE) equal, exactly.

What is not implemented is refused with one line naming it: logit soft-capping in the families whose
code has none, RoPE scalings other than linear / llama3 (and yarn for gpt_oss and deepseek_v3; Phi-3's
longrope), a ``layer_types`` other than the family's code applies (Mistral's, Mixtral's and Phi-3's
window slides on every layer, Llama's, Gemma's, GPT-NeoX's, OLMo 2's and DeepSeek-V3's code has none),
attention biases without MLP biases or the reverse, local layers scaled RoPE, dense layers other than
the first few (Qwen3-MoE), a quantized checkpoint (``quantization_config``: gpt-oss's MXFP4, DeepSeek's
FP8), bidirectional attention (Gemma). DeepSeek's multi-token-prediction layers (``model.layers.N`` past
``num_hidden_layers``) are ignored, as transformers ignores them. Tensors are read one at a time from
safetensors (sharded with an index) or ``pytorch_model.bin`` via ``torch.load(weights_only=True)``; bf16
/ fp16 weights are upcast to ``dtype`` (float32 by default; ``dtype=torch.bfloat16`` keeps them):
:func:`model.io.hf.load_hf_family` does the reading. Each row is a :class:`~model.io.weights.WeightMap`,
as GPT-2's and nanoGPT's are.
"""

from __future__ import annotations

import math
import re
from typing import Any

from model.config import ConfigError, GPTConfig
from model.io.checkpoint import CheckpointError
from model.io.weights import WeightMap, vocab_of

__all__ = ["FAMILIES", "IGNORED", "extra_tensors", "family_config", "family_entries", "family_kind"]

#: The families of the first Llama-era loader: their refusals stay as they were.
_LLAMA_ERA = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gpt_neox")
#: Today's block: mixtures of experts, latent attention, sinks, local/global layers, other norms.
_TODAY = ("mixtral", "qwen3_moe", "deepseek_v3", "gpt_oss", "gemma2", "gemma3_text", "olmo2", "phi3")

#: ``model_type`` values opened here, each as kind ``"hf-" + model_type``.
FAMILIES = _LLAMA_ERA + _TODAY

#: transformers' defaults for what a ``config.json`` of today's families may omit (its config classes).
_DEFAULTS: dict[str, dict[str, Any]] = {
    "mixtral": dict(
        rms_norm_eps=1e-5,
        max_position_embeddings=131072,
        rope_theta=1e6,
        num_experts_per_tok=2,
    ),
    "qwen3_moe": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=32768,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
        decoder_sparse_step=1,
        norm_topk_prob=False,
    ),
    "deepseek_v3": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=4096,
        moe_intermediate_size=2048,
        num_experts_per_tok=8,
        n_shared_experts=1,
        routed_scaling_factor=2.5,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        n_group=8,
        topk_group=4,
        first_k_dense_replace=3,
        norm_topk_prob=True,
        rope_interleave=True,
    ),
    "gpt_oss": dict(
        rms_norm_eps=1e-5,
        max_position_embeddings=131072,
        rope_theta=150000.0,
        num_experts_per_tok=4,
        head_dim=64,
        sliding_window=128,
        attention_bias=True,
        swiglu_alpha=1.702,
        swiglu_limit=7.0,
    ),
    "gemma2": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=8192,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=4096,
        final_logit_softcapping=30.0,
        attn_logit_softcapping=50.0,
        tie_word_embeddings=True,
    ),
    "gemma3_text": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=131072,
        rope_theta=1e6,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=4096,
        tie_word_embeddings=True,
    ),
    "olmo2": dict(rms_norm_eps=1e-5, max_position_embeddings=2048),
    "phi3": dict(rms_norm_eps=1e-5, max_position_embeddings=4096),
}

#: gpt-oss's RoPE when its config.json says nothing of RoPE (transformers' GptOssConfig default)
_GPT_OSS_ROPE = {
    "rope_type": "yarn",
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
    "original_max_position_embeddings": 4096,
}

#: HF activation names -> our GELU form (``silu`` is SwiGLU's).
_GELU_FORMS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}

#: Buffers some files carry that are not weights (causal masks, RoPE frequencies).
IGNORED = re.compile(r"(\.attention\.(bias|masked_bias)|rotary_emb\.inv_freq)$")

#: The layers of a DeepSeek checkpoint past num_hidden_layers: multi-token prediction, unused here.
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


def family_kind(model_type: str) -> str:
    """The :data:`model.io.pretrained.KINDS` entry of a family: ``"hf-llama"`` etc."""
    return f"hf-{model_type}"


def extra_tensors(model_type: str, cfg: GPTConfig, keys: list[str]) -> set[str]:
    """Tensors of a ``model_type`` file that are not weights of the model and are left unread: the
    :data:`IGNORED` buffers, and DeepSeek's multi-token-prediction layers (as transformers does)."""
    out = {k for k in keys if IGNORED.search(k)}
    if model_type == "deepseek_v3":
        for k in keys:
            m = _LAYER.match(k)
            if m and int(m.group(1)) >= cfg.n_layers:
                out.add(k)
    return out


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's ``0.1·m·ln(s) + 1`` (1 for a factor up to 1), as transformers writes it."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _rope_fields(hf: dict[str, Any], model_type: str, problems: list[str]) -> dict[str, Any]:
    """``rope_base``, ``rope_scaling`` (+ factors), ``rotary_pct`` and ``rope_local_base`` from either
    form transformers writes: ``rope_parameters`` (v5; per layer type for Gemma 3) or ``rope_theta`` +
    ``rope_scaling`` (+ ``rotary_pct``, ``rotary_emb_base``, ``rope_local_base_freq``)."""
    params = hf.get("rope_parameters")
    params = dict(params) if isinstance(params, dict) else {}
    local: Any = None
    if "full_attention" in params or "sliding_attention" in params:  # per layer type (Gemma 3)
        local = params.get("sliding_attention")
        params = dict(params.get("full_attention") or {})
    scaling = hf.get("rope_scaling")
    if isinstance(scaling, dict):
        params = {**scaling, **params}
    if model_type == "gpt_oss" and not params and "rope_theta" not in hf:
        params = dict(_GPT_OSS_ROPE)
    theta = params.get("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    pct = params.get("partial_rotary_factor", hf.get("partial_rotary_factor", hf.get("rotary_pct", 1.0)))
    out: dict[str, Any] = {"rope_base": float(theta), "rotary_pct": float(pct)}
    if model_type == "gemma3_text":
        local = dict(local) if isinstance(local, dict) else {}
        kind = local.get("rope_type", local.get("type", "default"))
        if kind != "default":
            problems.append(f"RoPE scaling of the local layers ({kind!r}) is not implemented")
        out["rope_local_base"] = float(local.get("rope_theta", hf.get("rope_local_base_freq", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return out
    kinds = ("linear", "llama3", "yarn") if model_type in ("gpt_oss", "deepseek_v3") else ("linear", "llama3")
    if kind not in kinds:
        only = " and ".join(kinds)
        problems.append(
            f"rope_scaling of type {kind!r} is not implemented for {model_type} (only {only} are)"
        )
        return out
    factor = params.get("factor", 1.0)
    original = hf.get("original_max_position_embeddings", params.get("original_max_position_embeddings"))
    if kind == "yarn":
        original = original if original is not None else hf.get("max_position_embeddings", 2048)
        if factor is None:  # DeepSeek's way: the ratio of the contexts
            factor = hf.get("max_position_embeddings", 2048) / original
        attention = params.get("attention_factor")
        mscale, mscale_all = params.get("mscale"), params.get("mscale_all_dim")
        if attention is None and mscale and mscale_all:
            attention = _get_mscale(factor, float(mscale)) / _get_mscale(factor, float(mscale_all))
        elif attention is None:
            attention = _get_mscale(factor)
        out.update(
            rope_scaling="yarn",
            rope_factor=float(factor),
            rope_original_context=int(original),
            rope_beta_fast=float(params.get("beta_fast") or 32),
            rope_beta_slow=float(params.get("beta_slow") or 1),
            rope_truncate=bool(params.get("truncate", True)),
            rope_attn_factor=float(attention),
        )
        return out
    out.update(rope_scaling=kind, rope_factor=float(factor))
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


def _score_scale(hf: dict[str, Any]) -> float | None:
    """DeepSeek's ``attn_scale_dim``: transformers scales its scores by ``d_qk^-½·mscale²`` when the RoPE
    is scaled and ``mscale_all_dim`` is set (``1/√attn_scale_dim`` is that scale); else None (1/√d_qk)."""
    params = hf.get("rope_parameters")
    params = dict(params) if isinstance(params, dict) else {}
    if isinstance(hf.get("rope_scaling"), dict):
        params = {**hf["rope_scaling"], **params}
    kind = params.get("rope_type", params.get("type", "default"))
    mscale_all = params.get("mscale_all_dim", 0)
    if kind == "default" or not mscale_all:
        return None
    m = _get_mscale(float(params["factor"]), float(mscale_all))
    scale = (hf["qk_nope_head_dim"] + hf["qk_rope_head_dim"]) ** -0.5 * m * m
    return 1.0 / (scale * scale)


#: How each family's code (transformers') chooses the layers that slide, for those not in
#: :func:`_layer_pattern`: every layer when ``sliding_window`` is set (Qwen3-MoE: and
#: ``use_sliding_window``), Qwen's ``layer_types`` (default: the layers from ``max_window_layers`` on, when
#: ``use_sliding_window``), or none at all (its code has no window).
_EVERY_LAYER = ("mistral", "mixtral", "phi3", "qwen3_moe")
_QWEN_LAYERS = ("qwen2", "qwen3")


def _layer_letters(types: Any, n: int, problems: list[str]) -> str | None:
    """``layer_types`` as one letter per layer (``L`` sliding, ``G`` full), or None (a problem) when it
    is not one ``sliding_attention`` or ``full_attention`` per layer."""
    other = (
        sorted({str(t) for t in types} - {"sliding_attention", "full_attention"})
        if isinstance(types, list)
        else []
    )
    if not isinstance(types, list) or other or len(types) != n:
        problems.append(
            f"layer_types {other or types} is not implemented (one sliding_attention or "
            f"full_attention per layer is)"
        )
        return None
    return "".join("L" if t == "sliding_attention" else "G" for t in types)


def _as_pattern(letters: str) -> str:
    """``window_pattern`` of per-layer letters: their shortest repeating run (empty: every layer slides)."""
    n = len(letters)
    period = next(k for k in range(1, n + 1) if all(letters[i] == letters[i % k] for i in range(n)))
    pattern = letters[:period]
    return "" if pattern == "L" else pattern


def _window(
    hf: dict[str, Any], model_type: str, n_layers: int, problems: list[str]
) -> tuple[int | None, str]:
    """``(sliding_window, window_pattern)`` as the family's code applies them (:data:`_EVERY_LAYER`,
    :data:`_QWEN_LAYERS`, else no window). A ``layer_types`` that says otherwise than the code does is
    refused: which of the two the weights were trained with cannot be told."""
    W = hf.get("sliding_window")
    types = hf.get("layer_types")
    letters = None if types is None else _layer_letters(types, n_layers, problems)
    if types is not None and letters is None:
        return None, ""
    if model_type in _QWEN_LAYERS:
        if not hf.get("use_sliding_window"):
            W = None  # transformers: no window unless use_sliding_window, whatever sliding_window says
        first = hf.get("max_window_layers") or 0
        if letters is None:
            letters = "".join("L" if W is not None and i >= first else "G" for i in range(n_layers))
        elif W is None and "L" in letters:
            problems.append(
                "layer_types has sliding_attention layers but use_sliding_window is false (or "
                "sliding_window empty): no window to apply"
            )
            return None, ""
    else:
        if model_type == "qwen3_moe" and not hf.get("use_sliding_window"):
            W = None
        if model_type not in _EVERY_LAYER:
            W = None  # Llama, Gemma, GPT-NeoX: their code has no window
        every = "L" * n_layers if W is not None else "G" * n_layers
        if letters is not None and letters != every:
            what = f"slides every layer (sliding_window={W})" if W is not None else "has no sliding window"
            k = letters.count("L")
            problems.append(
                f"sliding-window attention on only some layers (layer_types: {k} of {n_layers}) is not "
                f"implemented for {model_type}, whose code {what}"
                if 0 < k < n_layers
                else f"layer_types marks {k} of {n_layers} layers sliding_attention, but {model_type}'s "
                f"code {what}: not implemented"
            )
            return None, ""
        letters = every
    if W is None or "L" not in letters:
        return None, ""
    return W, _as_pattern(letters)


def _layer_pattern(hf: dict[str, Any], model_type: str, problems: list[str]) -> tuple[int | None, str]:
    """``(sliding_window, window_pattern)`` of a family with local and global layers (Gemma 2/3,
    gpt-oss): ``layer_types`` (or the family's default) as the shortest repeating run of ``L``/``G``."""
    n = hf["num_hidden_layers"]
    types = hf.get("layer_types")
    if not (isinstance(types, list) and types):
        every = int(hf.get("sliding_window_pattern", 6)) if model_type == "gemma3_text" else 2
        types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)]
    letters = _layer_letters(types, n, problems)
    if letters is None or "L" not in letters:
        return None, ""
    W = hf.get("sliding_window")
    if W is None:
        problems.append("layer_types has sliding_attention layers but sliding_window is empty")
        return None, ""
    return W, _as_pattern(letters)


#: config.json fields read as numbers, by what each must be: a positive whole number, a whole number
#: 0 or more, a finite number; and fields read as true/false. Checked before any arithmetic, so that a
#: zero, a negative, NaN, a string or a boolean is one line naming the field, never a division by zero.
_WHOLE = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "sliding_window",
    "sliding_window_pattern",
    "decoder_sparse_step",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "n_group",
    "topk_group",
)
_COUNT = ("max_window_layers", "first_k_dense_replace", "n_shared_experts")
_REAL = (
    "rope_theta",
    "rotary_emb_base",
    "rotary_pct",
    "partial_rotary_factor",
    "rope_local_base_freq",
    "rms_norm_eps",
    "layer_norm_eps",
    "query_pre_attn_scalar",
    "routed_scaling_factor",
    "swiglu_alpha",
    "swiglu_limit",
    "final_logit_softcapping",
    "attn_logit_softcapping",
)
_FLAGS = (
    "tie_word_embeddings",
    "use_parallel_residual",
    "attention_bias",
    "mlp_bias",
    "use_sliding_window",
    "norm_topk_prob",
    "rope_interleave",
    "use_bidirectional_attention",
)
#: RoPE parameters read as numbers (in rope_parameters / rope_scaling, per layer type for Gemma 3).
_ROPE_REAL = (
    "rope_theta",
    "partial_rotary_factor",
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
    "beta_fast",
    "beta_slow",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _number_problems(hf: dict[str, Any]) -> list[str]:
    """One line per field of :data:`_WHOLE`, :data:`_COUNT`, :data:`_REAL`, :data:`_FLAGS` (and the
    RoPE parameters) that is set but not what it must be; empty (null) fields are left to defaults."""
    out: list[str] = []
    for key in (*_WHOLE, *_COUNT):
        v = hf.get(key)
        least = 1 if key in _WHOLE else 0
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < least):
            kind = "a positive whole number" if least else "a whole number, 0 or more"
            out.append(f"{key}={v!r} must be {kind}")
    out += [
        f"{k}={hf[k]!r} must be a finite number"
        for k in _REAL
        if hf.get(k) is not None and not _is_real(hf[k])
    ]
    out += [
        f"{k}={hf[k]!r} must be true or false"
        for k in _FLAGS
        if hf.get(k) is not None and not isinstance(hf[k], bool)
    ]
    only = hf.get("mlp_only_layers")
    if only is not None and not (
        isinstance(only, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in only)
    ):
        out.append(f"mlp_only_layers={only!r} must be a list of layer numbers")
    for name in ("rope_parameters", "rope_scaling"):
        params = hf.get(name)
        if params is None:
            continue
        if not isinstance(params, dict):
            out.append(f"{name} must be an object of RoPE settings, not {params!r}")
            continue
        groups = [params] + [v for v in params.values() if isinstance(v, dict)]  # per layer type
        out += [
            f"{name} {k}={g[k]!r} must be a finite number"
            for g in groups
            for k in _ROPE_REAL
            if g.get(k) is not None and not _is_real(g[k])
        ]
    return out


def family_config(hf: dict[str, Any]) -> GPTConfig:
    """Our config for a ``config.json`` of one of :data:`FAMILIES` (transformers' defaults for what it
    omits). Raises :class:`CheckpointError` naming every missing field or unsupported feature."""
    try:
        return _family_config(hf)
    except KeyError as exc:  # a field the family's code reads without a default
        raise CheckpointError(f"config.json ({hf.get('model_type')}): missing {exc}") from None
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
    hf = {**_DEFAULTS.get(model_type, {}), **hf}
    problems: list[str] = []
    required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    missing = [f for f in required if f not in hf]
    if missing:
        raise CheckpointError(f"config.json ({model_type}): missing {', '.join(missing)}")
    wrong = _number_problems(hf)
    if wrong:  # before any arithmetic on them (a division by num_attention_heads=0)
        raise CheckpointError(f"config.json ({model_type}): " + "; ".join(wrong))
    quant = hf.get("quantization_config")
    if quant:
        method = quant.get("quant_method", "?") if isinstance(quant, dict) else quant
        problems.append(f"quantized weights (quantization_config {method!r}) are not implemented")
    if model_type not in ("gemma2", "gemma3_text"):
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
        **_rope_fields(hf, model_type, problems),
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
        gemma = model_type in ("gemma", "gemma2", "gemma3_text")
        act = (
            hf.get("hidden_activation") or hf.get("hidden_act") or ("gelu_pytorch_tanh" if gemma else "silu")
        )
        if model_type == "gemma" and act == "gelu":  # transformers reads Gemma's legacy "gelu" as tanh
            act = "gelu_pytorch_tanh"
        if model_type in ("gemma2", "gemma3_text"):  # their code reads hidden_activation only
            act = hf.get("hidden_activation") or "gelu_pytorch_tanh"
        if model_type == "gpt_oss":
            act = "silu"  # its experts' own clamped SwiGLU, whatever hidden_act says
        if act == "silu":
            fields.update(mlp="swiglu")
        elif act in _GELU_FORMS:
            fields.update(mlp="geglu", gelu_approx=_GELU_FORMS[act])
        else:
            problems.append(f"hidden_act {act!r} is not silu or a GELU")
        fields.update(
            norm="rmsnorm",
            norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            bias=_bias(hf, model_type, problems),
            tie_embeddings=bool(hf.get("tie_word_embeddings", gemma)),
            qk_rmsnorm=model_type in ("qwen3", "qwen3_moe", "gemma3_text", "olmo2"),
            embed_scale=gemma,
            norm_offset=gemma,
        )
        if model_type in ("gemma2", "gemma3_text", "gpt_oss"):
            fields["sliding_window"], fields["window_pattern"] = _layer_pattern(hf, model_type, problems)
            if model_type == "gemma3_text" and fields["sliding_window"] is None:
                fields["rope_local_base"] = None  # no local layer to use it
        else:  # OLMo 2 and DeepSeek-V3 too: their code has no window, a layer_types saying so is refused
            fields["sliding_window"], fields["window_pattern"] = _window(hf, model_type, n_layers, problems)
        if model_type in _TODAY:
            _today(hf, model_type, fields, problems)
    if problems:
        raise CheckpointError(f"config.json ({model_type}): " + "; ".join(problems))
    try:
        return GPTConfig(**fields).validate()
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"config.json ({model_type}): {exc}") from None


def _bias(hf: dict[str, Any], model_type: str, problems: list[str]) -> str:
    """``bias`` of a Llama-shaped family: ``qkv`` (Qwen2), ``all`` (attention and MLP biased alike;
    gpt-oss's attention, router and experts), else ``none``; a mix is refused."""
    if model_type == "qwen2":
        return "qkv"
    attn_bias = bool(hf.get("attention_bias", False))
    if model_type == "gpt_oss":
        if not attn_bias:
            problems.append("attention_bias=false beside gpt-oss's biased experts is not implemented")
        return "all"
    if model_type in ("mixtral", "phi3"):  # their code has no biases at all
        return "none"
    mlp_bias = bool(hf.get("mlp_bias", False)) if model_type in _LLAMA_ERA else False
    if attn_bias and mlp_bias:
        return "all"
    if attn_bias or mlp_bias:
        problems.append(
            f"attention_bias={attn_bias} with mlp_bias={mlp_bias} is not implemented (biases on "
            f"attention and MLP alike, or on neither)"
        )
    return "none"


def _experts(hf: dict[str, Any], default: int, *names: str) -> int:
    """The number of routed experts, under whichever name the family's config.json uses (transformers
    writes its own name, the Hub's files the original one), else the family's default."""
    for name in names:
        if hf.get(name) is not None:
            return int(hf[name])
    return default


def _today(hf: dict[str, Any], model_type: str, fields: dict[str, Any], problems: list[str]) -> None:
    """The parts of today's block each of :data:`_TODAY` uses (module docstring), into ``fields``."""
    if model_type in ("gemma2", "gemma3_text"):
        if hf.get("use_bidirectional_attention"):
            problems.append("use_bidirectional_attention (no causal mask) is not implemented")
        scalar = hf.get("query_pre_attn_scalar")
        head = fields.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
        fields.update(
            norm_position="sandwich",
            attn_softcap=hf.get("attn_logit_softcapping"),
            final_softcap=hf.get("final_logit_softcapping"),
            attn_scale_dim=None if scalar is None or float(scalar) == head else float(scalar),
        )
    elif model_type == "olmo2":
        fields.update(norm_position="output", qk_norm_scope="all")
    elif model_type == "mixtral":
        fields.update(
            n_experts=_experts(hf, 8, "num_local_experts", "num_experts"),
            n_experts_per_token=hf["num_experts_per_tok"],
            router="softmax_topk_norm",
        )
    elif model_type == "qwen3_moe":
        E, n = _experts(hf, 128, "num_experts", "num_local_experts"), hf["num_hidden_layers"]
        step, only = int(hf.get("decoder_sparse_step") or 1), set(hf.get("mlp_only_layers") or [])
        dense = [i for i in range(n) if i in only or E <= 0 or (i + 1) % step]
        if dense != list(range(len(dense))) or len(dense) >= n:
            problems.append(
                f"dense MLPs on layers {dense} (mlp_only_layers, decoder_sparse_step) are not implemented "
                f"(the first few layers dense, the rest mixtures of experts, are)"
            )
        fields.update(
            n_experts=E,
            n_experts_per_token=hf["num_experts_per_tok"],
            expert_d_ff=hf["moe_intermediate_size"],
            moe_dense_layers=len(dense) if len(dense) < n else 0,
            router="softmax_topk_norm" if hf.get("norm_topk_prob") else "softmax_topk",
        )
    elif model_type == "gpt_oss":
        alpha, limit = hf.get("swiglu_alpha", 1.702), hf.get("swiglu_limit", 7.0)
        if float(alpha) != 1.702:
            problems.append(f"swiglu_alpha={alpha} is not implemented (gpt-oss's 1.702 is)")
        fields.update(
            attn_sinks=True,
            swiglu_limit=float(limit),
            n_experts=_experts(hf, 128, "num_local_experts", "num_experts"),
            n_experts_per_token=hf["num_experts_per_tok"],
            router="topk_softmax",
        )
    elif model_type == "deepseek_v3":
        _deepseek(hf, fields, problems)


def _deepseek(hf: dict[str, Any], fields: dict[str, Any], problems: list[str]) -> None:
    """DeepSeek-V3: latent attention, dense first layers, shared experts, its router."""
    if float(hf.get("rms_norm_eps", 1e-6)) != 1e-6:  # its latent norms use 1e-6 whatever it says
        problems.append(f"rms_norm_eps={hf['rms_norm_eps']} is not implemented (DeepSeek-V3's 1e-06 is)")
    if not hf.get("norm_topk_prob", True):
        problems.append("norm_topk_prob=false (sigmoid weights not renormalised) is not implemented")
    groups = hf.get("n_group") or 1
    fields.update(
        n_kv_heads=None,
        head_dim=None,  # config.json's head_dim is the rotary part: qk_rope_head_dim
        kv_lora_rank=hf["kv_lora_rank"],
        q_lora_rank=hf.get("q_lora_rank"),
        qk_rope_head_dim=hf["qk_rope_head_dim"],
        qk_nope_head_dim=hf["qk_nope_head_dim"],
        v_head_dim=hf["v_head_dim"],
        n_experts=_experts(hf, 256, "n_routed_experts", "num_local_experts"),
        n_experts_per_token=hf["num_experts_per_tok"],
        n_shared_experts=hf.get("n_shared_experts") or 0,
        expert_d_ff=hf["moe_intermediate_size"],
        moe_dense_layers=hf.get("first_k_dense_replace") or 0,
        router="sigmoid_topk_norm",
        router_choice_bias=True,
        router_groups=groups if groups > 1 else None,
        router_topk_groups=hf.get("topk_group") or 1,
        router_scale=float(hf.get("routed_scaling_factor", 1.0)),
        attn_scale_dim=_score_scale(hf),
    )


def family_entries(model_type: str, cfg: GPTConfig, *, rope_interleave: bool = True) -> list[WeightMap]:
    """The tensors a ``model_type`` file must hold for ``cfg`` and where each goes (``lm_head`` included
    when untied); ``rope_interleave``: latent attention's rotary rows are stored in pairs (DeepSeek's
    ``rope_interleave``, its default), reordered to ours."""
    if model_type == "gpt_neox":
        return _neox_entries(cfg)
    d, V = cfg.d_model, vocab_of(cfg)
    p = "model."
    es = [WeightMap(p + "embed_tokens.weight", (V, d), ("tok_emb.weight",))]
    for i in range(cfg.n_layers):
        t, b = f"{p}layers.{i}.", f"blocks.{i}."
        es += _norm_entries(cfg, t, b)
        es += (
            _latent_entries(cfg, t, b, rope_interleave)
            if cfg.mla
            else _attention_entries(model_type, cfg, t, b)
        )
        if cfg.is_moe_layer(i):
            es += _moe_entries(model_type, cfg, t, b)
        else:
            es += _mlp_entries(model_type, cfg, t + "mlp.", b + "mlp.", cfg.hidden)
    es.append(WeightMap(p + "norm.weight", (d,), ("norm_f.weight",)))
    if not cfg.tie_embeddings:
        es.append(WeightMap("lm_head.weight", (V, d), ("lm_head.weight",)))
    return es


def _neox_entries(cfg: GPTConfig) -> list[WeightMap]:
    d, dff, V = cfg.d_model, cfg.hidden, vocab_of(cfg)
    H, d_k = cfg.n_heads, cfg.d_head
    p = "gpt_neox."
    es = [WeightMap(p + "embed_in.weight", (V, d), ("tok_emb.weight",))]
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
                t + "attention.query_key_value.bias", (3 * H * d_k,), tuple(n + ".bias" for n in qkv), heads=H
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


def _norm_entries(cfg: GPTConfig, t: str, b: str) -> list[WeightMap]:
    """The block's norms: pre (Llama), sandwich (Gemma 2/3: four) or output (OLMo 2: after each sublayer)."""
    names = {
        "pre": (("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2")),
        "sandwich": (
            ("input_layernorm", "norm1"),
            ("post_attention_layernorm", "post_norm1"),
            ("pre_feedforward_layernorm", "norm2"),
            ("post_feedforward_layernorm", "post_norm2"),
        ),
        "output": (("post_attention_layernorm", "norm1"), ("post_feedforward_layernorm", "norm2")),
    }[cfg.norm_position]
    return [
        WeightMap(f"{t}{theirs}.weight", (cfg.d_model,), (f"{b}{ours}.weight",)) for theirs, ours in names
    ]


def _attention_entries(model_type: str, cfg: GPTConfig, t: str, b: str) -> list[WeightMap]:
    d, H, H_kv, d_k = cfg.d_model, cfg.n_heads, cfg.kv_heads, cfg.d_head
    qkv_bias, o_bias = cfg.bias in ("all", "qkv"), cfg.bias == "all"
    es: list[WeightMap] = []
    rows = {"q": H * d_k, "k": H_kv * d_k, "v": H_kv * d_k}
    if model_type == "phi3":  # [W_Q; W_K; W_V] in one matrix
        es.append(
            WeightMap(
                t + "self_attn.qkv_proj.weight",
                (sum(rows.values()), d),
                tuple(f"{b}attn.{n}_proj.weight" for n in rows),
                sizes=tuple(rows.values()),
            )
        )
    else:
        for n, r in rows.items():
            es.append(WeightMap(f"{t}self_attn.{n}_proj.weight", (r, d), (f"{b}attn.{n}_proj.weight",)))
            if qkv_bias:
                es.append(WeightMap(f"{t}self_attn.{n}_proj.bias", (r,), (f"{b}attn.{n}_proj.bias",)))
    es.append(WeightMap(t + "self_attn.o_proj.weight", (d, H * d_k), (b + "attn.o_proj.weight",)))
    if o_bias:
        es.append(WeightMap(t + "self_attn.o_proj.bias", (d,), (b + "attn.o_proj.bias",)))
    if cfg.qk_rmsnorm:
        every = cfg.qk_norm_scope == "all"  # OLMo 2: over all heads
        es += [
            WeightMap(
                f"{t}self_attn.{n}_norm.weight", (rows[n] if every else d_k,), (f"{b}attn.{n}_norm.weight",)
            )
            for n in "qk"
        ]
    if cfg.attn_sinks:
        es.append(WeightMap(t + "self_attn.sinks", (H,), (b + "attn.sinks",)))
    return es


def _deinterleaved(n: int, rotary: int, every: int, start: int) -> tuple[int, ...]:
    """Rows of ``n`` in groups of ``every`` whose last ``rotary`` (from ``start`` in the group) are
    pairs ``(2i, 2i+1)`` (DeepSeek's rope_interleave), reordered ``[evens; odds]``: rotate-half's."""
    out: list[int] = []
    for g in range(0, n, every):
        out += range(g, g + start)
        out += range(g + start, g + start + rotary, 2)
        out += range(g + start + 1, g + start + rotary, 2)
        out += range(g + start + rotary, g + every)
    return tuple(out)


def _latent_entries(cfg: GPTConfig, t: str, b: str, interleaved: bool) -> list[WeightMap]:
    """DeepSeek-V3's multi-head latent attention (its rotary rows de-interleaved when ``interleaved``:
    module docstring)."""
    d, H, r = cfg.d_model, cfg.n_heads, int(cfg.kv_lora_rank or 0)
    nope, rope, qk, dv = cfg.qk_nope_dim, cfg.qk_rope_dim, cfg.qk_dim, cfg.v_dim
    a = t + "self_attn."
    q_rows = _deinterleaved(H * qk, rope, qk, nope) if interleaved else ()
    kv_rows = _deinterleaved(r + rope, rope, r + rope, r) if interleaved else ()
    es: list[WeightMap] = []
    if cfg.q_lora_rank:
        rq = cfg.q_lora_rank
        es += [
            WeightMap(a + "q_a_proj.weight", (rq, d), (b + "attn.q_a.weight",)),
            WeightMap(a + "q_a_layernorm.weight", (rq,), (b + "attn.q_a_norm.weight",)),
            WeightMap(a + "q_b_proj.weight", (H * qk, rq), (b + "attn.q_b.weight",), rows=q_rows),
        ]
    else:
        es.append(WeightMap(a + "q_proj.weight", (H * qk, d), (b + "attn.q_proj.weight",), rows=q_rows))
    es += [
        WeightMap(
            a + "kv_a_proj_with_mqa.weight",
            (r + rope, d),
            (b + "attn.kv_a.weight",),
            rows=kv_rows,
        ),
        WeightMap(a + "kv_a_layernorm.weight", (r,), (b + "attn.kv_a_norm.weight",)),
        WeightMap(a + "kv_b_proj.weight", (H * (nope + dv), r), (b + "attn.kv_b.weight",)),
        WeightMap(a + "o_proj.weight", (d, H * dv), (b + "attn.o_proj.weight",)),
    ]
    return es


def _mlp_entries(model_type: str, cfg: GPTConfig, t: str, b: str, width: int) -> list[WeightMap]:
    """A gated MLP of ``width`` at ``t`` (theirs, ``...mlp.``) → ``b`` (ours): gate, up, down."""
    d = cfg.d_model
    if model_type == "phi3":  # [W_gate; W_up] in one matrix
        return [
            WeightMap(t + "gate_up_proj.weight", (2 * width, d), (b + "w_gate.weight", b + "w_up.weight")),
            WeightMap(t + "down_proj.weight", (d, width), (b + "w_down.weight",)),
        ]
    names = ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    es: list[WeightMap] = []
    for theirs, ours, shape in zip(names, ("w_gate", "w_up", "w_down"), ((width, d), (width, d), (d, width))):
        es.append(WeightMap(f"{t}{theirs}.weight", shape, (f"{b}{ours}.weight",)))
        if cfg.bias == "all":
            es.append(WeightMap(f"{t}{theirs}.bias", shape[:1], (f"{b}{ours}.bias",)))
    return es


def _moe_entries(model_type: str, cfg: GPTConfig, t: str, b: str) -> list[WeightMap]:
    """A mixture-of-experts block: the router, the experts (one by one, or gpt-oss's stacked ones), the
    shared experts and DeepSeek's choice bias."""
    d, E, f = cfg.d_model, int(cfg.n_experts or 0), cfg.expert_hidden
    if model_type == "gpt_oss":
        m, x = t + "mlp.", b + "mlp.experts."
        return [
            WeightMap(m + "router.weight", (E, d), (b + "mlp.gate.weight",)),
            WeightMap(m + "router.bias", (E,), (b + "mlp.gate.bias",)),
            WeightMap(
                m + "experts.gate_up_proj",
                (E, d, 2 * f),
                tuple(f"{x}{e}.{n}.weight" for e in range(E) for n in ("w_gate", "w_up")),
                transpose=True,
                interleaved=True,
                stacked=True,
            ),
            WeightMap(
                m + "experts.gate_up_proj_bias",
                (E, 2 * f),
                tuple(f"{x}{e}.{n}.bias" for e in range(E) for n in ("w_gate", "w_up")),
                interleaved=True,
                stacked=True,
            ),
            WeightMap(
                m + "experts.down_proj",
                (E, f, d),
                tuple(f"{x}{e}.w_down.weight" for e in range(E)),
                transpose=True,
                stacked=True,
            ),
            WeightMap(
                m + "experts.down_proj_bias",
                (E, d),
                tuple(f"{x}{e}.w_down.bias" for e in range(E)),
                stacked=True,
            ),
        ]
    m = t + ("block_sparse_moe." if model_type == "mixtral" else "mlp.")
    es = [WeightMap(m + "gate.weight", (E, d), (b + "mlp.gate.weight",))]
    if cfg.router_choice_bias:
        es.append(WeightMap(m + "gate.e_score_correction_bias", (E,), (b + "mlp.choice_bias",)))
    for e in range(E):
        es += _mlp_entries(model_type, cfg, f"{m}experts.{e}.", f"{b}mlp.experts.{e}.", f)
    if cfg.n_shared_experts:
        es += _mlp_entries(
            model_type, cfg, m + "shared_experts.", b + "mlp.shared.", cfg.n_shared_experts * f
        )
    return es
