"""The controls the lab pages share: integer and float spin boxes, a labelled control that keeps its
own type, and the style of the labs' still matrices."""

from __future__ import annotations

from typing import TypedDict, TypeVar

from PySide6.QtWidgets import QDoubleSpinBox, QLayout, QSpinBox, QWidget

from app.widgets import layouts
from app.widgets.side_by_side import PlotGrid

W = TypeVar("W", bound=QWidget)


def spin(lo: int, hi: int, value: int, tip: str = "") -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setValue(value)
    if tip:
        s.setToolTip(tip)
    return s


def dspin(
    lo: float, hi: float, value: float, step: float, decimals: int = 4, tip: str = ""
) -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setDecimals(decimals)
    s.setRange(lo, hi)
    s.setSingleStep(step)
    s.setValue(value)
    if tip:
        s.setToolTip(tip)
    return s


def labelled(row: QLayout, text: str, widget: W) -> W:
    """:func:`app.widgets.layouts.labelled` (``text`` and ``widget`` as one unit of ``row``), returning
    ``widget`` as the kind of control it is, so a page keeps its spin box a spin box."""
    layouts.labelled(row, text, widget)
    return widget


class MatrixStyle(TypedDict):
    """The options of a :class:`~app.widgets.matrix_plot.MatrixPlot` that shows numbers to read, not
    to explore."""

    square: bool
    interactive: bool
    numbers: bool | None
    legend_label: str


def still_matrix(legend_label: str) -> MatrixStyle:
    """Not square, no hover or click, numbers in the cells when they fit, the colour bar named
    ``legend_label``."""
    return {"square": False, "interactive": False, "numbers": None, "legend_label": legend_label}


def readable_map(legend_label: str) -> MatrixStyle:
    """:func:`still_matrix` with square cells: a map of keys against queries drawn as a square, its
    spare room left empty rather than its cells stretched into bars."""
    return {**still_matrix(legend_label), "square": True}


#: px: the least width of a column of :func:`map_grid` — one column on a 1280 px screen beside the
#: setup docks (a page ~640 px wide), three at 1920 — and the least height of each of its plots: a
#: map drawn at least ~250 px a side with its key ticks, title and readout
MAP_COLUMN = 330
MAP_HEIGHT = 360


def map_grid(widgets: list[QWidget]) -> PlotGrid:
    """``widgets`` (maps and the plots beside them) in as many columns of :data:`MAP_COLUMN` px as
    fit, each at least :data:`MAP_HEIGHT` tall: the page scrolls down rather than shrink a map."""
    for w in widgets:
        w.setMinimumHeight(MAP_HEIGHT)
    return PlotGrid(widgets, min_width=MAP_COLUMN)


__all__ = [
    "MAP_COLUMN",
    "MAP_HEIGHT",
    "MatrixStyle",
    "dspin",
    "labelled",
    "map_grid",
    "readable_map",
    "spin",
    "still_matrix",
]
