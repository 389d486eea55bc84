"""Budgets side by side: one row per figure (:data:`SIDE_ROWS`), one column per budget's report, as
the Budget tab's Side by side page shows them."""

from __future__ import annotations

import math
from typing import Any

from model.budget import arithmetic as budget


def _local(r: dict[str, Any]) -> str:
    """``"21 of 42, W = 4,096"``, or ``"none"``."""
    sy = r["symbols"]
    return f"{sy['L_local']:,} of {sy['L']:,}, W = {sy['W']:,}" if sy.get("L_local") else "none"


def _experts(r: dict[str, Any]) -> str:
    """``"8 of 256 + 1 shared"``, or ``"dense"``."""
    sy = r["symbols"]
    if "E" not in sy:
        return "dense"
    shared = f" + {sy['s']} shared" if sy.get("s") else ""
    return f"{sy['k']} of {sy['E']}{shared}"


#: (label, how to read it from a report, kind) — kind is "int", "float", "text", "bytes", "flops"
SIDE_ROWS: list[tuple[str, Any, str]] = [
    ("layers L", lambda r: r["symbols"]["L"], "int"),
    ("width d", lambda r: r["symbols"]["d"], "int"),
    ("query heads h", lambda r: r["symbols"]["h"], "int"),
    ("KV heads h_kv", lambda r: r["symbols"]["h_kv"], "int"),
    ("head size d_k", lambda r: r["symbols"]["d_k"], "int"),
    ("MLP width d_ff", lambda r: r["symbols"]["d_ff"], "int"),
    ("vocabulary V", lambda r: r["symbols"]["V"], "int"),
    ("context T_max", lambda r: r["symbols"]["T_max"], "int"),
    ("MLP", lambda r: r["config"]["mlp"], "text"),
    ("norm", lambda r: f"{r['config']['norm']} ({r['config']['norm_position']})", "text"),
    ("positions", lambda r: r["config"]["positions"], "text"),
    ("biases", lambda r: r["config"]["bias"], "text"),
    ("output head", lambda r: "tied" if r["config"]["tie_embeddings"] else "untied", "text"),
    ("attention", lambda r: r["kv_cache"]["kind"], "text"),
    ("local layers (window W)", lambda r: _local(r), "text"),
    ("experts (per token of all)", lambda r: _experts(r), "text"),
    ("parameters, total", lambda r: r["params"]["total"], "int"),
    ("parameters, active per token", lambda r: r["params"]["active"], "int"),
    ("parameters, non-embedding", lambda r: r["params"]["non_embedding"], "int"),
    ("attention per layer", lambda r: r["params"]["attention_per_layer"], "int"),
    ("MLP per layer", lambda r: r["params"]["mlp_per_layer"], "int"),
    ("embeddings + output", lambda r: r["params"]["embeddings_and_head"], "int"),
    ("forward FLOPs/token at T", lambda r: r["flops"]["forward_total_per_token"], "flops"),
    ("training FLOPs/token at T", lambda r: r["flops"]["train_total_per_token"], "flops"),
    ("attention share at T", lambda r: r["flops"]["shares"]["attention scores"], "percent"),
    ("attention overtakes MLP at T ≈", lambda r: r["flops"]["attention_crossover_seq_len"], "float"),
    ("KV cache per token", lambda r: r["kv_cache"]["per_token_bytes"], "bytes"),
    ("KV cache at T, B", lambda r: r["kv_cache"]["bytes"], "bytes"),
    ("GQA/MQA saving vs MHA", lambda r: r["kv_cache"]["saving_factor"], "times"),
    (
        "training memory (states)",
        lambda r: r["memory"]["training"]["total"] - r["memory"]["training"]["activations"],
        "bytes",
    ),
    ("training memory (total)", lambda r: r["memory"]["training"]["total"], "bytes"),
    ("inference memory", lambda r: r["memory"]["inference"]["total"], "bytes"),
    ("training compute for D tokens", lambda r: r.get("training", {}).get("flops"), "sci"),
    ("GPU-hours", lambda r: r.get("training", {}).get("gpu_hours"), "float"),
]


def side_by_side_table(columns: list[tuple[str, dict[str, Any] | None]]) -> tuple[list[str], list[list[Any]]]:
    """Header ``["quantity", title1, title2, ...]`` and one row per :data:`SIDE_ROWS` entry with each
    budget's raw value (None where a budget has no report or no such figure)."""
    header = ["quantity"] + [title for title, _ in columns]
    rows = []
    for label, get, _kind in SIDE_ROWS:
        row: list[Any] = [label]
        for _title, rep in columns:
            try:
                row.append(None if rep is None else get(rep))
            except (KeyError, TypeError):
                row.append(None)
        rows.append(row)
    return header, rows


def side_kind(label: str) -> str:
    for lab, _get, kind in SIDE_ROWS:
        if lab == label:
            return kind
    return "text"


def display(value: Any, kind: str = "int") -> str:
    """How the tab shows a value of ``kind``."""
    if value is None:
        return "–"
    if kind == "text":
        return str(value)
    if kind == "bytes":
        return budget.human_bytes(value)
    if kind == "flops":
        return budget.human_flops(value)
    if kind == "percent":
        return f"{value:.1%}"
    if kind == "times":
        return f"{value:g}×"
    if kind == "sci":
        return f"{value:.3g}"
    if kind == "float":
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def differs(values: list[Any]) -> list[bool]:
    """For each value: whether it differs from the first column's (the first is never marked)."""
    if not values:
        return []
    first = values[0]
    out = [False]
    for v in values[1:]:
        if isinstance(v, float) and isinstance(first, (int, float)) and first is not None:
            out.append(not math.isclose(v, first, rel_tol=1e-12))
        else:
            out.append(v != first)
    return out


__all__ = ["SIDE_ROWS", "differs", "display", "side_by_side_table", "side_kind"]
