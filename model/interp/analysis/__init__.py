"""Headless numbers behind the Attention inspector and the Labs: plain numpy arrays and dataclasses.

One function per number; every docstring gives the formula and the shapes. Nothing here imports Qt,
takes locks or keeps state: the app's workers call these (holding the shared compute lock when they
run the model) and hand the results to the views.

==================  =====================================================================
module              what it computes
==================  =====================================================================
``heads``           per-head entropy, previous-token / sink / self / induction scores, names
``ablation``        next-token and validation-loss change when heads are switched off
``next_token``      top-k next tokens with probabilities at every position
``aggregate``       means over heads / layers / a set of heads; token focus
``pipeline``        one head stage by stage (QKᵀ, scaled, masked, softmax, ×V) with shapes
``masks``           causal / none / sliding-window / prefix-LM masks
``softmax_theory``  sampled saturation curves over d_k for five scaling rules
``saturation``      per-head entropy and max weight with and without the model's scale
``residual``        residual norms, sublayer writes, logit lens
``gradflow``        per-layer gradient norms at init (Pre/Post-LN × LayerNorm/RMSNorm)
``positions``       sinusoidal table, offset profiles, RoPE, the permutation experiment
``worked_example``  the three-token attention example with every intermediate
``compare``         differences of two traces, aligned metric tables, config diff
``patching``        activation patching per head [L, H] and per stream position [L, T]; path patching
``circuits``        QK/OV circuits, Q/K/V composition of every pair of heads, copying (weights only),
                    from ``circuit_weights`` (folded W_Q/K/V/O), ``composition``, ``full_circuits``
``attribution``     direct logit attribution of embedding, heads and MLPs (frozen final norm)
``rollout``         attention rollout (Abnar & Zuidema 2020), with its caveat
==================  =====================================================================
"""

from model.interp.analysis.ablation import (
    AblationEffect,
    LossChange,
    ablation_dict,
    ablation_effect,
    head_importance,
    kl_divergence,
    mean_loss,
    validation_batches,
    validation_loss_change,
)
from model.interp.analysis.aggregate import (
    TokenFocus,
    mean_over_all,
    mean_over_heads,
    mean_over_heads_set,
    mean_over_layers,
    token_focus,
)
from model.interp.analysis.attribution import LogitAttribution, direct_logit_attribution
from model.interp.analysis.circuits import (
    Circuits,
    CircuitsUnsupported,
    Composition,
    FactoredMatrix,
    HeadCircuits,
    HeadWeights,
    baseline_scores,
    composition_scores,
    full_ov_circuit,
    full_qk_circuit,
    head_circuits,
    head_weights,
    model_circuits,
    promoted_tokens,
)
from model.interp.analysis.compare import (
    HeadDiff,
    MetricRow,
    align_metrics,
    config_diff,
    head_diff_summary,
    weights_difference,
)
from model.interp.analysis.gradflow import (
    GradFlow,
    block_grad_norms,
    grad_flow_at_init,
    grad_flow_variants,
)
from model.interp.analysis.heads import (
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
    learned_sink_share,
    measure_induction,
    prev_token_score,
    repeated_sequence,
    row_entropy,
    self_score,
    sink_score,
)
from model.interp.analysis.masks import (
    MASK_KINDS,
    apply_mask,
    causal_mask,
    full_mask,
    future_weight,
    make_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from model.interp.analysis.next_token import NextTokens, prompt_next_tokens, top_k_next_tokens
from model.interp.analysis.patching import (
    Patching,
    PathPatching,
    cache_activations,
    patch_heads,
    patch_resid,
    path_patch,
    path_patch_joint,
    run_patched,
)
from model.interp.analysis.pipeline import HeadPipeline, Stage, head_pipeline, head_pipeline_from_model
from model.interp.analysis.positions import (
    OffsetProfile,
    PermutationResult,
    RopeCheck,
    by_offset,
    permutation_experiment,
    position_similarity,
    rope_pair_path,
    rope_rotate,
    rope_scores,
    sinusoidal_heatmap,
    sinusoidal_offset_profile,
)
from model.interp.analysis.residual import (
    LogitLens,
    ResidualNorms,
    WriteStats,
    lens_logits,
    logit_lens,
    residual_norms,
    write_stats,
)
from model.interp.analysis.rollout import ROLLOUT_CAVEAT, Rollout, attention_rollout
from model.interp.analysis.saturation import SaturationStats, mean_max_weight, model_saturation
from model.interp.analysis.softmax_theory import (
    D_K_GRID,
    VARIANTS,
    SoftmaxCurves,
    SoftmaxStats,
    sample_logits,
    score_histogram,
    softmax_curves,
    softmax_stats,
)
from model.interp.analysis.worked_example import WorkedExample, attention_example

__all__ = [
    "D_K_GRID",
    "HEAD_ROLES",
    "MASK_KINDS",
    "ROLLOUT_CAVEAT",
    "VARIANTS",
    "AblationEffect",
    "Circuits",
    "CircuitsUnsupported",
    "Composition",
    "FactoredMatrix",
    "GradFlow",
    "HeadCircuits",
    "HeadClassification",
    "HeadDiff",
    "HeadLabel",
    "HeadMetrics",
    "HeadPipeline",
    "HeadThresholds",
    "HeadWeights",
    "LogitAttribution",
    "LogitLens",
    "LossChange",
    "MetricRow",
    "NextTokens",
    "OffsetProfile",
    "Patching",
    "PathPatching",
    "PermutationResult",
    "RepeatedPrompt",
    "ResidualNorms",
    "Rollout",
    "RopeCheck",
    "SaturationStats",
    "SoftmaxCurves",
    "SoftmaxStats",
    "Stage",
    "TokenFocus",
    "WorkedExample",
    "WriteStats",
    "ablation_dict",
    "ablation_effect",
    "align_metrics",
    "apply_mask",
    "attention_example",
    "attention_rollout",
    "baseline_scores",
    "block_grad_norms",
    "by_offset",
    "cache_activations",
    "causal_mask",
    "classify_heads",
    "composition_scores",
    "config_diff",
    "direct_logit_attribution",
    "entropy",
    "entropy_norm",
    "full_mask",
    "full_ov_circuit",
    "full_qk_circuit",
    "future_weight",
    "grad_flow_at_init",
    "grad_flow_variants",
    "head_circuits",
    "head_diff_summary",
    "head_importance",
    "head_metrics",
    "head_metrics_from_trace",
    "head_pipeline",
    "head_pipeline_from_model",
    "head_weights",
    "induction_score",
    "kl_divergence",
    "learned_sink_share",
    "lens_logits",
    "logit_lens",
    "make_mask",
    "mean_loss",
    "mean_max_weight",
    "mean_over_all",
    "mean_over_heads",
    "mean_over_heads_set",
    "mean_over_layers",
    "measure_induction",
    "model_circuits",
    "model_saturation",
    "patch_heads",
    "patch_resid",
    "path_patch",
    "path_patch_joint",
    "permutation_experiment",
    "position_similarity",
    "prefix_lm_mask",
    "prev_token_score",
    "promoted_tokens",
    "prompt_next_tokens",
    "repeated_sequence",
    "residual_norms",
    "rope_pair_path",
    "rope_rotate",
    "rope_scores",
    "row_entropy",
    "run_patched",
    "sample_logits",
    "score_histogram",
    "self_score",
    "sink_score",
    "sinusoidal_heatmap",
    "sinusoidal_offset_profile",
    "sliding_window_mask",
    "softmax_curves",
    "softmax_stats",
    "token_focus",
    "top_k_next_tokens",
    "validation_batches",
    "validation_loss_change",
    "weights_difference",
    "write_stats",
]
