"""ReadableProgressBar: a progress bar whose text reads at any fill.

A style draws a progress bar's text over both the filled chunk and the empty groove: Fusion writes
it white on its blue chunk (contrast 3.6) and black on the groove, so a text half way along is split
in two colours, the left half hard to read ("step 12 / 300 ETA 0:41"). This bar lets the style draw
the bar without text, looks at the colours it drew under the text, and writes the text in one colour
that contrasts with both (WCAG ratio ≥ 4.5: black on a light chunk and a white groove), or, when no
colour does (a dark chunk), in the colour that contrasts with each part, part by part.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QProgressBar, QStyle, QStyleOptionProgressBar, QWidget

from app.widgets.palette import contrast_ratio

#: What a text needs against what is behind it (WCAG AA for ordinary text).
MIN_CONTRAST = 4.5
_INKS = ((0, 0, 0), (255, 255, 255))


def _rgb(c: QColor) -> tuple[int, int, int]:
    return (c.red(), c.green(), c.blue())


def best_ink(background: tuple[int, int, int]) -> tuple[int, int, int]:
    """Black or white, whichever contrasts best with ``background``."""
    return max(_INKS, key=lambda ink: contrast_ratio(ink, background))


def ink_for(backgrounds: list[tuple[int, int, int]]) -> tuple[int, int, int] | None:
    """Black or white, whichever contrasts best with every one of ``backgrounds``; None when neither
    reaches :data:`MIN_CONTRAST` on all of them."""
    best = max(_INKS, key=lambda ink: min(contrast_ratio(ink, bg) for bg in backgrounds))
    return best if min(contrast_ratio(best, bg) for bg in backgrounds) >= MIN_CONTRAST else None


class ReadableProgressBar(QProgressBar):
    """A drop-in ``QProgressBar`` (same API) whose text contrasts with the bar wherever it falls.

    ``painted``: the (region, ink, background) the last paint wrote the text with, for tests.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.painted: list[tuple[QRect, tuple[int, int, int], tuple[int, int, int]]] = []

    def _chunk_width(self, contents: QRect) -> int:
        span = self.maximum() - self.minimum()
        if span <= 0:
            return contents.width() if self.value() >= self.maximum() else 0
        frac = min(1.0, max(0.0, (self.value() - self.minimum()) / span))
        return round(contents.width() * frac)

    def paintEvent(self, event) -> None:
        opt = QStyleOptionProgressBar()
        self.initStyleOption(opt)
        text = opt.text if self.isTextVisible() else ""
        opt.textVisible = False
        ratio = self.devicePixelRatioF()
        image = QImage(self.size() * ratio, QImage.Format.Format_ARGB32_Premultiplied)
        image.setDevicePixelRatio(ratio)
        image.fill(self.palette().window().color())
        p = QPainter(image)
        self.style().drawControl(QStyle.ControlElement.CE_ProgressBar, opt, p, self)
        p.end()
        painter = QPainter(self)
        painter.drawImage(0, 0, image)
        self.painted = []
        if not text:
            painter.end()
            return
        contents = self.style().subElementRect(QStyle.SubElement.SE_ProgressBarContents, opt, self)
        fm = painter.fontMetrics()
        # a long status shows as far as it fits, ending in "…" (the whole of it in the tooltip)
        whole, text = text, fm.elidedText(text, Qt.TextElideMode.ElideRight, max(0, contents.width() - 6))
        tip = whole if text != whole else ""
        if self.toolTip() != tip:
            self.setToolTip(tip)
        text_rect = QRect(0, 0, fm.horizontalAdvance(text) + 2, fm.height())
        text_rect.moveCenter(contents.center())
        fill = self._chunk_width(contents)
        rtl = self.layoutDirection() == Qt.LayoutDirection.RightToLeft
        if self.invertedAppearance() != rtl:  # the chunk grows from the right
            chunk = QRect(contents.right() - fill + 1, contents.top(), fill, contents.height())
            groove = QRect(contents.left(), contents.top(), contents.width() - fill, contents.height())
        else:
            chunk = QRect(contents.left(), contents.top(), fill, contents.height())
            groove = QRect(contents.left() + fill, contents.top(), contents.width() - fill, contents.height())
        y = round(contents.center().y() * ratio)
        parts = []
        for part in (chunk, groove):
            under = part.intersected(text_rect)
            if under.width() > 0:
                # the colour the style drew there (sampled away from the part's edge and bevel)
                x = round((under.left() + under.right()) / 2 * ratio)
                parts.append((under, _rgb(image.pixelColor(x, y))))
        ink = ink_for([bg for _, bg in parts])
        painter.setFont(self.font())
        for under, bg in parts:
            part_ink = ink or best_ink(bg)
            painter.save()
            painter.setClipRect(under)
            painter.setPen(QColor(*part_ink))
            painter.drawText(text_rect, int(Qt.AlignmentFlag.AlignCenter), text)
            painter.restore()
            self.painted.append((under, part_ink, bg))
        painter.end()


__all__ = ["MIN_CONTRAST", "ReadableProgressBar", "ink_for"]
