"""The presets of the classic blocks (:mod:`model.budget.presets`): GPT-2, GPT-3, Llama 2 and 3,
Mistral and TinyLlama, from their papers and released configs.
"""

from __future__ import annotations

from model.budget.preset_type import A100_BF16, H100_SXM_BF16, Preset, _gpt2, _llama

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
