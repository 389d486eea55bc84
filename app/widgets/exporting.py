"""PNG and SVG of any widget: what File → Export and every tab's own export buttons write.

SVG: ``QWidget.render`` into a ``QSvgGenerator`` gives vector axes, lines and text with heatmap images
embedded. (pyqtgraph's ``SVGExporter`` is not used: with Qt 6.11 it fails on scenes holding images.)
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRectF
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsView, QWidget


def write_png(widget: QWidget, path: str | Path) -> Path:
    """The widget as on screen, as a PNG."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not widget.grab().save(str(path), "PNG"):
        raise OSError(f"could not write {path}")
    return path


def write_svg(widget: QWidget, path: str | Path) -> Path:
    """The widget as an SVG drawing: ``QWidget.render`` into a ``QSvgGenerator``.

    Axes, lines, bars and text become SVG vectors; heatmap images are embedded as bitmaps. (pyqtgraph's
    own ``SVGExporter`` is not used: with Qt 6.11 it fails to parse the path data Qt writes.)
    """
    from PySide6.QtSvg import QSvgGenerator

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    gen = QSvgGenerator()
    gen.setFileName(str(path))
    gen.setSize(widget.size())
    gen.setViewBox(QRectF(0, 0, widget.width(), widget.height()))
    gen.setTitle("Attention Lab")
    gen.setDescription(widget.objectName() or type(widget).__name__)
    painter = QPainter(gen)
    try:
        if isinstance(widget, QGraphicsView):
            widget.render(painter)  # the view's own overload: the scene as shown
        else:
            widget.render(painter, QPoint())  # PySide6 6.11 needs the offset with a painter
    finally:
        painter.end()
    if not path.exists() or path.stat().st_size == 0:
        raise OSError(f"could not write {path}")
    return path
