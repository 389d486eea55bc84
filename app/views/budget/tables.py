"""The Budget tab's numbers as tables: one budget, budgets side by side, and their CSV/Markdown export.

Pure Python (no Qt): the tab draws these rows and the export writes them. Every value comes from
:func:`model.budget.report`; nothing is computed here beyond picking and labelling.

CSV keeps the exact numbers (integers as integers, floats with every digit); Markdown shows what
the table shows (integers with thousands separators) and :func:`from_markdown` reads it back.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from model import budget
from model.config import GPTConfig

#: Header of :func:`budget_table`.
BUDGET_HEADER = ["section", "quantity", "formula", "value", "unit"]

_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_quantity(text: str) -> float:
    """``"2T"`` → 2e12, ``"300B"`` → 3e11, ``"1.5e12"``, ``"15,000,000"``; ``ValueError`` otherwise."""
    s = str(text).strip().replace(",", "").replace("_", "").replace(" ", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)([kKmMbBgGtTpP]?)", s)
    if not m:
        raise ValueError(f"{text!r} is not a number of tokens (write e.g. 2T, 300B, 1.5e12)")
    value = float(m.group(1)) * (_SUFFIXES[m.group(2).lower()] if m.group(2) else 1.0)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} must be a positive number of tokens")
    return value


@dataclass
class BudgetSettings:
    """What the budget is computed at, besides the config (see :func:`model.budget.report`).

    ``seq_len`` None → the config's context length. ``tokens`` None → no training cost.
    ``peak_tflops`` is per device, dense 16-bit.
    """

    seq_len: int | None = None
    batch: int = 1
    kv_bytes: float = 2.0
    precision: str = "bf16-mixed"
    recompute: bool = False
    causal_halving: bool = False
    tokens: float | None = 2e12
    peak_tflops: float | None = 312.0
    mfu: float = 0.4
    gpus: int = 1
    cost_basis: str = "6N"
    extra: dict[str, Any] = field(default_factory=dict)

    def seq_len_for(self, cfg: GPTConfig) -> int:
        return cfg.context_length if self.seq_len is None else self.seq_len

    def kwargs(self, cfg: GPTConfig) -> dict[str, Any]:
        return dict(
            seq_len=self.seq_len_for(cfg),
            batch=self.batch,
            bytes_per_value=self.kv_bytes,
            tokens=self.tokens,
            peak_flops=None if self.peak_tflops is None else self.peak_tflops * 1e12,
            mfu=self.mfu,
            gpus=self.gpus,
            precision=self.precision,
            recompute=self.recompute,
            causal_halving=self.causal_halving,
            cost_basis=self.cost_basis,
        )

    def problems(self, cfg: GPTConfig) -> list[str]:
        kw = self.kwargs(cfg)
        return budget.problems(
            cfg,
            seq_len=kw["seq_len"],
            batch=kw["batch"],
            bytes_per_value=kw["bytes_per_value"],
            tokens=kw["tokens"],
            peak_flops=kw["peak_flops"],
            mfu=kw["mfu"],
            gpus=kw["gpus"],
            precision=kw["precision"],
            cost_basis=kw["cost_basis"],
        )

    def report(self, cfg: GPTConfig, title: str | None = None) -> dict[str, Any]:
        """:func:`model.budget.report` at these settings (raises ConfigError listing problems)."""
        return budget.report(cfg, title=title, **self.kwargs(cfg))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extra", None)
        return d


# ---------------------------------------------------------------------------------------------
# one budget
# ---------------------------------------------------------------------------------------------
def budget_table(rep: dict[str, Any]) -> list[list[Any]]:
    """Every figure of one report as rows ``[section, quantity, formula, value, unit]`` (see
    :data:`BUDGET_HEADER`); values are exact numbers."""
    rows: list[list[Any]] = []
    p = rep["params"]
    for r in p["rows"]:
        rows.append(["parameters", r["name"], r["formula"], r["count"], "parameters"])
    for r in p["summary"]:
        rows.append(["parameters", r["name"], r["formula"], r["count"], "parameters"])
    f = rep["flops"]
    T = f["seq_len"]
    half = "/2" if f["causal_halving"] else ""
    rows += [
        ["FLOPs per token", "forward, weights", "2·N_mm", f["forward_per_token"], f"FLOP (T={T})"],
        [
            "FLOPs per token",
            "forward, attention scores",
            f"4·L·T·h·d_k{half}",
            f["attention_forward_per_token"],
            f"FLOP (T={T})",
        ],
        [
            "FLOPs per token",
            "forward, total",
            "2·N_mm + scores",
            f["forward_total_per_token"],
            f"FLOP (T={T})",
        ],
        ["FLOPs per token", "training, weights", "6·N_mm", f["train_per_token"], "FLOP"],
        [
            "FLOPs per token",
            "training, total",
            "3·forward total",
            f["train_total_per_token"],
            f"FLOP (T={T})",
        ],
        ["FLOPs per token", "textbook forward", "2·N", f["forward_2n"], "FLOP"],
        ["FLOPs per token", "textbook training", "6·N", f["train_6n"], "FLOP"],
    ]
    for k, v in f["shares"].items():
        rows.append(["FLOPs per token", f"share: {k}", "", v, f"fraction of forward (T={T})"])
    rows.append(
        [
            "FLOPs per token",
            "attention overtakes MLP at",
            "T* = mlp weights / (2·h·d_k)",
            f["attention_crossover_seq_len"],
            "tokens of context",
        ]
    )
    kv = rep["kv_cache"]
    where = f"T={kv['seq_len']}, B={kv['batch']}, {kv['bytes_per_value']:g} B/value"
    rows += [
        ["KV cache", "per token", "2·L·h_kv·d_k·bytes", kv["per_token_bytes"], "bytes"],
        ["KV cache", "total", "2·L·h_kv·d_k·T·B·bytes", kv["bytes"], f"bytes ({where})"],
        ["KV cache", "with MHA (h_kv = h)", "2·L·h·d_k·T·B·bytes", kv["mha_bytes"], f"bytes ({where})"],
        ["KV cache", "saving factor", "h / h_kv", kv["saving_factor"], "×"],
    ]
    m = rep["memory"]
    tr, inf = m["training"], m["inference"]
    per = m["bytes_per_param"]
    sec = f"memory ({m['precision']})"
    for key, label, bkey in (
        ("weights", "weights", "weights"),
        ("gradients", "gradients", "gradients"),
        ("master_weights", "master weights", "master weights"),
        ("optimizer", "AdamW m, v", "AdamW m, v"),
    ):
        if tr[key]:
            rows.append([sec, f"training: {label}", f"N·{per.get(bkey, 0)} bytes", tr[key], "bytes"])
    act = f"T={m['seq_len']}, B={m['batch']}"
    rows += [
        [sec, "training: activations, no recompute", "", tr["activations_no_recompute"], f"bytes ({act})"],
        [sec, "training: activations, full recompute", "", tr["activations_recompute"], f"bytes ({act})"],
        [sec, "training: total", "states + activations", tr["total"], "bytes"],
        [sec, "inference: weights", "", inf["weights"], "bytes"],
        [sec, "inference: KV cache", "", inf["kv_cache"], f"bytes ({act})"],
        [sec, "inference: total", "", inf["total"], "bytes"],
    ]
    if "training" in rep:
        t = rep["training"]
        basis = "6·N·D" if t["basis"] == "6N" else "3·(2·N_mm + scores)·D"
        rows += [
            ["training cost", "tokens", "D", t["tokens"], "tokens"],
            ["training cost", "compute", basis, t["flops"], "FLOP"],
        ]
        if t.get("gpu_hours") is not None:
            g = t["gpus"]
            rows += [
                ["training cost", "peak per device", "", t["peak_flops"], "FLOP/s"],
                ["training cost", "utilisation (MFU)", "", t["mfu"], "fraction"],
                ["training cost", "GPU-hours", "FLOPs / (peak·MFU) / 3600", t["gpu_hours"], "GPU-hours"],
                ["training cost", f"wall-clock on {g} device{'s' if g != 1 else ''}", "", t["days"], "days"],
            ]
    return rows


# ---------------------------------------------------------------------------------------------
# budgets side by side
# ---------------------------------------------------------------------------------------------
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
    ("parameters, total", lambda r: r["params"]["total"], "int"),
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


# ---------------------------------------------------------------------------------------------
# CSV and Markdown
# ---------------------------------------------------------------------------------------------
def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def to_csv(header: list[str], rows: list[list[Any]]) -> str:
    """RFC 4180 CSV with exact numbers (floats with every digit, integers in full, None empty)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([_csv_cell(v) for v in r])
    return buf.getvalue()


def from_csv(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of strings, as :func:`to_csv` wrote them."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return [], []
    return rows[0], rows[1:]


def markdown_cell(v: Any) -> str:
    """A value as the Markdown table writes it: integers with thousands separators, floats to 6
    significant digits, ``|`` escaped."""
    if v is None:
        s = ""
    elif isinstance(v, bool):
        s = str(v).lower()
    elif isinstance(v, int):
        s = f"{v:,}"
    elif isinstance(v, float):
        s = f"{v:,.0f}" if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"
    else:
        s = str(v)
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured Markdown table (numbers right-aligned)."""
    numeric = [
        all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)
        and any(r[i] is not None for r in rows)
        for i in range(len(header))
    ]
    lines = ["| " + " | ".join(markdown_cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    for r in rows:
        lines.append("| " + " | ".join(markdown_cell(v) for v in r) + " |")
    return "\n".join(lines) + "\n"


def from_markdown(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of cell strings of the first Markdown table in ``text``."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("|")]
    if len(lines) < 2:
        return [], []

    def cells(line: str) -> list[str]:
        parts = re.split(r"(?<!\\)\|", line.strip()[1:-1])
        return [p.strip().replace("\\|", "|") for p in parts]

    return cells(lines[0]), [cells(ln) for ln in lines[2:]]


def number(cell: str) -> float | int | None:
    """A Markdown/CSV cell back to a number (thousands separators allowed); None when it is not one."""
    s = cell.replace(",", "").strip()
    if not s:
        return None
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return None


__all__ = [
    "BUDGET_HEADER",
    "SIDE_ROWS",
    "BudgetSettings",
    "budget_table",
    "differs",
    "display",
    "from_csv",
    "from_markdown",
    "markdown_cell",
    "number",
    "parse_quantity",
    "side_by_side_table",
    "side_kind",
    "to_csv",
    "to_markdown",
]
