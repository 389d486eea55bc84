"""An image of many more values than screen pixels, drawn so thin lines stay lines: :func:`screen_block`
and :class:`SmoothImage`, shared by the head grid and every matrix plot.

A head of ``T`` tokens shown ``px`` screen pixels wide is max-pooled by ``f = ceil(T / (1.5·px))``
(:func:`~model.interp.pooling.pool_max`: a pixel shows the largest value of its ``f × f`` block) and
the image is scaled down smoothly, so a one-token diagonal or a first-token column stays a line on
screen. A plainly scaled image samples one value in every ``T / px``: at 3,000 tokens in 380 pixels a
previous-token diagonal is never sampled at all and the map looks empty.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QPainter

#: Image pixels per screen pixel a pooled image is drawn with (at most): a smooth scaling by up to
#: this much still gives every image pixel a share of a screen pixel
OVERSAMPLE = 1.5


def screen_block(S: int, px: float) -> int:
    """The pooling that draws ``S`` image pixels ``px`` screen pixels wide with at most
    :data:`OVERSAMPLE` image pixels per screen pixel."""
    return max(1, math.ceil(S / max(OVERSAMPLE * px, 1.0)))


class SmoothImage(pg.ImageItem):
    """An ImageItem that, once ``smooth``, is scaled down smoothly (bilinear) instead of by dropping
    rows and columns: drawn with up to 1.5 image pixels per screen pixel, every image pixel still
    shows. Enlarged, its pixels stay sharp squares."""

    smooth = False

    def paint(self, painter: QPainter, *args: object) -> None:
        if self.smooth:
            t = painter.transform()
            smaller = math.hypot(t.m11(), t.m12()) < 0.999 or math.hypot(t.m21(), t.m22()) < 0.999
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, smaller)
        super().paint(painter, *args)


__all__ = ["OVERSAMPLE", "SmoothImage", "screen_block"]
