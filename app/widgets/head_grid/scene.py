"""The widgets one head grid is made of: :class:`GridScene`.

The pyqtgraph view: a title row over the heads (wrapped to the widget's width), the plot (row names on
the left, column and K/V-group names on top, :class:`~app.widgets.head_grid.axis.GroupAxis`) holding
the one image of every head (:class:`~app.widgets.screen_image.SmoothImage`) and the placeholder text
of an empty grid, the colour bar beside it, and a spare column that takes the width the heads do not
need, so the colour bar stays beside them. Beside the view the rows' scroll bar
(:class:`~app.widgets.head_grid.scroll.RowScroll`), under it the readout line.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QGraphicsWidget, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.head_grid.axis import GroupAxis
from app.widgets.head_grid.scroll import Content, RowScroll
from app.widgets.legend import ColorLegend
from app.widgets.matrix_view import TopLeftFit, matrix_axes
from app.widgets.palette import matrix_lut
from app.widgets.screen_image import SmoothImage
from app.widgets.titles import WrapLabel


class GridScene:
    """The widgets of one grid, laid out in ``host`` (see the module docstring), coloured by ``cmap``
    at ``gamma``; ``interactive``: the mouse zooms and pans; ``content``: what the scroll bar moves
    through."""

    def __init__(
        self,
        host: QWidget,
        content: Callable[[], Content | None],
        *,
        cmap: str,
        gamma: float,
        interactive: bool,
    ):
        outer = QVBoxLayout(host)
        outer.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        layout = self.view.ci.layout
        # the title: a row of its own over the heads and the colour bar, wrapped to the widget's width
        self.title_label = WrapLabel("", justify="left", color="#222", size="10pt")
        self.title_label.setVisible(False)
        self.view.addItem(self.title_label, row=0, col=0, colspan=3)
        layout.setRowFixedHeight(0, 0)
        self.title_label.set_on_height(lambda h: layout.setRowFixedHeight(0, h))
        self.top_axis = GroupAxis("top")
        self.plot: pg.PlotItem = self.view.addPlot(row=1, col=0, axisItems={"top": self.top_axis})
        p = matrix_axes(self.plot)
        for name in ("left", "top"):
            ax = p.getAxis(name)
            ax.setStyle(tickLength=0, autoReduceTextSpace=False)  # no shrinking while empty
            ax.setPen(pg.mkPen(None))
            ax.setTextPen(pg.mkPen("#333"))
            ax.enableAutoSIPrefix(False)  # names, not numbers: no label rewritten on every pan
        self.vb: pg.ViewBox = p.getViewBox()
        self.vb.setAspectLocked(True)
        self.vb.setDefaultPadding(0.0)
        self.vb.setMouseEnabled(interactive, interactive)
        self.fitter = TopLeftFit(self.vb)
        self.image = SmoothImage(axisOrder="row-major")
        self.image.setLookupTable(matrix_lut(cmap, gamma))
        p.addItem(self.image)
        self.legend = ColorLegend(cmap, "weight", width=10, gamma=gamma)
        self.view.addItem(self.legend, row=1, col=1)
        spare = QGraphicsWidget()  # takes the width the heads do not need: the legend stays beside them
        spare.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        spare.setPreferredWidth(0)
        self.view.addItem(spare, row=1, col=2)
        layout.setColumnStretchFactor(0, 1000)  # the spare gets only what the plot cannot take
        layout.setColumnStretchFactor(2, 1)
        self.placeholder = pg.TextItem("", color="#888", anchor=(0.5, 0.5))
        p.addItem(self.placeholder, ignoreBounds=True)
        self.scroll = RowScroll(self.vb, self.view, content)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(self.view, 1)
        row.addWidget(self.scroll.bar)
        outer.addLayout(row, 1)
        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # token texts such as <|im_start|>
        self.readout.setObjectName("mosaicReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        outer.addWidget(self.readout)

    def set_title(self, text: str) -> None:
        """The line over the heads (wrapped when the widget is narrow; "" for none)."""
        shown = bool(text and text.strip())
        self.title_label.setVisible(shown)
        self.title_label.setText(text if shown else " ")
        if not shown:
            self.view.ci.layout.setRowFixedHeight(0, 0)

    @property
    def title(self) -> str:
        return self.title_label.text if self.title_label.isVisible() else ""

    def clear(self, message: str) -> None:
        """Show ``message`` alone, in a unit view with no K/V groups on top and no readout."""
        self.placeholder.setText(message)
        self.placeholder.setPos(0.5, 0.5)
        self.fitter.size = None
        self.top_axis.set_groups([])
        self.vb.setRange(QRectF(0, 0, 1, 1), padding=0.0)
        self.scroll.sync()
        self.readout.setText(" ")


__all__ = ["GridScene"]
