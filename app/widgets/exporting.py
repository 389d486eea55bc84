"""PNG and SVG of any widget: what File → Export and every tab's own export buttons write.

SVG: ``QWidget.render`` into a ``QSvgGenerator`` gives vector axes, lines and text with heatmap images
embedded. (pyqtgraph's ``SVGExporter`` is not used: with Qt 6.11 it fails on scenes holding images.)
:func:`write_svg_group` draws several widgets into one file, each where it is on screen.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QRectF
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsView, QWidget


def write_png(widget: QWidget, path: str | Path) -> Path:
    """The widget as on screen, as a PNG."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not widget.grab().save(str(path), "PNG"):
        raise OSError(f"could not write {path}")
    return path


def _svg_painter(path: Path, width: int, height: int, description: str):
    """A ``QSvgGenerator`` writing ``path`` and a painter on it. The painter does not keep its device
    alive: the caller holds the generator (``_gen``) until ``painter.end()``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    gen = QSvgGenerator()
    gen.setFileName(str(path))
    gen.setSize(QRect(0, 0, width, height).size())
    gen.setViewBox(QRectF(0, 0, width, height))
    gen.setTitle("Attention Lab")
    gen.setDescription(description)
    return gen, QPainter(gen)


def _render(widget: QWidget, painter: QPainter, at: QPoint) -> None:
    if isinstance(widget, QGraphicsView):  # the view's own overload: the scene as shown, at ``at``
        widget.render(
            painter, QRectF(at.x(), at.y(), widget.width(), widget.height()), widget.viewport().rect()
        )
    else:
        widget.render(painter, at)  # PySide6 6.11 needs the offset with a painter


def _check_written(path: Path) -> Path:
    if not path.exists() or path.stat().st_size == 0:
        raise OSError(f"could not write {path}")
    return path


def write_svg(widget: QWidget, path: str | Path) -> Path:
    """The widget as an SVG drawing: ``QWidget.render`` into a ``QSvgGenerator``.

    Axes, lines, bars and text become SVG vectors; heatmap images are embedded as bitmaps. (pyqtgraph's
    own ``SVGExporter`` is not used: with Qt 6.11 it fails to parse the path data Qt writes.)
    """
    path = Path(path)
    _gen, painter = _svg_painter(
        path, widget.width(), widget.height(), widget.objectName() or type(widget).__name__
    )
    try:
        if isinstance(widget, QGraphicsView):
            widget.render(painter)  # the view's own overload: the scene as shown
        else:
            widget.render(painter, QPoint())  # PySide6 6.11 needs the offset with a painter
    finally:
        painter.end()
    return _check_written(path)


def write_svg_group(owner: QWidget, widgets: list[QWidget], path: str | Path) -> Path:
    """``widgets`` (inside ``owner``, e.g. a tab's export targets) as one SVG drawing at ``path``.

    Each is drawn where it is on screen relative to the others (the drawing is their bounding box);
    one that is not on screen inside ``owner`` goes below them, left-aligned.
    """
    path = Path(path)
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
    _gen, painter = _svg_painter(
        path, max(1, box.width()), max(1, box.height()), owner.objectName() or "view"
    )
    try:
        for w, r in placed:
            _render(w, painter, r.topLeft() - box.topLeft())
    finally:
        painter.end()
    return _check_written(path)
