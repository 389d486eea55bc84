"""One budget table: every figure of a :func:`model.budget.arithmetic.report` as rows, and everything that
renders it as text.

:func:`budget_table` is the only place that turns a report into rows ``(section, quantity, formula,
value, unit)`` with exact values; the text of ``attention-lab budget`` (:func:`render_text`), the CSV
and Markdown exports (:mod:`model.budget.exports`) and the Budget tab's tables all render those rows,
and :func:`display_value` is how every human-readable rendering writes a value. Re-exported here: the
settings a budget is computed at (:class:`BudgetSettings`, from :mod:`model.budget.settings`). Budgets side
by side: :mod:`model.budget.side_by_side`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from model.budget.arithmetic import human_bytes, human_count, human_duration, human_flops
from model.budget.settings import BudgetSettings, parse_quantity

#: The columns of :func:`budget_table` as CSV and Markdown write them (:meth:`Row.cells`).
BUDGET_HEADER = ["section", "quantity", "formula", "value", "unit"]

#: Sections of :func:`budget_table`, in order (memory's title names the precision: "memory (fp32)").
PARAMETERS, FLOPS, KV_CACHE, MEMORY, COST = (
    "parameters",
    "FLOPs per token",
    "KV cache",
    "memory",
    "training cost",
)


# ---------------------------------------------------------------------------------------------
# one budget
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One figure: ``value`` is exact (an int, a float or None), ``unit`` says how to read it (see
    :func:`display_value`). ``per_layer`` (and its formula) is one block's share of a parameter
    count; ``note`` explains the row; ``total`` marks a sum the renderings set in bold."""

    section: str
    quantity: str
    formula: str
    value: Any
    unit: str
    per_layer: int | None = None
    per_layer_formula: str = ""
    note: str = ""
    total: bool = False

    def cells(self) -> list[Any]:
        """The row as :data:`BUDGET_HEADER`'s columns."""
        return [self.section, self.quantity, self.formula, self.value, self.unit]


def budget_table(rep: dict[str, Any]) -> list[Row]:
    """Every figure of one report, section by section (:data:`PARAMETERS`, :data:`FLOPS`,
    :data:`KV_CACHE`, memory, :data:`COST` when the report has a training cost). A ``"preset"``
    entry (``Preset.to_dict()``) adds the authors' reported figures to the cost."""
    p = rep["params"]
    rows: list[Row] = [
        Row(
            PARAMETERS,
            r["name"],
            r["formula"],
            r["count"],
            "parameters",
            per_layer=r["per_layer"],
            per_layer_formula=r.get("per_layer_formula") or "",
            note=_active_note(r),
        )
        for r in p["rows"]
    ]
    rows += [
        Row(PARAMETERS, r["name"], r["formula"], r["count"], "parameters", total=True) for r in p["summary"]
    ]
    rows += _flop_rows(rep["flops"], moe=_is_moe(rep))
    rows += _kv_rows(rep["kv_cache"], rep.get("symbols", {}))
    rows += _memory_rows(rep["memory"])
    if "training" in rep:
        rows += _cost_rows(rep)
    return rows


def _is_moe(rep: dict[str, Any]) -> bool:
    """The report's config has a mixture of experts (a token uses fewer parameters than there are)."""
    return rep["config"].get("n_experts") is not None


def _active_note(r: dict[str, Any]) -> str:
    """What one token uses of a routed component (empty for the others)."""
    active = r.get("active")
    if active is None or active == r["count"] or not r.get("active_formula"):
        return ""
    return f"one token uses {active:,} = {r['active_formula']}"


def _flop_rows(f: dict[str, Any], moe: bool = False) -> list[Row]:
    T = f["seq_len"]
    at = f"FLOP (T={T})"
    half = "/2" if f["causal_halving"] else ""
    scores_f = f.get("scores_formula", "4·L·T·h·d_k")
    windowed = "min(T, W)" in scores_f
    weights = "Q, K, V, O, MLP, output head"
    if moe:
        weights = "attention, dense MLPs, router, the k experts a token goes to, shared experts, output head"
    scores_note = "Q·Kᵀ and A·V"
    if half:
        scores_note += ", halved for the causal mask" + (
            " (a local layer past W: W − W²/2T)" if windowed else ""
        )
    if windowed:
        scores_note += "; a local layer attends to its last W keys"
    N_note = "N = all parameters"
    if moe:
        N_note = f"N = the {f['active_params']:,} parameters a token uses (all: {f['total_params']:,})"
    rows = [
        Row(
            FLOPS,
            "forward, weights",
            "2·N_mm",
            f["forward_per_token"],
            "FLOP",
            note=f"N_mm = {f['matmul_params']:,}: {weights}",
        ),
        Row(
            FLOPS,
            "forward, attention scores",
            f"{scores_f}{half}",
            f["attention_forward_per_token"],
            at,
            note=scores_note,
        ),
        Row(FLOPS, "forward, total", "2·N_mm + scores", f["forward_total_per_token"], at, total=True),
        Row(
            FLOPS,
            "training, weights",
            "6·N_mm",
            f["train_per_token"],
            "FLOP",
            note="3 × forward: the backward pass costs two forwards",
        ),
        Row(FLOPS, "training, total", "3·forward total", f["train_total_per_token"], at, total=True),
        Row(FLOPS, "textbook forward", "2·N", f["forward_2n"], "FLOP", note=N_note),
        Row(FLOPS, "textbook training", "6·N", f["train_6n"], "FLOP"),
    ]
    for k, v in f["shares"].items():
        rows.append(Row(FLOPS, f"share: {k}", "", v, f"fraction of forward (T={T})"))
    T_star = f["attention_crossover_seq_len"]
    rows.append(
        Row(
            FLOPS,
            "attention overtakes MLP at",
            f.get("crossover_formula", "T* = mlp weights / (2·h·d_k)"),
            T_star,
            "tokens of context",
            note="" if T_star is not None else "never: the windows keep the scores below the MLP",
        )
    )
    return rows


def _kv_rows(kv: dict[str, Any], sy: dict[str, int] | None = None) -> list[Row]:
    """The cache of this config, beside MHA's; and per token under each attention kind."""
    sy = sy or {}
    where = f"bytes (T={kv['seq_len']}, B={kv['batch']}, {kv['bytes_per_value']:g} B/value)"
    if kv.get("kind") == "MLA":
        per, mha, saving = "L·(r + d_R)", "L·h·(d_N + d_R + d_v)", "MHA / MLA"
        mha_label = "with MHA (a key and value per head)"
    else:
        per, mha, saving = "2·L·h_kv·d_k", "2·L·h·d_k", "h / h_kv"
        mha_label = "with MHA (h_kv = h)"
    rows = [
        Row(KV_CACHE, "per token", f"{per}·bytes", kv["per_token_bytes"], "bytes"),
        Row(KV_CACHE, "total", f"{per}·T·B·bytes", kv["bytes"], where, total=True),
        Row(KV_CACHE, mha_label, f"{mha}·T·B·bytes", kv["mha_bytes"], where),
        Row(KV_CACHE, "saving factor", saving, kv["saving_factor"], "×"),
    ]
    windowed = kv.get("windowed_bytes")
    if windowed is not None and windowed != kv["bytes"]:
        one = "(r + d_R)" if kv.get("kind") == "MLA" else "2·h_kv·d_k"
        rows.append(
            Row(
                KV_CACHE,
                "total, local layers keep W",
                f"{one}·((L − L_local)·T + L_local·min(T, W))·B·bytes",
                windowed,
                where,
                note="a rolling buffer of the last W tokens in each local layer",
            )
        )
    head = "(d_N + d_R + d_v)" if kv.get("kind") == "MLA" else "2·d_k"
    latent = "r + d_R" if "r" in sy else "4·d_k + d_k/2"  # DeepSeek-V2's choice for a config without one
    kinds = {
        "MHA": (f"L·h·{head}·bytes", "a key and a value per query head"),
        "GQA": (f"L·h_kv·{head}·bytes", f"the config's h_kv = {sy.get('h_kv', '?')} K/V heads"),
        "MQA": (f"L·{head}·bytes", "one K/V head for all"),
        "MLA": (f"L·({latent})·bytes", "the latent and one shared rotary key"),
    }
    for kind, value in (kv.get("per_token_by_kind") or {}).items():
        formula, note = kinds.get(kind, ("", ""))
        this = " (this config)" if kind == kv.get("kind") else ""
        rows.append(Row(KV_CACHE, f"per token with {kind}{this}", formula, value, "bytes", note=note))
    return rows


def _memory_rows(m: dict[str, Any]) -> list[Row]:
    tr, inf = m["training"], m["inference"]
    per = m["bytes_per_param"]
    sec = f"{MEMORY} ({m['precision']})"
    rows = []
    for key, label, bkey in (
        ("weights", "weights", "weights"),
        ("gradients", "gradients", "gradients"),
        ("master_weights", "master weights", "master weights"),
        ("optimizer", "AdamW m, v", "AdamW m, v"),
    ):
        if tr[key]:
            rows.append(Row(sec, f"training: {label}", f"N·{per.get(bkey, 0)} bytes", tr[key], "bytes"))
    act = f"bytes (T={m['seq_len']}, B={m['batch']})"
    rows += [
        Row(sec, "training: activations, no recompute", "", tr["activations_no_recompute"], act),
        Row(sec, "training: activations, full recompute", "", tr["activations_recompute"], act),
        Row(sec, "training: total", "states + activations", tr["total"], "bytes", total=True),
        Row(sec, "inference: weights", "", inf["weights"], "bytes"),
        Row(sec, "inference: KV cache", "", inf["kv_cache"], act),
        Row(sec, "inference: total", "", inf["total"], "bytes", total=True),
    ]
    return rows


def _cost_rows(rep: dict[str, Any]) -> list[Row]:
    t, f = rep["training"], rep["flops"]
    T = f["seq_len"]
    D = t["tokens"]
    six = t["basis"] == "6N"
    N_is = "the parameters a token uses" if _is_moe(rep) else "all parameters"
    by_6n, by_matmul = f"6·N·D, N = {N_is} (Chinchilla's C ≈ 6ND)", f"3·(2·N_mm + scores at T={T:,})·D"
    rows = [
        Row(COST, "tokens", "D", D, "tokens"),
        Row(
            COST,
            "FLOPs per token",
            "6·N" if six else f"3·(2·N_mm + scores at T={T:,})",
            t["flops_per_token"],
            "FLOP",
        ),
        Row(
            COST,
            "compute",
            by_6n if six else by_matmul,
            t["flops"],
            "FLOP",
            total=True,
        ),
        Row(
            COST,
            "compute, 6·N·D" if not six else "compute, matmuls",
            by_matmul if six else by_6n,
            f["train_total_per_token"] * D if six else f["train_6n"] * D,
            "FLOP",
            note="the other way to count (not used for the cost)",
        ),
    ]
    if t.get("gpu_hours") is not None:
        g = t["gpus"]
        rows += [
            Row(COST, "peak per device", "", t["peak_flops"], "FLOP/s"),
            Row(COST, "utilisation (MFU)", "", t["mfu"], "fraction"),
            Row(COST, "per device, achieved", "peak · MFU", t["peak_flops"] * t["mfu"], "FLOP/s"),
            Row(COST, "GPU-hours", "FLOPs / (peak·MFU) / 3600", t["gpu_hours"], "GPU-hours", total=True),
            Row(
                COST,
                f"wall-clock on {g:,} GPU{'s' if g != 1 else ''}",
                "GPU-hours / GPUs",
                t["days"],
                "days",
                total=True,
            ),
            Row(COST, "tokens per second needed", "D / wall-clock", D / t["seconds"], "tokens/s"),
        ]
    pre = rep.get("preset") or {}
    said = f"for {pre.get('title')}"
    where = (
        f"{human_count(pre['training_tokens'])} tokens; {pre.get('source') or ''}".rstrip("; ")
        if pre.get("training_tokens")
        else pre.get("source") or ""
    )
    if pre.get("reported_gpu_hours"):
        unit = f"{pre.get('gpu') or 'GPU'} GPU-hours"
        rows.append(
            Row(
                COST,
                f"reported {said}: GPU-hours",
                "",
                pre["reported_gpu_hours"],
                unit,
                note=where,
                total=True,
            )
        )
    if pre.get("reported_flops"):
        rows.append(Row(COST, f"reported {said}: compute", "", pre["reported_flops"], "FLOP", note=where))
    return rows


def section(rows: list[Row], name: str) -> list[Row]:
    """The rows of one section (``"memory"`` matches every precision's memory section)."""
    return [r for r in rows if r.section == name or r.section.startswith(name + " (")]


#: Units :func:`display_value` writes into the value itself (the others it can append).
_SELF_EXPLAINING = ("parameters", "FLOP", "bytes", "fraction", "×", "days")


def _says_unit(unit: str) -> bool:
    return unit == "tokens" or unit.startswith(_SELF_EXPLAINING)


def display_value(row: Row, with_unit: bool = False) -> str:
    """The value as people read it, by unit: counts with separators, FLOPs and bytes in SI/binary
    units, fractions as percentages, days as a duration; ``with_unit`` appends a unit (such as
    "GPU-hours") that the number does not already say."""
    text = _display(row.value, row.unit)
    if with_unit and row.value is not None and row.unit and not _says_unit(row.unit):
        text += f" {row.unit}"
    return text


def _display(v: Any, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "parameters":
        return f"{v:,}"
    if unit.startswith("FLOP/s"):
        return f"{v / 1e12:.4g} TFLOP/s"
    if unit == "FLOP" and v >= 1e21:
        return f"{v:.3g} FLOP"
    if unit.startswith("FLOP"):
        return human_flops(v)
    if unit.startswith("bytes"):
        return human_bytes(v)
    if unit.startswith("fraction"):
        return f"{v:.1%}"
    if unit == "×":
        return f"{v:g}×"
    if unit == "days":
        return human_duration(v * 86400)
    if unit == "tokens":
        return f"{v:.3g} ({human_count(v)})"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def table_cells(rows: list[Row]) -> list[list[Any]]:
    """The rows as :data:`BUDGET_HEADER`'s columns, for :func:`to_csv` and :func:`to_markdown`."""
    return [r.cells() for r in rows]


def render_text(rep: dict[str, Any]) -> str:
    """The human-readable table of a :func:`model.budget.arithmetic.report`: the rows of :func:`budget_table`,
    section by section, values as :func:`display_value` writes them (a parameter component of zero
    is left out)."""
    cfg, sy, f, kv, m = rep["config"], rep["symbols"], rep["flops"], rep["kv_cache"], rep["memory"]
    headings = {
        FLOPS: f"{FLOPS} at T={f['seq_len']:,}  "
        "(2 per multiply-add; norms, softmax, activations not counted)",
        KV_CACHE: f"{KV_CACHE}  "
        f"(T={kv['seq_len']:,}, B={kv['batch']}, {kv['bytes_per_value']:g} bytes/value)",
        MEMORY: f"{MEMORY}, training in {m['precision']} with AdamW; activations at T={m['seq_len']:,}, "
        f"B={m['batch']}",
        COST: COST,
    }
    lines = [
        rep.get("title") or "custom config",
        "  "
        + " ".join(f"{k}={v:,}" for k, v in sy.items())
        + f"  ({cfg['mlp']}, {cfg['norm']} {cfg['norm_position']}-norm, {cfg['positions']} positions, "
        f"bias {cfg['bias']}, {'tied' if cfg['tie_embeddings'] else 'untied'})",
    ]
    rows = budget_table(rep)
    params = [r for r in rows if r.section == PARAMETERS and r.value]
    w_q = max(len(r.quantity) for r in rows) + 2
    w_f = max(len(r.formula) for r in rows)
    w_n = 15
    lines += ["", f"{PARAMETERS:<{w_q}} {'formula':<{w_f}} {'per layer':>{w_n}} {'total':>{w_n}}"]
    for i, r in enumerate(params):
        if r.total and not params[i - 1].total:
            lines.append("")
        per = f"{r.per_layer:,}" if r.per_layer else ""
        extra = f"  ({human_count(r.value)})" if r.total else ""
        note = f"  {r.note}" if r.note else ""
        lines.append(
            f"  {r.quantity:<{w_q - 2}} {r.formula:<{w_f}} {per:>{w_n}} {r.value:>{w_n},}{extra}{note}"
        )
    others = [r for r in rows if r.section != PARAMETERS]
    w_v = max(len(display_value(r)) for r in others)
    current = None
    for r in others:
        if r.section != current:
            current = r.section
            lines += ["", headings.get(r.section.split(" (")[0], r.section)]
        unit = re.sub(r"\s*\(.*\)$", "", r.unit)
        unit = "" if _says_unit(unit) else unit
        tail = "  ".join(s for s in (unit, r.note) if s)
        lines.append(
            f"  {r.quantity:<{w_q - 2}} {r.formula:<{w_f}} {display_value(r):>{w_v}}  {tail}".rstrip()
        )
    return "\n".join(lines)


__all__ = [
    "BUDGET_HEADER",
    "COST",
    "FLOPS",
    "KV_CACHE",
    "MEMORY",
    "PARAMETERS",
    "BudgetSettings",
    "Row",
    "budget_table",
    "display_value",
    "parse_quantity",
    "render_text",
    "section",
    "table_cells",
]
