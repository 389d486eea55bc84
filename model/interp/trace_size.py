"""What a trace will take, before anything is traced: the trace kinds, their bytes
(:func:`estimate_nbytes`), an inspection's whole need (:func:`inspection_need`) and the richest
inspection within a budget (:func:`plan_inspection`).

Arithmetic on a :class:`~model.config.GPTConfig` only, no torch: a command can size (and refuse) an
inspection in milliseconds, before torch is even imported. For L layers, H heads, T tokens, d_model
d, head_dim d_k, batch B and b bytes per value, a trace holds per layer H·T² per square kind
(``scores_raw``, ``scores``, ``pattern``), H·T·d_k per other head kind, T·d per stream kind
and T per norm kind, plus T·d for ``ln_final``: (L · per_layer + once) · B · b bytes. Kinds are the
hook names of :mod:`model.interp.trace`; :data:`ALIASES` are the older names, accepted everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from model.budget.sizing import Available, ModelTooLarge, Need, largest_knob, load_need
from model.config import GPTConfig

HEAD_KINDS = ("q", "k", "v", "scores_raw", "scores", "pattern", "z")
SQUARE_KINDS = ("scores_raw", "scores", "pattern")
STREAM_KINDS = ("attn_out", "mlp_out", "resid_pre", "resid_mid", "resid_post")
NORM_KINDS = ("attn_write_norm", "mlp_write_norm")
LAYER_KINDS = HEAD_KINDS + STREAM_KINDS + NORM_KINDS
GLOBAL_KINDS = ("ln_final",)
ALL_KINDS = LAYER_KINDS + GLOBAL_KINDS
#: The older kind names, accepted wherever a kind is: each → the hook name it is.
ALIASES = {"weights": "pattern", "scores_scaled": "scores", "head_out": "z", "resid_final": "ln_final"}
#: What the .npz inspection format (``model.interp.export``) records.
REQUIRED_KINDS = ("pattern", "scores_raw", "scores", "resid_pre", "resid_mid", "resid_post")


def canonical(kind: str) -> str:
    """The hook name of ``kind`` (an older name from :data:`ALIASES` → its hook name; others as given)."""
    return ALIASES.get(kind, kind)


def canonical_kinds(kinds: Iterable[str] | str) -> tuple[str, ...]:
    """``kinds`` by their hook names, in order, each once."""
    kinds = [kinds] if isinstance(kinds, str) else kinds
    return tuple(dict.fromkeys(canonical(k) for k in kinds))


def estimate_nbytes(
    n_layers: int,
    n_heads: int,
    seq_len: int,
    d_model: int,
    head_dim: int,
    *,
    kinds: Iterable[str] | None = None,
    batch: int = 1,
    bytes_per_value: int = 4,
) -> int:
    """Bytes a trace of these kinds takes (logits excluded): the formula in the module docstring."""
    kinds = set(ALL_KINDS if kinds is None else canonical_kinds(kinds))
    per_layer = 0
    for kind in kinds:
        if kind in SQUARE_KINDS:
            per_layer += n_heads * seq_len * seq_len
        elif kind in HEAD_KINDS:
            per_layer += n_heads * seq_len * head_dim
        elif kind in STREAM_KINDS:
            per_layer += seq_len * d_model
        elif kind in NORM_KINDS:
            per_layer += seq_len
    once = seq_len * d_model if "ln_final" in kinds else 0
    return (per_layer * n_layers + once) * batch * bytes_per_value


# ---------------------------------------------------------------------------------------------
# inspection within a budget
# ---------------------------------------------------------------------------------------------
def _n(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def inspection_need(
    cfg: GPTConfig,
    seq_len: int,
    *,
    kinds: tuple[str, ...],
    n_layers: int | None = None,
    bytes_per_value: int = 4,
    export_bytes_per_value: int = 0,
    with_model: bool = False,
    batch: int = 1,
) -> Need:
    """Bytes to trace ``seq_len`` tokens recording ``kinds`` in ``n_layers`` layers (all by default).

    ``export_bytes_per_value`` > 0 adds the copies an export makes of the square kinds; ``with_model``
    adds :func:`load_need` (a model not built yet).
    """
    L = _n(cfg.n_layers) if n_layers is None else n_layers
    H, T, d, V = _n(cfg.n_heads), max(1, _n(seq_len)), _n(cfg.d_model), _n(cfg.vocab_size)
    B = max(1, _n(batch))
    trace = estimate_nbytes(L, H, T, d, _n(cfg.d_head), kinds=kinds, bytes_per_value=bytes_per_value, batch=B)
    kinds = canonical_kinds(kinds)
    squares = sum(1 for k in kinds if k in SQUARE_KINDS)
    parts = {
        "recorded heads": trace,
        "one layer's scores in flight": 4 * 4 * B * H * T * T,
        "logits": 4 * B * T * V,
        "the export": export_bytes_per_value * squares * L * H * T * T,
    }
    if with_model:
        parts["the model"] = load_need(cfg, copies=1).total
    lower = f"the prompt's {T} tokens" if squares else largest_knob(cfg)
    return Need(f"inspecting {T} tokens in {L} layers × {H} heads", parts, lower)


@dataclass(frozen=True)
class InspectionPlan:
    """What an inspection records so that it fits: ``kinds``, ``layers`` (None = all), ``float16``."""

    kinds: tuple[str, ...]
    layers: list[int] | None
    float16: bool
    need: Need
    dropped: list[str] = field(default_factory=list)


def plan_inspection(
    cfg: GPTConfig,
    seq_len: int,
    *,
    kinds: tuple[str, ...],
    budget: int,
    keep: tuple[str, ...] = ("pattern",),
    float16: bool | None = None,
    with_model: bool = False,
) -> InspectionPlan:
    """The richest inspection within ``budget`` bytes, or :class:`ModelTooLarge` with the numbers.

    Tried in order: every kind in float32; in float16; only ``keep`` (the attention weights) in
    float16; then ``keep`` for as many layers as fit, spread evenly from first to last. ``float16``
    True/False pins the precision.
    """
    kinds, keep = canonical_kinds(kinds), canonical_kinds(keep)
    L = _n(cfg.n_layers)
    precisions = [False, True] if float16 is None else [float16]
    candidates: list[tuple[tuple[str, ...], bool]] = [(kinds, f16) for f16 in precisions]
    small = tuple(k for k in kinds if k in keep or k not in ("scores_raw", "scores"))
    if small != kinds:
        candidates += [(small, f16) for f16 in precisions]
    need = None
    for ks, f16 in candidates:
        s = 2 if f16 else 4
        need = inspection_need(
            cfg, seq_len, kinds=ks, bytes_per_value=s, export_bytes_per_value=s, with_model=with_model
        )
        if need.total <= budget:
            dropped = [k for k in kinds if k not in ks]
            return InspectionPlan(ks, None, f16, need, dropped)
    ks, f16 = candidates[-1]
    s = 2 if f16 else 4
    for n_layers in range(L - 1, 0, -1):
        need = inspection_need(
            cfg,
            seq_len,
            kinds=ks,
            n_layers=n_layers,
            bytes_per_value=s,
            export_bytes_per_value=s,
            with_model=with_model,
        )
        if need.total <= budget:
            layers = sorted({round(i * (L - 1) / max(1, n_layers - 1)) for i in range(n_layers)})
            return InspectionPlan(ks, layers, f16, need, [k for k in kinds if k not in ks])
    assert need is not None
    raise ModelTooLarge(need, Available(budget, "the inspection budget"), budget)
