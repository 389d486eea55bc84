"""The controls the lab pages share: integer and float spin boxes, a labelled control that keeps its
own type, and the style of the labs' still matrices."""

from __future__ import annotations

from typing import TypedDict, TypeVar

from PySide6.QtWidgets import QDoubleSpinBox, QLayout, QSpinBox, QWidget

from app.widgets import layouts

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


__all__ = ["MatrixStyle", "dspin", "labelled", "spin", "still_matrix"]
