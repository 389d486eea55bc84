"""What a person sees cut or overlapping in a window's plots, found from the scene (tests' helper).

:func:`text_problems` looks at every visible pyqtgraph view under a widget and reports, one line each:
an axis's tick text outside the axis's own box or outside the visible view (cut), a title's text
wider than its box or outside the view, a guide line's label (a marked step, a reference level) out of
its plot's box, and two texts (titles, axis labels, legend entries, guide labels) on top of each other.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter

SLACK = 1.5  # px: anti-aliasing and rounding


def _inside(inner: QRectF, outer: QRectF, slack: float = SLACK) -> bool:
    return outer.adjusted(-slack, -slack, slack, slack).contains(inner)


def _own_rect(item) -> QRectF:
    """An item's layout box in scene coordinates (not its bounding rect, which may overhang)."""
    return item.mapRectToScene(QRectF(0, 0, item.size().width(), item.size().height()))


def axis_texts(axis: pg.AxisItem) -> list[tuple[str, QRectF]]:
    """(text, scene rect) of each tick label ``axis`` paints now."""
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    if specs is None:
        return []
    return [(text, axis.mapRectToScene(rect)) for rect, _flags, text in specs[2] if text]


def _name(item) -> str:
    return f"{type(item).__name__}({getattr(item, 'orientation', '')})"


def view_problems(view: pg.GraphicsView, where: str = "") -> list[str]:
    """The problems of one view (see the module doc)."""
    if not view.isVisible() or view.width() < 2:
        return []
    out: list[str] = []
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    texts: list[tuple[str, QRectF]] = []
    for item in view.scene().items():
        if not item.isVisible() or (item.parentItem() is not None and not item.parentItem().isVisible()):
            continue
        if isinstance(item, pg.AxisItem) and item.style["showValues"]:
            box = _own_rect(item)
            if box.width() < 1 or box.height() < 1:
                continue
            across = item.orientation in ("left", "right")
            for text, rect in axis_texts(item):
                # across the axis a label must stay in the axis's box; along it the end labels may
                # overhang (pyqtgraph centres them on the ends), but not out of the view
                along = (
                    QRectF(box.left(), rect.top(), box.width(), rect.height())
                    if across
                    else QRectF(rect.left(), box.top(), rect.width(), box.height())
                )
                if not _inside(rect, along):
                    out.append(f"{where}{_name(item)} tick {text!r} runs out of its axis")
                elif not _inside(rect, shown):
                    out.append(f"{where}{_name(item)} tick {text!r} cut at the view's edge")
                texts.append((f"tick {text!r}", rect))
            if item.label.isVisible() and item.labelText:  # less the text item's 4 px margins
                title = item.label.sceneBoundingRect().adjusted(4, 4, -4, -4)
                texts.append((f"axis title {item.labelText!r}", title))
        elif isinstance(item, pg.InfLineLabel) and item.toPlainText().strip():
            text = item.sceneBoundingRect()
            name = item.toPlainText()[:40]
            box = item.line.getViewBox()
            if box is not None and not _inside(text, box.sceneBoundingRect(), slack=4):
                out.append(f"{where}guide label {name!r} runs out of its plot")
            texts.append((f"guide label {name!r}", text.adjusted(2, 2, -2, -2)))
        elif isinstance(item, pg.LabelItem) and item.text.strip():
            text = item.item.sceneBoundingRect()
            if text.width() < 1:
                continue
            name = item.item.toPlainText()[:40]
            if not _inside(text, shown):
                out.append(f"{where}title {name!r} cut at the view's edge")
            elif text.width() > _own_rect(item).width() + 8 + SLACK:  # the text item's 4 px margins
                out.append(f"{where}title {name!r} wider than its box")
            texts.append((f"title {name!r}", text.adjusted(4, 4, -4, -4)))
    for i, (a, ra) in enumerate(texts):
        for b, rb in texts[i + 1 :]:
            if (
                ra.intersects(rb)
                and ra.intersected(rb).width() > SLACK
                and ra.intersected(rb).height() > SLACK
            ):
                out.append(f"{where}{a} overlaps {b}")
    return out


def text_problems(widget, where: str = "") -> list[str]:
    """The problems of every visible pyqtgraph view under ``widget``."""
    views = [widget] if isinstance(widget, pg.GraphicsView) else []
    views += widget.findChildren(pg.GraphicsView)
    out: list[str] = []
    for v in views:
        out += view_problems(v, where)
    return out
