"""What the Circuits page (:mod:`app.views.attention.circuits_page`) and its Head and Path patching
tabs (``circuits_head``, ``circuits_path``) share: :class:`CircuitsPart`, the result drawn, its
circuits and the state's key of them, the titles of its matrices, and the redraw of its tabs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QWidget

from app.views.attention.base import AttentionPage
from app.views.attention.state_records import CircuitsKey
from app.widgets.matrix_plot import MatrixPlot

if TYPE_CHECKING:
    from model.interp.analysis.circuits import Circuits
    from model.interp.measures import CircuitsResult


class CircuitsPart(AttentionPage):
    """The base of the Circuits page and of the parts it is made of (see the module docstring)."""

    def __init__(self, state, parent: QWidget | None = None):
        super().__init__(state, parent)
        #: the CircuitsResult drawn (None before or without one)
        self.result: CircuitsResult | None = None
        self._titles: dict[MatrixPlot, str] = {}  # the title each matrix shows

    @property
    def circuits(self) -> Circuits | None:
        """The :class:`~model.interp.analysis.circuits.Circuits` drawn (None before or without them)."""
        return self.result.circuits if self.result is not None else None

    def _key(self) -> CircuitsKey | None:
        """The state's key of the circuits drawn (that of the latest result)."""
        return self.state.circuits[0] if self.state.circuits is not None else None

    def _title(self, plot: MatrixPlot, text: str) -> None:
        """``plot``'s title, set only when it changes (a wrapping title lays itself out again)."""
        if self._titles.get(plot) != text:
            self._titles[plot] = text
            plot.set_title(text)

    def _panels(self, changed: set[int]) -> None:
        """Redraw the tabs (``HEAD_TAB``, ...) among ``changed`` that are in view: the page's own."""
        raise NotImplementedError


__all__ = ["CircuitsPart"]
