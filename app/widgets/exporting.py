"""PNG and SVG of any widget: what File → Export and every tab's own export buttons write.

SVG: ``QWidget.render`` into a ``QSvgGenerator`` gives vector axes, lines and text with heatmap images
embedded. (pyqtgraph's ``SVGExporter`` is not used: with Qt 6.11 it fails on scenes holding images.)
:func:`write_svg_group` draws several widgets into one file, each where it is on screen.

Every file is drawn in memory first, then written by :func:`model.atomic.write_atomic`: a full disk,
a file-size limit or a read-only folder is one line (:class:`model.atomic.WriteError`) and the file
that was there before stays whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QPoint, QRect, QRectF
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsView, QWidget

from model.atomic import write_atomic


def png_bytes(widget: QWidget) -> bytes:
    """The widget as on screen, encoded as PNG in memory."""
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not widget.grab().save(buf, "PNG"):
        raise ValueError(f"cannot encode {widget.objectName() or type(widget).__name__} as PNG")
    return bytes(buf.data().data())


def write_png(widget: QWidget, path: str | Path) -> Path:
    """The widget as on screen, as a PNG at ``path`` (written whole or not at all)."""
    return write_atomic(path, png_bytes(widget))


def _svg_bytes(width: int, height: int, description: str, draw: Callable[[QPainter], None]) -> bytes:
    """An SVG drawing ``width`` × ``height`` that ``draw(painter)`` paints, encoded in memory."""
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()  # held until painter.end(): the painter does not keep its device alive
    gen.setOutputDevice(buf)
    gen.setSize(QRect(0, 0, width, height).size())
    gen.setViewBox(QRectF(0, 0, width, height))
    gen.setTitle("Attention Lab")
    gen.setDescription(description)
    painter = QPainter(gen)
    try:
        draw(painter)
    finally:
        painter.end()
    data = bytes(buf.data().data())
    if not data:
        raise ValueError(f"cannot draw {description} as SVG")
    return data


def _render(widget: QWidget, painter: QPainter, at: QPoint) -> None:
    if isinstance(widget, QGraphicsView):  # the view's own overload: the scene as shown, at ``at``
        widget.render(
            painter, QRectF(at.x(), at.y(), widget.width(), widget.height()), widget.viewport().rect()
        )
    else:
        widget.render(painter, at)  # PySide6 6.11 needs the offset with a painter


def write_svg(widget: QWidget, path: str | Path) -> Path:
    """The widget as an SVG drawing: ``QWidget.render`` into a ``QSvgGenerator``.

    Axes, lines, bars and text become SVG vectors; heatmap images are embedded as bitmaps. (pyqtgraph's
    own ``SVGExporter`` is not used: with Qt 6.11 it fails to parse the path data Qt writes.)
    """

    def draw(painter: QPainter) -> None:
        if isinstance(widget, QGraphicsView):
            widget.render(painter)  # the view's own overload: the scene as shown
        else:
            widget.render(painter, QPoint())  # PySide6 6.11 needs the offset with a painter

    name = widget.objectName() or type(widget).__name__
    return write_atomic(path, _svg_bytes(widget.width(), widget.height(), name, draw))


def write_svg_group(owner: QWidget, widgets: list[QWidget], path: str | Path) -> Path:
    """``widgets`` (inside ``owner``, e.g. a tab's export targets) as one SVG drawing at ``path``.

    Each is drawn where it is on screen relative to the others (the drawing is their bounding box);
    one that is not on screen inside ``owner`` goes below them, left-aligned.
    """
    placed: list[tuple[QWidget, QRect]] = []
    loose: list[QWidget] = []
    for w in widgets:
        if owner.isAncestorOf(w) and w.isVisibleTo(owner) and w.width() > 0 and w.height() > 0:
            placed.append((w, QRect(w.mapTo(owner, QPoint(0, 0)), w.size())))
        else:
            loose.append(w)
    box = QRect()
    for _, r in placed:
        box = box.united(r)
    y = box.bottom() + 1 if placed else 0
    for w in loose:  # stacked below what is on screen
        r = QRect(box.left() if placed else 0, y, max(1, w.width()), max(1, w.height()))
        placed.append((w, r))
        box = box.united(r)
        y = r.bottom() + 1

    def draw(painter: QPainter) -> None:
        for w, r in placed:
            _render(w, painter, r.topLeft() - box.topLeft())

    drawing = _svg_bytes(max(1, box.width()), max(1, box.height()), owner.objectName() or "view", draw)
    return write_atomic(path, drawing)
