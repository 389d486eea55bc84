"""What the Compare tab writes: its quick variant sets, the cells of its tables, and the sentences
under its pages (the base config, the config diff, why two runs have no A − B map, the A − B
verdict). Plain Python and numpy (no Qt); the numbers are :mod:`model.compare.comparison`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from model.compare.tables import diff_levels, same_shape
from model.compare.variants import format_value
from model.config import GPTConfig

#: Columns of the summary table: (header, key of :func:`~model.compare.comparison.summary_row` or
#: None for name/kind, format).
SUMMARY_COLUMNS: tuple[tuple[str, str | None, str | None], ...] = (
    ("run", None, None),
    ("kind", None, None),
    ("steps", "steps", "{:,}"),
    ("train\nloss", "train_loss", "{:.4f}"),
    ("val\nloss", "val_loss", "{:.4f}"),
    ("tokens\n/ s", "tokens_per_s", "{:,.0f}"),
    ("parameters", "params", "{:,}"),
    ("forward FLOPs\n/ token", "flops_per_token", "{:,}"),
    ("KV cache / token\n(fp32)", "kv_cache_bytes_per_token", "{:,} B"),
)

#: The per-head metrics the aligned table offers: (HeadMetrics field, label).
METRIC_CHOICES: tuple[tuple[str, str], ...] = (
    ("entropy_norm", "normalised entropy (1 = uniform, 0 = one key)"),
    ("entropy", "entropy (nats)"),
    ("prev_token", "previous-token score"),
    ("sink", "first-token (sink) score"),
    ("self_score", "self (diagonal) score"),
)

VariantSet = list[tuple[str, dict[str, Any]]]


def quick_variants(base: GPTConfig) -> list[tuple[str, VariantSet]]:
    """The everyday questions as ready-made variant sets of ``base``: ``[(label, [(name, changes),
    ...]), ...]`` (MHA vs GQA vs MQA only when the head count is even and at least 4)."""
    h = base.attention.n_heads
    out: list[tuple[str, VariantSet]] = [
        ("Pre-LN vs Post-LN", [("pre-LN", {"norm_position": "pre"}), ("post-LN", {"norm_position": "post"})]),
        (f"MHA vs MQA ({h} K/V heads vs 1)", [("MHA", {"n_kv_heads": None}), ("MQA", {"n_kv_heads": 1})]),
        (
            "scaled vs unscaled scores (1/√d_k)",
            [("scaled", {"attn_scale": "sqrt_dk"}), ("unscaled", {"attn_scale": "none"})],
        ),
        (
            "RoPE vs learned positions",
            [("RoPE", {"positions": "rope"}), ("learned", {"positions": "learned"})],
        ),
        (
            f"{h} heads vs {2 * h}",
            [
                (f"{h} heads", {"n_heads": h, "n_kv_heads": None}),
                (f"{2 * h} heads", {"n_heads": 2 * h, "n_kv_heads": None}),
            ],
        ),
        ("causal mask vs none", [("causal", {"causal": True}), ("no mask", {"causal": False})]),
    ]
    if h >= 4 and h % 2 == 0:
        gqa: VariantSet = [
            ("MHA", {"n_kv_heads": None}),
            (f"GQA-{h // 2}", {"n_kv_heads": h // 2}),
            ("MQA", {"n_kv_heads": 1}),
        ]
        out.insert(2, (f"MHA vs GQA vs MQA ({h}, {h // 2}, 1)", gqa))
    return out


def visible_text(text: str, limit: int = 80) -> str:
    """A prompt on one line: new lines and tabs as visible marks (⏎, ⇥), longer than ``limit``
    characters shortened with "…"."""
    s = text.replace("\n", "⏎").replace("\t", "⇥")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def field_text(cfg: GPTConfig, name: str) -> str:
    """A config field as the config diff shows it: an "auto" size with the value it takes
    (``n_kv_heads`` = n_heads, ``head_dim`` = d_model / n_heads, ``d_ff`` = 4·d_model)."""
    value = cfg.get(name)
    derived = {"n_kv_heads": cfg.kv_heads, "head_dim": cfg.d_head, "d_ff": cfg.hidden}
    if value is None and name in derived:
        return f"auto ({derived[name]})"
    return format_value(value, name)


def format_cell(value: Any, fmt: str | None) -> str:
    """``value`` through ``fmt`` ("–" for None; ``str`` when the format does not apply)."""
    if value is None:
        return "–"
    if fmt is None:
        return str(value)
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def summary_cells(name: str, kind: str, row: dict[str, Any]) -> list[str]:
    """The texts of one summary-table row (:data:`SUMMARY_COLUMNS`); the FLOPs cell names the
    context ``T`` it was computed at."""
    cells = []
    for c, (_header, key, fmt) in enumerate(SUMMARY_COLUMNS):
        if key is None:
            cells.append(name if c == 0 else kind)
            continue
        text = format_cell(row.get(key), fmt)
        if key == "flops_per_token" and row.get(key) is not None and row.get("context"):
            text += f" (T = {row['context']:,})"
        cells.append(text)
    return cells


def config_diff_note(n_runs: int, n_differ: int) -> str:
    """The sentence above the config diff of ``n_runs`` runs with ``n_differ`` differing fields."""
    n = len(GPTConfig.field_names())
    if n_runs < 2:
        return "Add two or more runs to see which config fields differ."
    if not n_differ:
        return f"All {n} config fields are equal in every run."
    return (
        f"Only the fields that differ: {n_differ} of {n}; every other field is the same in every run. "
        "(“auto” sizes are derived: n_kv_heads = n_heads, head_dim = d_model / n_heads, "
        "d_ff = 4·d_model; the value they take is in brackets.)"
    )


def pair_mismatch(a: str, wa: np.ndarray, ta: list[str], b: str, wb: np.ndarray, tb: list[str]) -> str | None:
    """Why runs ``a`` and ``b`` (weights [L, H, T, T], tokens) have no A − B map, or None when they have."""
    if same_shape(wa, wb) and ta == tb:
        return None
    if same_shape(wa, wb):
        why = "they read the prompt as different tokens (different tokenizers)"
    else:
        why = (
            f"{a} has {wa.shape[0]}×{wa.shape[1]} heads on {len(ta)} tokens, "
            f"{b} {wb.shape[0]}×{wb.shape[1]} on {len(tb)}"
        )
    return f"No difference map: {a} and {b} do not have the same shape — {why}."


def diff_verdict(a: str, b: str, diff: np.ndarray, row_tv: np.ndarray, n_tokens: int) -> str:
    """The sentence under the A − B map: what the colours mean and the head that changed most
    (largest mean total variation ``row_tv`` [L, H])."""
    levels = diff_levels(diff)
    m = float(np.abs(diff).max()) if diff.size else 0.0
    if m == 0:
        verdict = "every head attends exactly alike (A − B is zero everywhere)"
    else:
        li, hi = np.unravel_index(int(np.argmax(row_tv)), row_tv.shape)
        verdict = (
            f"largest difference {m:.3f}; the head that changed most is layer {li}, head {hi} "
            f"(total variation {row_tv[li, hi]:.3f})"
        )
    return (
        f"{a} − {b} on the same {n_tokens} tokens: red where {a} attends more, blue where {b} does; "
        f"colours span ±{levels[1]:.3g} in every head. {verdict.capitalize()}."
    )


def describe_base(cfg: GPTConfig, source: str) -> str:
    """One line about the config that variants change, and its data source."""
    kv = f", {cfg.kv_heads} K/V heads" if cfg.kv_heads != cfg.attention.n_heads else ""
    return (
        f"Base: the Model panel's config — {cfg.core.n_layers} layers, d = {cfg.core.d_model}, "
        f"{cfg.attention.n_heads} heads{kv}, {cfg.positional.positions} positions, "
        f"{cfg.normalization.norm_position}-{cfg.normalization.norm}; "
        f"data: {source or 'no data source yet'}."
    )


def describe_config(cfg: GPTConfig) -> str:
    """A config's shape in one line (a run's tooltip)."""
    return (
        f"{cfg.core.n_layers} layers, d = {cfg.core.d_model}, {cfg.attention.n_heads} heads ({cfg.kv_heads} "
        "K/V), "
        f"{cfg.positional.positions}, {cfg.normalization.norm_position}-{cfg.normalization.norm}, "
        f"attn_scale {cfg.attention.attn_scale}"
    )


__all__ = [
    "METRIC_CHOICES",
    "SUMMARY_COLUMNS",
    "VariantSet",
    "config_diff_note",
    "describe_base",
    "describe_config",
    "diff_verdict",
    "field_text",
    "format_cell",
    "pair_mismatch",
    "quick_variants",
    "summary_cells",
    "visible_text",
]
