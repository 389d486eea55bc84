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


def test_flow_layout_wraps_controls_and_keeps_a_label_with_its_control(qtbot):
    from PySide6.QtWidgets import QSpinBox

    from app.widgets.layouts import FlowLayout, labelled

    page = QWidget()
    qtbot.addWidget(page)
    row = FlowLayout(page)
    spins = [labelled(row, f"value {i}", QSpinBox()) for i in range(8)]
    row.addStretch(1)  # accepted like QHBoxLayout's, and changes nothing
    assert row.count() == 8
    pairs = [s.parentWidget() for s in spins]
    widest = max(p.sizeHint().width() for p in pairs)
    one_line = row.sizeHint()
    assert one_line.width() >= sum(p.sizeHint().width() for p in pairs)
    assert row.minimumSize().width() == widest  # the widest pair, not the whole line, is the minimum
    # wide: one line; narrow: one pair per line, each label still beside its control
    assert row.heightForWidth(one_line.width()) == one_line.height()
    tall = row.heightForWidth(widest)
    assert tall >= 8 * max(p.sizeHint().height() for p in pairs)
    page.resize(widest, tall)
    page.show()
    qtbot.waitUntil(lambda: pairs[-1].y() > pairs[0].y())
    assert len({p.y() for p in pairs}) == 8 and all(p.x() == 0 for p in pairs)
    label = pairs[3].layout().itemAt(0).widget()
    assert label.text() == "value 3" and label.parentWidget() is spins[3].parentWidget()


def test_every_labs_page_fits_a_1280_by_760_window_beside_the_docks(window_of_one_tab):
    from app.views.labs.tab import page_classes

    win, tab, scroll = window_of_one_tab("labs", "app.views.labs.tab:LabsTab")
    assert any(d.isVisible() for d in win.docks.values())  # the Labs tab keeps the setup docks
    for cls in page_classes():
        tab.show_page(cls.slug)
        assert tab.minimumSizeHint().width() <= scroll.contentsRect().width(), cls.__name__
