"""The Train tab's progress bar: its text reads on the filled and the empty part at any fill."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor

from app.widgets.palette import contrast_ratio

TEXT = "step 12 / 300   ETA 0:41"


def _rgb(image, x, y):
    c = QColor(image.pixel(x, y))
    return (c.red(), c.green(), c.blue())


def glyph_contrast(bar) -> dict[tuple[int, int, int], tuple[float, int]]:
    """{background colour: (the best contrast of the text's pixels on it, how many there are)}: the
    text's pixels are those that differ from the same bar drawn without text; the best one is a
    glyph's core (its edges blend into the background)."""
    bar.setFormat(TEXT)
    with_text = bar.grab().toImage()
    bar.setFormat("")
    without = bar.grab().toImage()
    best: dict[tuple[int, int, int], tuple[float, int]] = {}
    for x in range(with_text.width()):
        for y in range(with_text.height()):
            fg, bg = _rgb(with_text, x, y), _rgb(without, x, y)
            if fg != bg:
                ratio, n = best.get(bg, (0.0, 0))
                best[bg] = (max(ratio, contrast_ratio(fg, bg)), n + 1)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("fill", [0, 10, 45, 55, 90, 100])
def test_the_progress_text_reads_on_both_parts_of_the_bar(qtbot, window_of_one_tab, fill):
    _, tab, _ = window_of_one_tab("train", "app.views.train.tab:TrainTab")
    bar = tab.progress
    qtbot.waitUntil(bar.isVisible, timeout=5000)
    bar.setRange(0, 100)
    bar.setValue(fill)
    best = glyph_contrast(bar)
    assert best  # the text is drawn
    # every background that holds a good part of the text (the chunk's and the groove's colours, not
    # the few pixels of a descender on the chunk's bevel) has a text colour that reads on it
    for bg, (ratio, n) in best.items():
        if n >= 20:
            assert ratio >= 4.5, (fill, bg, ratio)  # Fusion: white on its blue chunk, 3.6


def test_a_status_longer_than_the_bar_ends_in_an_ellipsis_and_says_all_in_its_tooltip(qtbot):
    from app.widgets.progress import ReadableProgressBar

    bar = ReadableProgressBar()
    qtbot.addWidget(bar)
    bar.resize(160, 24)
    bar.setValue(0)
    bar.show()
    long = "pretrained elsewhere: its files keep no training history"
    bar.setFormat(long)
    bar.grab()  # paints
    text_width = max(r.right() for r, _ink, _bg in bar.painted) - min(
        r.left() for r, _ink, _bg in bar.painted
    )
    assert text_width <= bar.width()  # the text's boxes stay inside the bar
    assert bar.toolTip() == long
    bar.setFormat("step 3")
    bar.grab()
    assert bar.toolTip() == ""  # a status that fits needs no tooltip
