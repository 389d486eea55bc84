"""The presets of today's blocks (:mod:`model.budget.presets`): Gemma 2 and 3, OLMo 2, Mixtral,
Qwen3-MoE, gpt-oss and DeepSeek-V3, from their released ``config.json`` files and reports.
"""

from __future__ import annotations

import math
from typing import Any

from model.budget.preset_type import H100_SXM_BF16, Preset, _llama

#: gpt-oss's parts beyond the Llama shape: YaRN from 4,096 positions (factor 32, not truncated) and
#: the clamped SwiGLU (transformers' GptOssConfig).
_GPT_OSS_PARTS: dict[str, Any] = {
    "rope_scaling": "yarn",
    "rope_factor": 32.0,
    "rope_original_context": 4096,
    "rope_truncate": False,
    "swiglu_limit": 7.0,
}


def _hf(repo: str) -> str:
    return f"config.json of huggingface.co/{repo}"


#: Gemma 2 9B (Gemma Team 2024, Gemma 2): 42 blocks of 16 heads of 256 (8 K/V heads), local (4096) and
#: global layers alternating from a local first one, sandwich norms, soft-capped scores and logits.
_GEMMA2_9B = dict(
    vocab_size=256000,
    context_length=8192,
    n_layers=42,
    d_model=3584,
    n_heads=16,
    n_kv_heads=8,
    head_dim=256,
    d_ff=14336,
    mlp="geglu",
    gelu_approx="tanh",
    norm="rmsnorm",
    norm_position="sandwich",
    norm_offset=True,
    norm_eps=1e-6,
    positions="rope",
    rope_base=10000.0,
    bias="none",
    tie_embeddings=True,
    embed_scale=True,
    sliding_window=4096,
    window_pattern="LG",
    attn_softcap=50.0,
    final_softcap=30.0,
)

#: Gemma 3 4B's language model (text_config of gemma-3-4b-it, Gemma3ForCausalLM): five local layers of
#: window 1024 to one global, QK-norm in place of soft-capping.
_GEMMA3_4B = dict(
    vocab_size=262208,
    context_length=131072,
    n_layers=34,
    d_model=2560,
    n_heads=8,
    n_kv_heads=4,
    head_dim=256,
    d_ff=10240,
    mlp="geglu",
    gelu_approx="tanh",
    norm="rmsnorm",
    norm_position="sandwich",
    norm_offset=True,
    norm_eps=1e-6,
    positions="rope",
    rope_base=1_000_000.0,
    rope_scaling="linear",
    rope_factor=8.0,
    bias="none",
    tie_embeddings=True,
    embed_scale=True,
    qk_rmsnorm=True,
    sliding_window=1024,
    window_pattern="LLLLLG",
)

_MOE_TODAY = (
    Preset(
        "gemma2-9b",
        "Gemma 2 9B",
        _GEMMA2_9B,
        f"{_hf('google/gemma-2-9b')} (Gemma2ForCausalLM); Gemma Team 2024, Gemma 2, Table 1",
        training_tokens=8e12,
        notes="query_pre_attn_scalar 256 = head_dim, so the scores are scaled by 1/√d_k as here; every "
        "parameter is expressible. The report's Table 2 counts a vocabulary of 256,128 (917,962,752 "
        "embedding parameters); the released config.json has 256,000, 128·3584 = 458,752 fewer. The "
        "non-embedding count, 8,324,201,984, agrees exactly",
    ),
    Preset(
        "gemma3-4b",
        "Gemma 3 4B (text)",
        _GEMMA3_4B,
        f"text_config of the {_hf('google/gemma-3-4b-it')} (Gemma3ForCausalLM defaults for the rest); "
        "Gemma Team 2025, Gemma 3 technical report, Table 1",
        training_tokens=4e12,
        notes="the language model only: the SigLIP vision tower (417M parameters, the report's Table 1) "
        "and the multimodal projector (1152·2560 + 1152 = 2,950,272) are left out. The report's 3,209M "
        "non-embedding parameters agree; its 675M embedding parameters are 3.7M more than the "
        "released vocabulary of 262,208 gives (671,252,480). Local layers use "
        "RoPE base 10,000 without scaling, global ones base 1,000,000 with linear factor 8 (a config "
        "has one RoPE setting: the global layers'); no parameter",
    ),
    Preset(
        "olmo2-7b",
        "OLMo 2 7B",
        {
            **_llama(32, 4096, 32, 32, 11008, 100352, 4096, 500000.0),
            "norm_position": "output",
            "qk_rmsnorm": True,
            "norm_eps": 1e-6,
        },
        f"{_hf('allenai/OLMo-2-1124-7B')} (Olmo2ForCausalLM); OLMo et al. 2024, 2 OLMo 2 Furious",
        training_tokens=4e12,
        notes="OLMo 2 normalises q and k over all heads at once (RMSNorm weights of h·d_k = 4096 each) "
        "where qk_rmsnorm normalises each head (weights of d_k = 128, shared by the heads): the real "
        "model has 32·2·(4096 − 128) = 253,952 parameters more",
    ),
    Preset(
        "mixtral-8x7b",
        "Mixtral 8x7B",
        {
            **_llama(32, 4096, 32, 8, 14336, 32000, 32768, 1_000_000.0),
            "n_experts": 8,
            "n_experts_per_token": 2,
            "router": "topk_softmax",
            "router_aux_loss": 0.02,
        },
        f"{_hf('mistralai/Mixtral-8x7B-v0.1')} (MixtralForCausalLM); Jiang et al. 2024, Mixtral of "
        "Experts; Mistral AI, 'Mixtral of experts' (December 2023)",
        precision="bf16-mixed",
        notes="released with sliding_window null: every layer attends to the whole 32k context "
        "(Mistral 7B's window of 4096 is off); every parameter is expressible",
    ),
    Preset(
        "qwen3-30b-a3b",
        "Qwen3-30B-A3B",
        {
            **_llama(48, 2048, 32, 4, 6144, 151936, 40960, 1_000_000.0),
            "head_dim": 128,
            "norm_eps": 1e-6,
            "qk_rmsnorm": True,
            "n_experts": 128,
            "n_experts_per_token": 8,
            "expert_d_ff": 768,
            "router": "softmax_topk_norm",
            "router_aux_loss": 0.001,
        },
        f"{_hf('Qwen/Qwen3-30B-A3B')} (Qwen3MoeForCausalLM); Qwen3-30B-A3B model card; Qwen Team 2025, "
        "Qwen3 Technical Report",
        training_tokens=36e12,
        precision="bf16-mixed",
        notes="every block is a mixture of experts (mlp_only_layers empty; intermediate_size 6144 is "
        "unused); context 32,768 natively, 131,072 with YaRN (not expressible; no parameter)",
    ),
    Preset(
        "gpt-oss-20b",
        "gpt-oss-20b",
        {
            **_llama(24, 2880, 64, 8, 2880, 201088, 131072, 150000.0),
            "head_dim": 64,
            "bias": "all",
            "attn_sinks": True,
            "sliding_window": 128,
            "window_pattern": "LG",
            "n_experts": 32,
            "n_experts_per_token": 4,
            "router": "topk_softmax",
            "router_aux_loss": 0.9,
            **_GPT_OSS_PARTS,
        },
        f"{_hf('openai/gpt-oss-20b')} (GptOssForCausalLM); OpenAI 2025, gpt-oss-120b & gpt-oss-20b "
        "Model Card, Table 1",
        notes="the experts' SwiGLU is clamped (limit 7) and computes (up + 1)·gate·σ(1.702·gate); the "
        "context is stretched from 4,096 to 131,072 with YaRN (factor 32); neither adds a parameter",
    ),
    Preset(
        "gpt-oss-120b",
        "gpt-oss-120b",
        {
            **_llama(36, 2880, 64, 8, 2880, 201088, 131072, 150000.0),
            "head_dim": 64,
            "bias": "all",
            "attn_sinks": True,
            "sliding_window": 128,
            "window_pattern": "LG",
            "n_experts": 128,
            "n_experts_per_token": 4,
            "router": "topk_softmax",
            "router_aux_loss": 0.9,
            **_GPT_OSS_PARTS,
        },
        f"{_hf('openai/gpt-oss-120b')} (GptOssForCausalLM); OpenAI 2025, gpt-oss-120b & gpt-oss-20b "
        "Model Card, Table 1",
        reported_gpu_hours=2.1e6,
        gpu="H100-80GB",
        peak_tflops=H100_SXM_BF16,
        notes="as gpt-oss-20b: the clamped SwiGLU with (up + 1) and YaRN add no parameter",
    ),
    Preset(
        "deepseek-v3",
        "DeepSeek-V3",
        {
            **_llama(61, 7168, 128, 128, 18432, 129280, 163840, 10000.0),
            "n_kv_heads": None,
            "norm_eps": 1e-6,
            "kv_lora_rank": 512,
            "q_lora_rank": 1536,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
            "n_experts": 256,
            "n_experts_per_token": 8,
            "n_shared_experts": 1,
            "expert_d_ff": 2048,
            "moe_dense_layers": 3,
            "router": "sigmoid_topk_norm",
            "router_choice_bias": True,
            "router_groups": 8,
            "router_topk_groups": 4,
            "router_scale": 2.5,
            "rope_scaling": "yarn",
            "rope_factor": 40.0,
            "rope_original_context": 4096,
            "rope_attn_factor": 1.0,  # mscale / mscale_all_dim = 1
            "attn_scale_dim": 192 / (0.1 * math.log(40.0) + 1.0) ** 4,  # softmax scale d_qk^-½·mscale²
        },
        f"{_hf('deepseek-ai/DeepSeek-V3')} (DeepseekV3ForCausalLM) and its README_WEIGHTS.md; "
        "DeepSeek-AI 2024, DeepSeek-V3 Technical Report",
        training_tokens=14.8e12,
        reported_gpu_hours=2.788e6,
        gpu="H800",
        peak_tflops=H100_SXM_BF16,
        notes="the main model only: the released weights add the multi-token-prediction module "
        "(11.5B parameters of its own, README_WEIGHTS.md); the router's correction bias "
        "(e_score_correction_bias, 58·256 = 14,848 numbers) chooses experts without being trained by "
        "the loss; the grouped top-k routing (8 groups, 4 chosen), the routed scaling factor 2.5 and "
        "YaRN (factor 40 from 4,096 positions, which also rescales the softmax) add no parameter. "
        "Trained in FP8 mixed precision (peak given here: dense bf16)",
    ),
)
