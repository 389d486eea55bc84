"""Small layout pieces several tabs and panels share."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget


def vertical_scroll(*, frame: bool = True) -> tuple[QScrollArea, QVBoxLayout]:
    """A scroll area that scrolls only up and down (its body always fits its width), and the
    layout of its body: a setup panel or editor column taller than the window."""
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    if not frame:
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    body = QWidget()
    scroll.setWidget(body)
    return scroll, QVBoxLayout(body)


def scrolled(widget: QWidget) -> QVBoxLayout:
    """Fill ``widget`` with a frameless :func:`vertical_scroll`; the layout to add its content to."""
    outer = QVBoxLayout(widget)
    outer.setContentsMargins(0, 0, 0, 0)
    scroll, layout = vertical_scroll(frame=False)
    outer.addWidget(scroll)
    return layout


__all__ = ["scrolled", "vertical_scroll"]
