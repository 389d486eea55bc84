"""app.widgets.layouts: the vertical-only scroll area the setup panels and the Budget editor share."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QScrollArea, QWidget

from app.widgets.layouts import scrolled, vertical_scroll


def test_vertical_scroll_never_scrolls_sideways(qtbot):
    scroll, layout = vertical_scroll()
    qtbot.addWidget(scroll)
    assert scroll.widgetResizable()
    assert scroll.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff
    assert scroll.frameShape() != QScrollArea.Shape.NoFrame
    assert layout.parentWidget() is scroll.widget()
    _, layout = vertical_scroll(frame=False)
    assert layout.parentWidget().parentWidget().parentWidget().frameShape() == QScrollArea.Shape.NoFrame


def test_scrolled_fills_a_widget(qtbot):
    panel = QWidget()
    qtbot.addWidget(panel)
    layout = scrolled(panel)
    layout.addWidget(QLabel("x"))
    outer = panel.layout()
    assert outer.contentsMargins().left() == 0 and outer.count() == 1
    scroll = outer.itemAt(0).widget()
    assert isinstance(scroll, QScrollArea) and scroll.frameShape() == QScrollArea.Shape.NoFrame
    assert layout.parentWidget() is scroll.widget() and layout.count() == 1
