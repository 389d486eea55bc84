"""What every page of the Attention tab shares: the :class:`Page` protocol and a head selector.

A page builds its widgets on first use (:meth:`Page.ensure_built`) and draws from its tab's state
(``tab.inspection``, ``tab.selected``, ``tab.metrics``, ...) in :meth:`Page.refresh`. The tab calls
``refresh`` on the page in view when something it shows changed,
and only marks the others ``stale``; a stale page refreshes when it comes into view. So a new prompt
costs the drawing of one page, whatever the number of pages.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QToolButton, QVBoxLayout, QWidget


class Page(QWidget):
    """One sub-view of the Attention tab. Subclasses set ``title``/``key`` and implement ``refresh``."""

    #: the page's tab text
    title = ""
    #: short name for file names and screenshots
    key = ""
    #: one sentence under the title, for the user
    blurb = ""
    #: whether the page draws the selected head's pipeline (raw and scaled scores)
    needs_head_detail = False
    #: whether the page needs the aggregates job
    needs_aggregates = False

    def __init__(self, tab):
        super().__init__()
        self.tab = tab
        self.stale = True
        self.built = False

    def ensure_built(self) -> None:
        """Build the page's widgets the first time it is needed (plots are costly to create, and
        most sessions never open most pages)."""
        if not self.built:
            self.built = True
            self.build()

    def build(self) -> None:
        """Create the page's widgets (called once, by :meth:`ensure_built`)."""

    def refresh(self) -> None:
        """Redraw from the tab's current state."""

    def clear(self) -> None:
        """Forget what is drawn (the model went away)."""

    def export_widgets(self) -> dict[str, QWidget]:
        """The widgets worth exporting as images (name → widget); the page itself by default."""
        return {self.key: self}

    # optional notifications (the tab calls them on every page; a page redraws only when shown)
    def on_head_selected(self, layer: int, head: int) -> None:
        pass

    def on_head_detail(self, detail) -> None:
        pass

    def on_metrics(self) -> None:
        pass

    def on_ablation_result(self, result) -> None:
        pass

    def on_aggregates(self, result) -> None:
        pass


class HeadSelector(QWidget):
    """Layer and head spin boxes with ◀ ▶ (previous/next head across layers); ``changed(layer, head)``."""

    changed = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.prev_button = QToolButton()
        self.prev_button.setText("◀")
        self.prev_button.setToolTip("previous head")
        self.next_button = QToolButton()
        self.next_button.setText("▶")
        self.next_button.setToolTip("next head")
        self.layer_spin = QSpinBox()
        self.head_spin = QSpinBox()
        self.layer_spin.setPrefix("layer ")
        self.head_spin.setPrefix("head ")
        for w in (self.prev_button, self.layer_spin, self.head_spin, self.next_button):
            lay.addWidget(w)
        self._quiet = False
        self._shape = (1, 1)
        self.layer_spin.valueChanged.connect(self._emit)
        self.head_spin.valueChanged.connect(self._emit)
        self.prev_button.clicked.connect(lambda: self._step(-1))
        self.next_button.clicked.connect(lambda: self._step(1))

    def set_shape(self, n_layers: int, n_heads: int) -> None:
        self._quiet = True
        try:
            self._shape = (max(1, n_layers), max(1, n_heads))
            self.layer_spin.setRange(0, self._shape[0] - 1)
            self.head_spin.setRange(0, self._shape[1] - 1)
        finally:
            self._quiet = False

    def set_head(self, layer: int, head: int) -> None:
        self._quiet = True
        try:
            self.layer_spin.setValue(layer)
            self.head_spin.setValue(head)
        finally:
            self._quiet = False

    def head(self) -> tuple[int, int]:
        return self.layer_spin.value(), self.head_spin.value()

    def _step(self, d: int) -> None:
        L, H = self._shape
        i = (self.layer_spin.value() * H + self.head_spin.value() + d) % (L * H)
        self.set_head(i // H, i % H)
        self.changed.emit(*self.head())

    def _emit(self, *_):
        if not self._quiet:
            self.changed.emit(*self.head())


def holder(view: QWidget) -> QWidget:
    """A plain widget around ``view``: what a page offers for export (File → Export writes a plain
    widget with ``QSvgGenerator``; pyqtgraph's own SVG exporter fails on Qt 6.11's path data)."""
    w = QWidget()
    lay = QVBoxLayout(w)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.addWidget(view)
    w.view = view
    return w


def blurb_label(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setStyleSheet("color: #444;")
    return lab


__all__ = ["HeadSelector", "Page", "blurb_label", "holder"]
