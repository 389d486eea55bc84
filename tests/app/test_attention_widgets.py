"""The Attention tab's widgets on their own: block size, axes, lines, colours, hit-testing, head picker."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6.QtGui import QColor


@pytest.mark.parametrize("T,n", [(128, 16), (256, 144), (1024, 144), (1024, 16), (4096, 1)])
def test_block_size_keeps_the_canvas_bounded_and_is_1_when_it_can(T, n):
    from app.widgets.attention_mosaic import MAX_CANVAS_PIXELS, MAX_CELL, block_size

    b = block_size(T, n)
    S = math.ceil(T / b)
    assert S <= MAX_CELL and n * S * S <= MAX_CANVAS_PIXELS
    if b > 1:  # the smallest block that fits: one less would not
        S1 = math.ceil(T / (b - 1))
        assert S1 > MAX_CELL or n * S1 * S1 > MAX_CANVAS_PIXELS


def test_token_axis_thins_labels_so_they_never_overlap(qtbot):
    from app.widgets.attention_axis import TokenAxis

    ax = TokenAxis("left", offset=0.5)
    ax.set_labels([f"t{i}" for i in range(1000)])
    for lo, hi, size in ((0, 1000, 500), (0, 1000, 20000), (100, 140, 600), (140, 100, 600)):
        ((spacing, values),) = ax.tickValues(lo, hi, size)
        px_per_unit = size / abs(hi - lo)
        assert spacing * px_per_unit >= 13.0  # one label's height fits between two labels
        assert all(min(lo, hi) <= v <= max(lo, hi) and (v - 0.5) % spacing == 0 for v in values)
    # zoomed in, every token is labelled, with its own text
    ((spacing, values),) = ax.tickValues(100, 140, 2000)
    assert spacing == 1 and ax.tickStrings(values[:3], 1, 1) == ["t100", "t101", "t102"]


def test_line_segments_keep_the_strongest_lines_above_the_threshold():
    from app.views.attention.lines import line_segments

    rng = np.random.default_rng(0)
    w = rng.random((50, 50)).astype(np.float32) ** 4
    q, k, v = line_segments(w, 0.1, 200)
    assert len(v) == 200 and (v >= 0.1).all()
    np.testing.assert_array_equal(w[q, k], v)
    assert v.min() >= np.sort(w[w >= 0.1])[-200]  # no weaker line kept over a stronger one
    q, k, v = line_segments(w, 0.5, 10**6)
    assert len(v) == int((w >= 0.5).sum())


def test_mosaic_hit_testing_maps_back_to_exact_tokens_when_pooled(qtbot):
    from app.widgets.attention_mosaic import AttentionMosaic

    m = AttentionMosaic()
    qtbot.addWidget(m)
    m.resize(500, 500)
    m.show()
    T = 30
    w = np.random.default_rng(1).random((2, 2, T, T)).astype(np.float32)
    m.set_data(w, [f"w{i}" for i in range(T)], block=3)
    assert m.block == 3 and m.image.image.shape[0] == 2 * (10 + 1)
    for r, c, q, k in ((0, 0, 0, 0), (1, 1, 29, 2), (0, 1, 14, 13), (1, 0, 3, 28)):
        p = m.vb.mapSceneToView(m.scene_pos_of(r, c, q, k))
        assert m.locate(p.x(), p.y()) == (r, c, q, k)
    assert m.locate(10.5, 3.0) is None  # the gap between two cells


def test_heatmap_draws_hidden_cells_grey_and_clips_instead_of_wrapping(qtbot):
    from app.widgets.attention_heatmap import HIDDEN_COLOR, TokenHeatmap, hidden_lut

    h = TokenHeatmap()
    qtbot.addWidget(h)
    m = np.array([[0.0, -np.inf], [1.5, np.nan]], dtype=np.float32)
    h.set_matrix(m, ["a", "b"], ["a", "b"], levels=(0.0, 1.0))
    h.heat.image.render()
    img = h.heat.image.qimage
    lut = hidden_lut("viridis")
    assert img.pixelColor(1, 0) == QColor(HIDDEN_COLOR) == img.pixelColor(1, 1)  # −∞ and NaN
    assert img.pixelColor(0, 1) == QColor(*lut[253])  # 1.5 clipped to the top colour, not the grey/white
    assert img.pixelColor(0, 0) == QColor(*lut[0])
    h.hover_at(0, 1)
    assert h.readout.text() == "row 0 'a', column 1 'b': −∞ (masked)"


def test_head_picker_reports_one_change_per_action(qtbot):
    from app.views.attention.head_picker import HeadPicker

    p = HeadPicker()
    qtbot.addWidget(p)
    p.set_shape(3, 4)
    changes = []
    p.selectionChanged.connect(lambda: changes.append(p.selected()))
    p.button(1, 2).click()
    p.all_button.click()
    p._toggle_layer(0)  # noqa: SLF001 (what the "L0" button does)
    p.none_button.click()
    assert changes == [
        [(1, 2)],
        [(l, h) for l in range(3) for h in range(4)],
        [(l, h) for l in (1, 2) for h in range(4)],
        [],
    ]
    p.set_selected([(2, 3)])
    p.set_shape(2, 2)  # (2, 3) no longer exists
    assert p.selected() == []
