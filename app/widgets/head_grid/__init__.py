"""The head grid: every attention head of a model as one image (:class:`HeadMosaic`)."""

from app.widgets.head_grid.fit import FIT_PX, MAX_BANDS, SCROLL_PX
from app.widgets.head_grid.geometry import MosaicGeometry, flow_columns
from app.widgets.head_grid.grid import HeadMosaic
from app.widgets.head_grid.pointer import readout_text

__all__ = ["FIT_PX", "MAX_BANDS", "SCROLL_PX", "HeadMosaic", "MosaicGeometry", "flow_columns", "readout_text"]
