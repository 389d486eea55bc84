"""Attention Lab's headless core: pure PyTorch and numpy, no Qt.

The public API is :mod:`model.api`, whose names are this package's too (``from model import
open_model, run_with_trace``); everything else is internal and may change. They are loaded on first
use, so importing ``model.budget`` or ``model.config`` alone still imports no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from model.config import ConfigError, GPTConfig

#: The public API: :mod:`model.api`'s names (its ``__all__``), loaded from it when first asked for
#: (PEP 562)
API = (
    "AttributionResult",
    "Checkpoint",
    "Circuits",
    "HeadScores",
    "PatchingResult",
    "Prompt",
    "Trace",
    "ablate_heads",
    "attribute",
    "budget_report",
    "budget_table",
    "circuits",
    "qk_map",
    "head_scores",
    "open_model",
    "patch",
    "prompt_of",
    "run_with_trace",
    # sparse autoencoders (model.interp.sae): training, evaluating, reading their features
    "SAEEvaluation",
    "SAETrainResult",
    "SparseAutoencoder",
    "open_sae",
    "sae_eval",
    "sae_train",
    "feature_stats",
    "feature_logits",
    "prompt_features",
)


def __getattr__(name: str) -> Any:
    if name in API:
        return getattr(importlib.import_module("model.api"), name)
    raise AttributeError(f"module 'model' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API})


__all__ = ["ConfigError", "GPTConfig", *API]
