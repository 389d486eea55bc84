"""Headless numbers behind the Attention inspector and the Labs: plain numpy arrays and dataclasses.

Modules: ``heads`` (per-head metrics and names).
"""

from model.analysis.heads import (
    HEAD_ROLES,
    HeadClassification,
    HeadLabel,
    HeadMetrics,
    HeadThresholds,
    RepeatedPrompt,
    classify_heads,
    entropy,
    entropy_norm,
    head_metrics,
    head_metrics_from_trace,
    induction_score,
    measure_induction,
    prev_token_score,
    repeated_sequence,
    row_entropy,
    self_score,
    sink_score,
)

__all__ = [
    "HEAD_ROLES",
    "HeadClassification",
    "HeadLabel",
    "HeadMetrics",
    "HeadThresholds",
    "RepeatedPrompt",
    "classify_heads",
    "entropy",
    "entropy_norm",
    "head_metrics",
    "head_metrics_from_trace",
    "induction_score",
    "measure_induction",
    "prev_token_score",
    "repeated_sequence",
    "row_entropy",
    "self_score",
    "sink_score",
]
