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
``qwen2_moe``    Qwen3-MoE's experts and router without the QK-norm, Q/K/V biases (qkv_bias), one
                 shared expert ``shared_expert_d_ff`` (shared_expert_intermediate_size) wide behind a
                 σ gate (``shared_expert_gate``); ``use_sliding_window`` refused
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

Fields a ``config.json`` omits take transformers' default for that family
(:data:`model.io.hf.fields._DEFAULTS`).

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
``mlp.shared_expert.*`` (qwen2_moe)               ``blocks.i.mlp.shared.*``              as is
``mlp.shared_expert_gate`` [1, d] (qwen2_moe)     ``blocks.i.mlp.shared_gate``           as is
``mlp.router`` (gpt_oss)                          ``blocks.i.mlp.gate``                  as is
``mlp.experts.gate_up_proj`` [E, d, 2f] (gpt_oss) ``experts.e.w_gate``, ``w_up``         per expert,
                                                                                         transposed,
                                                                                         columns
                                                                                         interleaved
``mlp.experts.down_proj`` [E, f, d] (+ biases)    ``experts.e.w_down``                   per expert
gpt_oss from GGUF: ``mlp.experts.e.*_proj`` (+ b) ``experts.e.w_*``                      as is
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
:func:`model.io.hf.folder.load_hf_family` does the reading (a GGUF file's tensors are renamed to these by
:mod:`model.io.gguf.load`) and :func:`model.io.build.build_model` the building. Each row is a
:class:`~model.io.weights.WeightMap`, as GPT-2's and nanoGPT's are; :func:`family_layout` gathers them.
"""

from __future__ import annotations

import re
from functools import partial

from model.config import GPTConfig
from model.io.hf.fields import FAMILIES, family_config
from model.io.hf.tensors import family_entries
from model.io.weights import Layout, TensorSource

__all__ = [
    "FAMILIES",
    "IGNORED",
    "extra_tensors",
    "family_config",
    "family_entries",
    "family_kind",
    "family_layout",
]


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
            if m and int(m.group(1)) >= cfg.core.n_layers:
                out.add(k)
    return out


def family_layout(
    model_type: str,
    cfg: GPTConfig,
    src: TensorSource,
    *,
    what: str,
    rope_interleave: bool = True,
    stacked_experts: bool = True,
) -> Layout:
    """Where the tensors of ``src`` (named as a Hugging Face ``model_type`` folder names them) go for
    ``cfg`` (which ``what`` gave, its sizes named as config.json names them); ``rope_interleave``:
    DeepSeek's rotary rows stored in pairs, ``stacked_experts``: gpt-oss's experts stacked as
    transformers holds them, or one by one as a GGUF file's are split (:func:`family_entries`). The
    rows are listed when the build step asks, once it has held the config's counts against the file's
    (:func:`model.io.build.check_counts`: a config that lies about its size lists nothing)."""
    entries = partial(
        family_entries, model_type, cfg, rope_interleave=rope_interleave, stacked_experts=stacked_experts
    )
    extra_ok = extra_tensors(model_type, cfg, src.keys)
    if cfg.core.tie_embeddings:
        extra_ok |= {"lm_head.weight", "embed_out.weight"}  # a stored copy of the tied matrix
    return Layout(entries, _implied(model_type, cfg, what), frozenset(extra_ok))


#: The config.json field each family's number of routed experts is read from first.
_EXPERTS_KEY = {"qwen3_moe": "num_experts", "qwen2_moe": "num_experts", "deepseek_v3": "n_routed_experts"}


def _implied(model_type: str, cfg: GPTConfig, what: str) -> str:
    """``what`` and the sizes of ``cfg`` by their config.json names: the shapes the file must have."""
    sizes = dict(
        num_hidden_layers=cfg.core.n_layers,
        hidden_size=cfg.core.d_model,
        num_attention_heads=cfg.attention.n_heads,
        num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.d_head,
        intermediate_size=cfg.hidden,
        vocab_size=cfg.core.vocab_size,
    )
    if cfg.feed_forward.n_experts is not None:
        sizes[_EXPERTS_KEY.get(model_type, "num_local_experts")] = cfg.feed_forward.n_experts
        if cfg.feed_forward.expert_d_ff is not None:
            sizes["moe_intermediate_size"] = cfg.feed_forward.expert_d_ff
    if cfg.mla:
        sizes["kv_lora_rank"] = cfg.attention.kv_lora_rank
        if cfg.attention.q_lora_rank is not None:
            sizes["q_lora_rank"] = cfg.attention.q_lora_rank
    return f"{what} ({', '.join(f'{k}={v}' for k, v in sizes.items())})"
