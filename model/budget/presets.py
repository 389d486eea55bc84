"""Real models as configs, for the budget calculator: GPT-2, GPT-3, Llama 2/3, Mistral, TinyLlama, and
today's blocks: Gemma 2 and 3 (sandwich norms, local/global layers, soft-capping), OLMo 2 (norms on
the sublayer outputs), Mixtral, Qwen3-MoE and gpt-oss (mixtures of experts; gpt-oss's attention sinks)
and DeepSeek-V3 (latent attention, shared experts, dense first layers).

Each :class:`Preset` holds the exact architecture as :class:`~model.config.GPTConfig` fields (from
the model's paper or released ``config.json``) plus what is publicly known about its training:
tokens, reported GPU-hours and the device, its dense 16-bit peak FLOP/s and the precision. Fields
that are not public are ``None``. Pure Python: no torch.

Configs saved from the app (``*.json`` files or checkpoint directories holding ``config.json``)
are listed by :func:`saved_configs` and loaded by :func:`load_config`.

Where a real model differs in a way that changes no count, ``notes`` says so (GPT-3's alternating
sparse attention, Mistral's sliding window, GPT-2's tanh GELU); where it has something a config cannot
express that does change the count (OLMo 2's QK-norm over all heads, DeepSeek-V3's router correction
bias and multi-token-prediction module, Gemma 3's vision tower), ``notes`` gives the difference in
parameters. The published parameter counts are checked in the tests, not stored here.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.config import ConfigError, GPTConfig


@dataclass(frozen=True)
class Preset:
    """A real model: ``config`` is a dict of GPTConfig fields; the rest is training metadata."""

    name: str  # the key used on the command line, e.g. "llama2-7b"
    title: str  # "Llama 2 7B"
    config: dict[str, Any]
    source: str
    training_tokens: float | None = None
    reported_gpu_hours: float | None = None
    reported_flops: float | None = None  # total training compute the authors report
    gpu: str | None = None
    peak_tflops: float | None = None  # dense bf16/fp16 peak of one ``gpu``
    precision: str | None = None  # a key of model.budget.PRECISIONS
    notes: str = ""

    def gpt_config(self) -> GPTConfig:
        return GPTConfig.from_dict(dict(self.config))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "config": dict(self.config),
            "source": self.source,
            "training_tokens": self.training_tokens,
            "reported_gpu_hours": self.reported_gpu_hours,
            "reported_flops": self.reported_flops,
            "gpu": self.gpu,
            "peak_tflops": self.peak_tflops,
            "precision": self.precision,
            "notes": self.notes,
        }


A100_BF16 = 312.0  # NVIDIA A100 dense bf16/fp16 tensor-core peak, TFLOP/s
H100_SXM_BF16 = 989.0  # NVIDIA H100 SXM dense bf16 peak, TFLOP/s


def _gpt2(n_layers: int, d_model: int, n_heads: int) -> dict[str, Any]:
    return dict(
        vocab_size=50257,
        context_length=1024,
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        mlp="gelu",
        gelu_approx="tanh",
        norm="layernorm",
        norm_position="pre",
        positions="learned",
        bias="all",
        tie_embeddings=True,
        norm_eps=1e-5,
    )


def _llama(
    n_layers: int,
    d_model: int,
    n_heads: int,
    n_kv_heads: int,
    d_ff: int,
    vocab: int,
    ctx: int,
    rope_base: float,
) -> dict[str, Any]:
    return dict(
        vocab_size=vocab,
        context_length=ctx,
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        d_ff=d_ff,
        mlp="swiglu",
        norm="rmsnorm",
        norm_position="pre",
        positions="rope",
        bias="none",
        tie_embeddings=False,
        norm_eps=1e-5,
        rope_base=rope_base,
    )


_GPT2_SRC = "Radford et al. 2019, GPT-2 (released checkpoints' config)"
_LLAMA2_SRC = "Touvron et al. 2023, Llama 2, Table 1 and 2; released config.json"
_LLAMA3_SRC = "Meta Llama 3 model card (April 2024) and released config.json"

_ALL = (
    Preset("gpt2", "GPT-2 small", _gpt2(12, 768, 12), _GPT2_SRC, notes="tanh-approximate GELU"),
    Preset("gpt2-medium", "GPT-2 medium", _gpt2(24, 1024, 16), _GPT2_SRC),
    Preset("gpt2-large", "GPT-2 large", _gpt2(36, 1280, 20), _GPT2_SRC),
    Preset("gpt2-xl", "GPT-2 XL", _gpt2(48, 1600, 25), _GPT2_SRC),
    Preset(
        "gpt3-175b",
        "GPT-3 175B",
        {**_gpt2(96, 12288, 96), "context_length": 2048},
        "Brown et al. 2020, GPT-3, Table 2.1 (L 96, d 12288, 96 heads of 128, context 2048)",
        training_tokens=300e9,
        reported_flops=3.14e23,  # Table D.1: 3.64e3 PF-days
        precision="fp16-mixed",
        notes="GPT-3 alternates dense and locally banded sparse attention layers; that changes FLOPs "
        "per token at long context but no parameter",
    ),
    Preset(
        "llama2-7b",
        "Llama 2 7B",
        _llama(32, 4096, 32, 32, 11008, 32000, 4096, 10000.0),
        _LLAMA2_SRC,
        training_tokens=2e12,
        reported_gpu_hours=184_320,
        gpu="A100-80GB",
        peak_tflops=A100_BF16,
        precision="bf16-mixed",
    ),
    Preset(
        "llama2-13b",
        "Llama 2 13B",
        _llama(40, 5120, 40, 40, 13824, 32000, 4096, 10000.0),
        _LLAMA2_SRC,
        training_tokens=2e12,
        reported_gpu_hours=368_640,
        gpu="A100-80GB",
        peak_tflops=A100_BF16,
        precision="bf16-mixed",
    ),
    Preset(
        "llama2-70b",
        "Llama 2 70B",
        _llama(80, 8192, 64, 8, 28672, 32000, 4096, 10000.0),
        _LLAMA2_SRC,
        training_tokens=2e12,
        reported_gpu_hours=1_720_320,
        gpu="A100-80GB",
        peak_tflops=A100_BF16,
        precision="bf16-mixed",
        notes="grouped-query attention: 8 KV heads for 64 query heads",
    ),
    Preset(
        "llama3-8b",
        "Llama 3 8B",
        _llama(32, 4096, 32, 8, 14336, 128256, 8192, 500000.0),
        _LLAMA3_SRC,
        training_tokens=15e12,
        reported_gpu_hours=1.3e6,
        gpu="H100-80GB",
        peak_tflops=H100_SXM_BF16,
        precision="bf16-mixed",
    ),
    Preset(
        "llama3-70b",
        "Llama 3 70B",
        _llama(80, 8192, 64, 8, 28672, 128256, 8192, 500000.0),
        _LLAMA3_SRC,
        training_tokens=15e12,
        reported_gpu_hours=6.4e6,
        gpu="H100-80GB",
        peak_tflops=H100_SXM_BF16,
        precision="bf16-mixed",
    ),
    Preset(
        "llama3.1-405b",
        "Llama 3.1 405B",
        {
            **_llama(126, 16384, 128, 8, 53248, 128256, 131072, 500000.0),
            # config.json's rope_scaling: llama3, factor 8, low/high 1/4, from 8192 positions
            "rope_scaling": "llama3",
            "rope_factor": 8.0,
            "rope_low_freq_factor": 1.0,
            "rope_high_freq_factor": 4.0,
            "rope_original_context": 8192,
        },
        "Dubey et al. 2024, The Llama 3 Herd of Models, Table 3; Llama 3.1 model card; config.json",
        training_tokens=15.6e12,
        reported_gpu_hours=30.84e6,
        gpu="H100-80GB",
        peak_tflops=H100_SXM_BF16,
        precision="bf16-mixed",
        notes="Llama 3.1 rescales RoPE frequencies for long context (rope_scaling llama3); no parameter",
    ),
    Preset(
        "mistral-7b",
        "Mistral 7B",
        {**_llama(32, 4096, 32, 8, 14336, 32000, 32768, 10000.0), "sliding_window": 4096},
        "Jiang et al. 2023, Mistral 7B, Table 1; released config.json (v0.1)",
        precision="bf16-mixed",
        notes="sliding-window attention of 4096 tokens: attention-score FLOPs stop growing past T = 4096",
    ),
    Preset(
        "tinyllama-1.1b",
        "TinyLlama 1.1B",
        _llama(22, 2048, 32, 4, 5632, 32000, 2048, 10000.0),
        "Zhang et al. 2024, TinyLlama; released config.json",
        training_tokens=3e12,
        gpu="A100-40GB",
        peak_tflops=A100_BF16,
        precision="bf16-mixed",
    ),
)


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

PRESETS: dict[str, Preset] = {p.name: p for p in (*_ALL, *_MOE_TODAY)}

_ALIASES = {
    "gpt2-small": "gpt2",
    "gpt-2": "gpt2",
    "gpt3": "gpt3-175b",
    "gpt-3": "gpt3-175b",
    "tinyllama": "tinyllama-1.1b",
    "mistral": "mistral-7b",
    "gemma-2-9b": "gemma2-9b",
    "gemma-3-4b": "gemma3-4b",
    "gemma-3-4b-(text)": "gemma3-4b",
    "olmo-2-7b": "olmo2-7b",
    "mixtral": "mixtral-8x7b",
    "qwen3-30b": "qwen3-30b-a3b",
    "gpt-oss": "gpt-oss-20b",
    "deepseek": "deepseek-v3",
}


def _key(name: str) -> str:
    k = name.strip().lower().replace("_", "-").replace(" ", "-")
    k = (
        k.replace("llama-2", "llama2")
        .replace("llama-3", "llama3")
        .replace("gpt-2", "gpt2")
        .replace("gpt-3", "gpt3")
    )
    return _ALIASES.get(k, k)


def names() -> list[str]:
    """Preset names in display order (small to large within each family)."""
    return list(PRESETS)


def get(name: str) -> Preset:
    """The preset called ``name`` (case and ``-``/``_``/space insensitive; "gpt2-small", "Llama 2 7B"
    work). Unknown names raise :class:`ConfigError` with the closest match."""
    key = _key(name)
    if key in PRESETS:
        return PRESETS[key]
    near = difflib.get_close_matches(key, list(PRESETS) + list(_ALIASES), n=1, cutoff=0.5)
    hint = f" (did you mean {_ALIASES.get(near[0], near[0])!r}?)" if near else ""
    raise ConfigError([f"unknown preset {name!r}{hint}; `attention-lab budget --list-presets` lists them"])


def load_config(path: str | Path) -> GPTConfig:
    """A config from a JSON file, or from a checkpoint directory's ``config.json``; not validated
    (the caller lists the problems). Raises :class:`ConfigError` for a missing or malformed file."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    return GPTConfig.load(path, validate=False)


@dataclass(frozen=True)
class SavedConfig:
    """A config saved from the app: its display ``name`` (file stem or checkpoint folder), ``path``."""

    name: str
    path: Path
    config: GPTConfig


def saved_configs(directory: str | Path) -> list[SavedConfig]:
    """Every config saved under ``directory``: ``*.json`` files in it and ``*/config.json`` of
    checkpoint folders one level down, sorted by name. Files that are not a GPTConfig (other JSON,
    unreadable, unknown fields) are skipped; a missing directory gives an empty list."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    candidates = [(p.stem, p) for p in directory.glob("*.json")]
    candidates += [(p.parent.name, p) for p in directory.glob("*/config.json")]
    out = []
    for name, p in candidates:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            cfg = GPTConfig.from_dict(data, validate=False)
        except (OSError, UnicodeDecodeError, ValueError, TypeError):
            continue
        out.append(SavedConfig(name, p, cfg))
    return sorted(out, key=lambda s: (s.name, str(s.path)))


__all__ = ["PRESETS", "Preset", "SavedConfig", "get", "load_config", "names", "saved_configs"]
