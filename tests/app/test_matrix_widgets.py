"""The shared matrix widgets on their own: MatrixPlot (one matrix) and HeadMosaic (the L×H grid),
their token axes, colours, options, hit-testing, hover texts and click signals."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QColor


def _pixel(image_item, x: int, y: int) -> QColor:
    """The colour an ImageItem paints at image pixel (x = column, y = row)."""
    image_item.render()
    return image_item.qimage.pixelColor(x, y)


def test_token_axis_thins_labels_so_they_never_overlap(qtbot):
    from app.widgets.token_axis import TokenAxis

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


# ---- MatrixPlot --------------------------------------------------------------------------------
def test_matrix_draws_hidden_cells_grey_and_clips_instead_of_wrapping(qtbot):
    from app.widgets.matrix_plot import MatrixPlot
    from app.widgets.palette import HIDDEN_COLOR, matrix_lut

    h = MatrixPlot()
    qtbot.addWidget(h)
    m = np.array([[0.0, -np.inf], [1.5, np.nan]], dtype=np.float32)
    h.set_matrix(m, ["a", "b"], ["a", "b"], levels=(0.0, 1.0))
    lut = matrix_lut("viridis")
    assert _pixel(h.panel.image, 1, 0) == QColor(*HIDDEN_COLOR) == _pixel(h.panel.image, 1, 1)  # −∞, NaN
    assert _pixel(h.panel.image, 0, 1) == QColor(*lut[253])  # 1.5 clipped to the top colour, not grey/white
    assert _pixel(h.panel.image, 0, 0) == QColor(*lut[0])
    h.hover_at(0, 1)
    assert h.readout.text() == "query 0 'a', key 1 'b': −∞ (masked)"


def test_matrix_mask_greys_cells_and_the_readout_says_masked(qtbot):
    from app.widgets.matrix_plot import MatrixPlot
    from app.widgets.palette import HIDDEN_COLOR

    h = MatrixPlot()
    qtbot.addWidget(h)
    m = np.full((3, 3), 0.5, dtype=np.float32)
    mask = np.tril(np.ones((3, 3), bool))
    h.set_matrix(m, list("xyz"), list("xyz"), levels=(0.0, 1.0), mask=mask)
    assert _pixel(h.panel.image, 2, 0) == QColor(*HIDDEN_COLOR)  # query 0 may not see key 2
    assert _pixel(h.panel.image, 0, 2) != QColor(*HIDDEN_COLOR)
    h.hover_at(0, 2)
    assert h.readout.text() == "query 0 'x', key 2 'z': masked"
    h.hover_at(2, 0)
    assert h.readout.text() == "query 2 'z', key 0 'x': 0.5"


def test_matrix_numbers_in_cells_when_small_and_the_legend_makes_room(qtbot):
    from app.widgets.matrix_plot import ANNOTATE_MAX, MatrixPlot

    h = MatrixPlot(numbers=None)  # numbers when the matrix is small
    qtbot.addWidget(h)
    m = np.array([[0.0, -np.inf], [0.25, 1.0]], dtype=np.float32)
    h.set_matrix(m, levels=(0.0, 1.0))
    assert h.cell_texts() == [["0.00", "−∞"], ["0.25", "1.00"]]
    assert not h.panel.legend.isVisible()  # the numbers say it: no colour bar
    cells = h.panel.numbers_item.cells  # (row, col, text, colour), painted in one item
    assert cells[0][3].name() == "#ffffff"  # white on viridis' dark 0 ...
    assert cells[3][3].name() == "#000000"  # ... black on its bright yellow 1
    big = np.random.default_rng(0).random((ANNOTATE_MAX + 1, 3))
    h.set_matrix(big)
    assert h.cell_texts() == [] and h.panel.legend.isVisible()
    h.set_matrix(m, levels=(0.0, 1.0), numbers=False)
    assert h.cell_texts() == []
    negative = MatrixPlot(numbers=True, digits=1)
    qtbot.addWidget(negative)
    negative.set_matrix(np.array([[-12.34, 3.0]]))
    assert negative.cell_texts() == [["−12.3", "3.0"]]


def test_matrix_log_colours_tell_small_weights_apart(qtbot):
    from app.widgets.levels import LOG_FLOOR
    from app.widgets.matrix_plot import MatrixPlot

    h = MatrixPlot()
    qtbot.addWidget(h)
    m = np.array([[0.0002, 0.001, 1.0, 0.0]], dtype=np.float32)
    h.set_matrix(m, levels=(0.0, 1.0))
    linear = [_pixel(h.panel.image, x, 0) for x in range(4)]
    assert linear[0] == linear[1]  # on a linear scale 0.0002 and 0.001 look alike
    h.set_matrix(m, scale="log")
    assert h.panel.levels == (np.log10(LOG_FLOOR), 0.0)
    assert h.panel.legend.label == "log₁₀ weight"
    logc = [_pixel(h.panel.image, x, 0) for x in range(4)]
    assert logc[0] != logc[1] and logc[2] == linear[2]  # 1 keeps its colour
    assert logc[3] == linear[3]  # 0 sits at the floor, the bottom colour
    np.testing.assert_array_equal(h.matrix, m)  # the values as given, not their logs


def test_matrix_diverging_centres_zero_and_plain_levels_span_the_values(qtbot):
    from app.widgets.matrix_plot import MatrixPlot
    from app.widgets.palette import DIVERGING_CMAP, matrix_lut

    d = MatrixPlot(diverging=True)
    qtbot.addWidget(d)
    m = np.array([[-1.0, 0.0, 4.0]], dtype=np.float32)
    d.set_matrix(m)
    assert d.panel.levels == (-4.0, 4.0) and d.panel.cmap_name == DIVERGING_CMAP
    lut = matrix_lut(DIVERGING_CMAP)
    mid = QColor(*lut[127])
    got = _pixel(d.panel.image, 1, 0)
    assert max(abs(got.red() - mid.red()), abs(got.green() - mid.green()), abs(got.blue() - mid.blue())) <= 3
    assert _pixel(d.panel.image, 2, 0) == QColor(*lut[253])
    p = MatrixPlot()
    qtbot.addWidget(p)
    p.set_matrix(np.array([[2.0, 5.0, -np.inf]]))
    assert p.panel.levels == (2.0, 5.0)  # the finite range


def test_matrix_hover_and_click_under_the_pointer(qtbot):
    from app.widgets.matrix_plot import MatrixPlot

    h = MatrixPlot(row_title="checkpoint", col_title="position")
    qtbot.addWidget(h)
    h.resize(400, 400)
    h.show()
    qtbot.waitExposed(h)
    m = np.arange(12, dtype=np.float32).reshape(3, 4) / 12
    h.set_matrix(m, ["in", "mid", "out"], list("abcd"), levels=(0.0, 1.0))
    with qtbot.waitSignal(h.hovered, timeout=2000) as blk:
        qtbot.mouseMove(h.view.viewport(), h.widget_pos_of(2, 1))
    assert tuple(blk.args) == (2, 1)
    assert h.readout.text() == f"checkpoint 2 'out', position 1 'b': {m[2, 1]:.4g}"
    with qtbot.waitSignal(h.clicked, timeout=2000) as blk:
        qtbot.mouseClick(h.view.viewport(), Qt.MouseButton.LeftButton, pos=h.widget_pos_of(1, 3))
    assert tuple(blk.args) == (1, 3)


def test_matrix_rejects_what_is_not_a_matrix(qtbot):
    from app.widgets.matrix_plot import MatrixPlot

    h = MatrixPlot()
    qtbot.addWidget(h)
    with pytest.raises(ValueError):
        h.set_matrix(np.zeros((2, 2, 2)))


# ---- HeadMosaic --------------------------------------------------------------------------------
def test_mosaic_hit_testing_maps_back_to_exact_tokens_when_pooled(qtbot):
    from app.widgets.head_grid import HeadMosaic

    m = HeadMosaic()
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


def test_mosaic_pooled_overview_shows_block_maxima_and_reads_exact_weights(qtbot):
    from app.widgets.head_grid import HeadMosaic
    from model.interp.pooling import MAX_CELL, pool_max

    m = HeadMosaic()
    qtbot.addWidget(m)
    T = 2 * MAX_CELL + 10  # too long for one pixel per token
    w = np.random.default_rng(2).random((1, 2, T, T)).astype(np.float32)
    m.set_data(w, [str(i) for i in range(T)])
    assert m.block == 3
    S = m.geom.S
    assert S == -(-T // 3)
    r = m.cell_rect(0, 1)
    cell = m.canvas[int(r.y()) : int(r.y()) + S, int(r.x()) : int(r.x()) + S]
    np.testing.assert_array_equal(cell, pool_max(w, 3)[0, 1])
    m.hover_at(0, 1, 100, 50)
    assert f"weight {w[0, 1, 100, 50]:.3f}" in m.readout.text()
    assert "overview: 3×3 tokens per pixel" in m.readout.text()


def test_mosaic_masks_grey_and_gamma_brightens_small_weights(qtbot):
    from app.widgets.head_grid import HeadMosaic
    from app.widgets.palette import GAP_COLOR, HIDDEN_COLOR

    m = HeadMosaic()
    qtbot.addWidget(m)
    T = 4
    w = np.full((1, 1, T, T), 0.04, dtype=np.float32)
    mask = np.tril(np.ones((T, T), bool))
    m.set_data(w, list("abcd"), mask=mask)
    assert _pixel(m.image, 3, 0) == QColor(*HIDDEN_COLOR)  # query 0 cannot see key 3
    assert _pixel(m.image, T, 0) == QColor(*GAP_COLOR)  # the gap after the cell
    linear = _pixel(m.image, 0, 3)
    m.set_gamma(0.5)
    brighter = _pixel(m.image, 0, 3)
    assert brighter != linear and brighter.lightness() > linear.lightness()
    assert m.legend.gamma == 0.5
    m.hover_at(0, 0, 0, 3)
    assert m.readout.text() == "layer 0, head 0: query 0 'a' cannot see key 3 'd' (masked)"


def test_mosaic_difference_mode_is_diverging_on_symmetric_levels(qtbot):
    from app.widgets.head_grid import HeadMosaic
    from app.widgets.palette import DIVERGING_CMAP, matrix_lut

    m = HeadMosaic()
    qtbot.addWidget(m)
    d = np.zeros((2, 3, 5, 5), dtype=np.float32)
    d[1, 2, 4, 0] = -0.25
    d[0, 1, 3, 3] = 0.1
    m.set_difference(d, list("abcde"), names=("run", "init"))
    assert m.mode == "difference" and m.weights is None and m.diff is d
    assert m.levels == (-0.25, 0.25) and m.shape == (2, 3)
    assert m.legend.label == "run − init"
    lut = matrix_lut(DIVERGING_CMAP)
    x, y = m.geom.origin(1, 2)
    assert _pixel(m.image, x, y + 4) == QColor(*lut[0])  # the most negative: the bottom colour
    m.hover_at(1, 2, 4, 0)
    assert m.readout.text() == "layer 1, head 2: query 4 'e' → key 0 'a': run − init = -0.2500"
    m.set_data(np.abs(d), list("abcde"))  # back to weights: the sequential map again
    assert m.weights is not None and m.diff is None and m.legend.label == "weight"
    assert np.array_equal(m.image.lut, matrix_lut("viridis"))


def test_mosaic_clicks_open_a_head_and_right_clicks_ask_for_its_menu(qtbot):
    from app.widgets.head_grid import HeadMosaic

    m = HeadMosaic()
    qtbot.addWidget(m)
    m.resize(500, 400)
    m.show()
    qtbot.waitExposed(m)
    m.set_data(np.random.default_rng(3).random((2, 3, 6, 6)).astype(np.float32), list("abcdef"))
    QCoreApplication.processEvents()  # let the axes take their size before positions are computed
    with qtbot.waitSignal(m.headClicked, timeout=2000) as blk:
        qtbot.mouseClick(m.view.viewport(), Qt.MouseButton.LeftButton, pos=m.widget_pos_of(1, 2))
    assert tuple(blk.args) == (1, 2)
    with qtbot.waitSignal(m.headMenuRequested, timeout=2000) as blk:
        qtbot.mouseClick(m.view.viewport(), Qt.MouseButton.RightButton, pos=m.widget_pos_of(0, 1))
    assert tuple(blk.args[:2]) == (0, 1)
    with qtbot.waitSignal(m.cellHovered, timeout=2000) as blk:
        qtbot.mouseMove(m.view.viewport(), m.widget_pos_of(1, 0, 4, 2))
    assert tuple(blk.args) == (1, 0, 4, 2)
    assert m.readout.text().startswith("layer 1, head 0: query 4 'e' → key 2 'c': weight ")
    m.set_marked([(1, 1)])
    m.set_selected((0, 2))
    m.set_roles([["prev", "", ""], ["", "", "induction"]])
    texts = sorted(m.marks.texts())
    assert texts == ["OFF", "induction", "prev"]
    assert m.marks._select_item.isVisible()
    assert m.marks._select_item.rect() == m.cell_rect(0, 2).adjusted(-0.5, -0.5, 0.5, 0.5)


def test_flow_columns_give_each_cell_the_largest_square():
    from app.widgets.head_grid import flow_columns

    assert flow_columns(4, 1600, 400) == 4  # a wide strip: one row
    assert flow_columns(4, 400, 1600) == 1  # a tall one: one column
    assert flow_columns(4, 800, 800) == 2  # a square: 2 × 2
    assert flow_columns(4, 1380, 720) == 2  # today's Aggregates page: 2 × 2 beats a thin row
    assert flow_columns(1, 100, 100) == 1


def test_mosaic_flow_fills_the_widget_and_still_hits_the_right_head(qtbot):
    from app.widgets.head_grid import HeadMosaic

    m = HeadMosaic(row_name="layer", col_name="")
    qtbot.addWidget(m)
    m.resize(900, 860)
    m.show()
    qtbot.waitExposed(m)
    w = np.random.default_rng(4).random((1, 4, 8, 8)).astype(np.float32)
    names = [f"layer {i}" for i in range(4)]
    m.set_data(w, list("abcdefgh"), col_labels=names, flow=True)
    assert m.geom.cols == 2 and m.geom.rows == 2  # a square-ish widget: 2 × 2, not a strip
    assert m.shape == (1, 4) and m.weights is w
    for c in range(4):
        p = m.vb.mapSceneToView(m.scene_pos_of(0, c, 5, 1))
        assert m.locate(p.x(), p.y()) == (0, c, 5, 1)
    # the cells fill the plot: the canvas spans the view box both ways
    vr = m.vb.viewRect()
    H, W = m.image.image.shape
    assert vr.width() == pytest.approx(W - m.geom.g, rel=0.02)
    assert vr.height() == pytest.approx(H - m.geom.g, rel=0.02)
    texts = sorted(m.marks.texts())
    assert texts == names  # each cell named in its corner
    m.resize(1800, 300)  # a wide strip: one row
    qtbot.waitUntil(lambda: m.geom.cols == 4, timeout=2000)


def test_compact_mosaic_numbers_its_layers_and_names_them_once(qtbot):
    from app.widgets.head_grid import HeadMosaic

    m = HeadMosaic(compact=True)
    qtbot.addWidget(m)
    m.set_data(np.full((2, 3, 4, 4), 0.25, dtype=np.float32))
    assert m.row_labels == ["0", "1"] and m.col_labels == ["0", "1", "2"]
    assert m.plot.getAxis("left").labelText == "layer" and m.plot.getAxis("top").labelText == "head"
    assert m.geom.g == 1  # thin gaps: 4 // 24, at least 1
    m.hover_at(1, 2, 3, 0)
    assert m.readout.text().startswith("layer 1, head 2: query 3")  # the readout still names the head


def test_mosaic_frames_and_labels_the_heads_sharing_a_kv_head(qtbot):
    """GQA: 8 query heads over 2 K/V heads are two framed groups of 4, named by their K/V head above
    the columns' own labels."""
    from PySide6.QtWidgets import QGraphicsRectItem

    from app.widgets.head_grid import HeadMosaic

    m = HeadMosaic()
    qtbot.addWidget(m)
    m.resize(800, 400)
    m.show()
    qtbot.waitExposed(m)
    T = 6
    w = np.random.default_rng(2).random((3, 8, T, T)).astype(np.float32)
    m.set_data(w, kv_group=4)
    assert m.col_labels == [f"h{c}" for c in range(8)]
    qtbot.waitUntil(lambda: m.top_axis.group_texts() == ["K/V head 0", "K/V head 1"], timeout=2000)
    step = m.geom.S + m.geom.g
    frames = [i for i in m.marks._items if isinstance(i, QGraphicsRectItem)]
    assert sorted(round(f.rect().x() + m.geom.g / 2) for f in frames) == [0, 4 * step]
    assert all(round(f.rect().height()) == 3 * step for f in frames)  # every layer
    assert m.cell_name(2, 5) == "layer 2, head 5 (K/V head 1)"
    m.set_data(w)  # multi-head attention: no groups
    assert not [i for i in m.marks._items if isinstance(i, QGraphicsRectItem)]
    assert m.top_axis.group_texts() == []
    assert m.col_labels[4] == "head 4" and m.cell_name(0, 4) == "layer 0, head 4"


def test_the_mosaic_hands_pyqtgraph_the_colours_its_float_rescale_would_draw(qtbot):
    """The image holds colour-table entries (a cheap paint); the pixels equal those of the float canvas
    drawn at the same levels by pyqtgraph's own rescale, grey and gaps included."""
    import pyqtgraph as pg

    from app.widgets.head_grid import HeadMosaic
    from app.widgets.levels import lut_levels

    m = HeadMosaic()
    qtbot.addWidget(m)
    w = np.random.default_rng(5).random((2, 3, 12, 12)).astype(np.float32)
    w[0, 0, 0, 0], w[1, 2, 5, 5] = 0.0, 1.0
    mask = np.tril(np.ones((12, 12), bool))
    for log in (False, True):
        m.set_log(log)
        m.set_data(w, [str(i) for i in range(12)], mask=mask)
        assert m.image.image.dtype == np.uint8 and m.image.levels is None
        lo, hi = (np.log10(1e-4), 0.0) if log else (0.0, 1.0)
        lo, top, _, _ = lut_levels(lo, hi)
        lut = m.image.lut
        want, _ = pg.makeARGB(m.canvas, lut=lut, levels=(lo, top))
        got, _ = pg.makeARGB(m.image.image, lut=lut)
        assert (got == want).mean() > 0.999  # (float rounding at a level's edge may pick the next entry)


def test_cell_numbers_contrast_with_every_colour_of_every_map():
    from app.widgets.palette import DEFAULT_CMAP, DIVERGING_CMAP, contrast_ratio, matrix_lut, text_colors

    for cmap in (DEFAULT_CMAP, DIVERGING_CMAP):
        for cell, ink in zip(matrix_lut(cmap), text_colors(cmap), strict=True):
            assert contrast_ratio(ink, tuple(int(c) for c in cell)) >= 4.5, (cmap, cell, ink)


def test_matrix_numbers_are_written_in_a_colour_that_reads_on_their_cell(qtbot):
    from app.widgets.matrix_plot import MatrixPlot
    from app.widgets.palette import contrast_ratio, matrix_lut

    plot = MatrixPlot(numbers=True)
    qtbot.addWidget(plot)
    values = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    plot.set_matrix(values, levels=(0.0, 1.0))
    lut = matrix_lut(plot.panel.cmap_name)
    for i, j, _, colour in plot.panel.numbers_item.cells:
        cell = lut[min(253, int(values[i, j] * 253))]
        ratio = contrast_ratio((colour.red(), colour.green(), colour.blue()), tuple(int(c) for c in cell))
        assert ratio >= 4.5, (i, j)


def test_a_deep_compact_grid_fits_in_bands_and_names_every_fifth_layer_when_rows_are_small(qtbot):
    """The Train tab's probe grid of a 30-layer, 9-head model in its small box: every layer in view,
    set in bands, and the row names thinned to every fifth where all would overlap."""
    from app.views.train.live_attention import PROBE_FIT_PX
    from app.widgets.head_grid import MAX_BANDS, SCROLL_PX, HeadMosaic

    m = HeadMosaic(compact=True)
    qtbot.addWidget(m)
    m.set_scrolling(PROBE_FIT_PX, SCROLL_PX, bands=MAX_BANDS)
    m.resize(480, 300)
    m.show()
    qtbot.waitExposed(m)
    m.set_data(np.full((30, 9, 27, 27), 0.1, dtype=np.float32))
    qtbot.waitUntil(lambda: m.geom is not None and m.geom.bands > 1, timeout=5000)
    assert not m.scrolling and m.geom.n_drawn == 30  # all 30 layers, none scrolled away
    m.grab()  # paint: the band's row names decide what fits
    (rows,) = [item for item in m.marks._items if getattr(item, "kind", "") == "rows"]
    drawn = [int(t) for t in rows.drawn]
    assert drawn and all(r % 5 == 0 for r in drawn)  # 15, 20, 25 beside the second band
    assert len(rows.texts()) > len(drawn)  # the others were left out, not drawn over each other
