"""The budget tables as CSV and Markdown, and read back.

CSV keeps the exact numbers (integers as integers, floats with every digit); Markdown shows what
the table shows (integers with thousands separators) and :func:`from_markdown` reads it back.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any


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
    lines += ["| " + " | ".join(markdown_cell(v) for v in r) + " |" for r in rows]
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


__all__ = ["from_csv", "from_markdown", "markdown_cell", "number", "to_csv", "to_markdown"]
