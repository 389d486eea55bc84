"""One head taken apart, stage by stage, for the inspector's pipeline view.

For head ``h`` of layer ``l`` (query/key/value rows ``q_i``, ``k_j``, ``v_j`` of width ``d_k``)::

    Q, K, V                         [T, d_k] each      (after RoPE when the model uses it)
    S      = Q Kᵀ                   [T, T] = [T, d_k] · [d_k, T]
    S'     = scale(S)               [T, T]   sqrt_dk: S/√d_k · none: S · learned: τ_h S ·
                                              qk_norm: g_h · cos(q_i, k_j) = g_h S_ij / (‖q_i‖ ‖k_j‖)
    M      = S' with −∞ where masked [T, T]
    A      = softmax_row(M)         [T, T]   rows sum to 1
    O      = A V                    [T, d_k] = [T, T] · [T, d_k]

Every stage is read from a :class:`~model.interp.trace.Trace` (so it is exactly what the model computed) and
comes with its formula and its shape both as symbols and as numbers, e.g. ``[T, T] = [T, d_k] ·
[d_k, T]`` and ``[7, 7] = [7, 16] · [16, 7]``. The masked stage holds ``-inf``: draw it as "hidden".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STAGE_KEYS = ("q", "k", "v", "scores_raw", "scores", "scores_masked", "pattern", "z")
PIPELINE_KINDS = ("q", "k", "v", "scores_raw", "scores", "pattern", "z")


@dataclass
class Stage:
    """One step of the pipeline: ``value`` (float32 numpy) with its ``formula`` and shapes."""

    key: str
    title: str
    formula: str
    shape: str
    shape_numeric: str
    value: np.ndarray


@dataclass
class HeadPipeline:
    """All stages of one head in order (see :data:`STAGE_KEYS`); ``pipeline["pattern"].value`` etc.
    (stage keys are the trace's hook names, plus ``scores_masked``).

    ``scale`` is the effective factor between raw and scaled scores for the scalar rules (1/√d_k,
    1, or the learned τ_h) and the gain ``g_h`` for qk_norm.
    """

    layer: int
    head: int
    kv_head: int
    attn_scale: str
    scale: float
    d_k: int
    T: int
    stages: list[Stage] = field(default_factory=list)

    def __getitem__(self, key: str) -> Stage:
        for s in self.stages:
            if s.key == key:
                return s
        raise KeyError(f"no stage {key!r}; stages: {', '.join(s.key for s in self.stages)}")

    def __iter__(self):
        return iter(self.stages)


def _shape(template: str, T: int, d_k: int) -> str:
    return template.replace("d_k", str(d_k)).replace("T", str(T))


def head_pipeline(trace, layer: int, head: int, batch: int = 0) -> HeadPipeline:
    """The stages of head ``head`` in layer ``layer`` from ``trace`` (which must hold :data:`PIPELINE_KINDS`).

    Works for any ``attn_scale``, GQA/MQA (``kv_head`` = the shared key/value head) and any mask.
    """
    missing = [k for k in PIPELINE_KINDS if not trace.has(k, layer)]
    if missing:
        raise KeyError(f"trace lacks {', '.join(missing)} for layer {layer}: trace with kinds=None or these")
    cfg = trace.config
    if not 0 <= head < cfg.attention.n_heads:
        raise ValueError(f"head {head} is outside 0..{cfg.attention.n_heads - 1}")

    def get(kind):
        return trace[kind, layer][batch, head].float().numpy()

    q, k, v = get("q"), get("k"), get("v")
    raw, scaled, weights, out = get("scores_raw"), get("scores"), get("pattern"), get("z")
    mask = trace.layer_mask(layer).numpy().astype(bool)
    T, d_k = q.shape
    masked = np.where(mask, scaled, -np.inf).astype(np.float32)
    rule = cfg.attention.attn_scale
    rope = " (rotated by RoPE)" if cfg.positional.positions == "rope" else ""
    kv_head = head // cfg.n_rep
    shared = f", K/V head {kv_head} shared by {cfg.n_rep} query heads" if cfg.n_rep > 1 else ""

    if rule == "qk_norm":
        denom = np.linalg.norm(q, axis=-1)[:, None] * np.linalg.norm(k, axis=-1)[None, :]
        cos = np.divide(raw, denom, out=np.zeros_like(raw), where=denom > 0)
        scale = float((scaled * cos).sum() / max((cos * cos).sum(), 1e-30))
        scale_formula = f"S' = g_h · cos(q_i, k_j) = g_h · S_ij / (‖q_i‖ ‖k_j‖),  g_h = {scale:.3g}"
    else:
        scale = float((scaled * raw).sum() / max((raw * raw).sum(), 1e-30))
        scale_formula = {
            "sqrt_dk": f"S' = S / √d_k = S / {np.sqrt(d_k):.3g}"
            if cfg.attention.attn_scale_dim is None
            else f"S' = S / √{cfg.attention.attn_scale_dim:g} = S / "
            f"{np.sqrt(cfg.attention.attn_scale_dim):.3g} (the model's "
            f"scale dimension, not d_k = {d_k})",
            "none": "S' = S (no scaling)",
            "learned": f"S' = τ_h · S,  learned τ_h = {scale:.3g} (1/√d_k = {1 / np.sqrt(d_k):.3g})",
        }[rule]
    cap = cfg.attention.attn_softcap
    if cap is not None:  # Gemma 2: the scaled scores are soft-capped before the mask
        scale_formula += f", then soft-capped: {cap:g}·tanh(S'/{cap:g})"
    hidden = int((~mask).sum())
    mask_formula = (
        f"M_ij = S'_ij where query i may see key j, −∞ elsewhere ({hidden} of {T * T} hidden)"
        if hidden
        else "M = S' (no position is hidden)"
    )
    pattern_formula = "A = softmax_row(M), each row sums to 1"
    if cfg.attention.attn_sinks:
        share = float(1 - weights.sum(-1).mean())
        pattern_formula = (
            "A_ij = exp(M_ij) / (Σ_j' exp(M_ij') + exp(b_h)): the head's sink b_h takes "
            f"{share:.0%} of the weight on average (a row sums to less than 1)"
        )
    rows = [
        ("q", f"Queries Q, head {head}{rope}", "Q = X W_Q", "[T, d_k]", q),
        ("k", f"Keys K{rope}{shared}", "K = X W_K", "[T, d_k]", k),
        ("v", f"Values V{shared}", "V = X W_V", "[T, d_k]", v),
        ("scores_raw", "Raw scores", "S = Q Kᵀ", "[T, T] = [T, d_k] · [d_k, T]", raw),
        ("scores", "Scaled scores", scale_formula, "[T, T]", scaled),
        ("scores_masked", "Masked scores", mask_formula, "[T, T]", masked),
        ("pattern", "Attention weights", pattern_formula, "[T, T]", weights),
        ("z", "Head output", "O = A V", "[T, d_k] = [T, T] · [T, d_k]", out),
    ]
    stages = [
        Stage(key, title, formula, shp, _shape(shp, T, d_k), val) for key, title, formula, shp, val in rows
    ]
    return HeadPipeline(layer, head, kv_head, rule, scale, d_k, T, stages)


def head_pipeline_from_model(model, idx, layer: int, head: int, *, attn_mask=None) -> HeadPipeline:
    """Trace only ``layer`` of ``model`` on ``idx`` ([T] or [1, T]) and take head ``head`` apart."""
    from model.interp.trace import run_with_trace
    from model.nn.hooks import use_mask

    hooks = use_mask(attn_mask.to(model.device)) if attn_mask is not None else []
    trace = run_with_trace(model, idx, layers=[layer], kinds=PIPELINE_KINDS, hooks=hooks)
    return head_pipeline(trace, layer, head)


__all__ = [
    "PIPELINE_KINDS",
    "STAGE_KEYS",
    "HeadPipeline",
    "Stage",
    "head_pipeline",
    "head_pipeline_from_model",
]
