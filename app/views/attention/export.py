"""Writing what the Attention tab shows: PNG and SVG of any view, a head's matrix as CSV, the
prompt's tensors as .npz (the format of ``attention-lab inspect``, ``model.export``).

SVG: every widget (plots, tables, whole pages) is drawn by ``QWidget.render`` into a ``QSvgGenerator``:
vector axes, lines and text, heatmap images embedded.
"""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtWidgets import QWidget

from app.widgets.exporting import write_png, write_svg


def _atomic_text(path: Path, write) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_view(widget: QWidget, path: str | Path) -> Path:
    """PNG or SVG by the file's suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        return write_png(widget, path)
    if suffix == ".svg":
        return write_svg(widget, path)
    raise ValueError(f"export as .png or .svg, not {suffix or 'a file without extension'}")


def write_head_csv(
    path: str | Path, matrix: np.ndarray, labels: list[str], *, corner: str = "query \\ key"
) -> Path:
    """One head's [T, T] matrix as CSV: a header row of ``index:token`` key names, then one row per query.

    Labels carry the position (``"3:␣"``) so repeated tokens stay distinct; values are written with 8
    significant digits.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape != (len(labels), len(labels)):
        raise ValueError(f"a head matrix of shape {m.shape} does not fit {len(labels)} token labels")
    names = [f"{i}:{lab}" for i, lab in enumerate(labels)]

    def write(fh):
        w = csv.writer(fh)
        w.writerow([corner, *names])
        for i, row in enumerate(m):
            w.writerow([names[i], *(f"{v:.8g}" for v in row)])

    path = Path(path)
    if path.suffix.lower() != ".csv":
        path = path.with_name(path.name + ".csv")
    return _atomic_text(path, write)


def read_head_csv(path: str | Path) -> tuple[list[str], list[str], np.ndarray]:
    """(query labels, key labels, matrix) back from :func:`write_head_csv`."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    keys = rows[0][1:]
    queries = [r[0] for r in rows[1:]]
    m = np.array([[float(v) for v in r[1:]] for r in rows[1:]], dtype=np.float64)
    return queries, keys, m


def write_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> Path:
    """The inspection .npz (``model.export.save_inspection``: compressed, atomic, no pickles)."""
    from model.export import save_inspection

    return save_inspection(path, arrays)


__all__ = ["read_head_csv", "write_head_csv", "write_npz", "write_png", "write_svg", "write_view"]
