"""What a budget preset records (:class:`Preset`: a real model's GPTConfig fields and what is public of
its training), the two shapes most presets' configs start from (GPT-2's and Llama's), and the GPU peaks
the presets cite. The presets themselves: :mod:`model.budget.presets`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model.config import GPTConfig


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
