"""The head mosaic on a deep grid (30 layers × 9 query heads over 3 K/V heads): rows folded away, set
in bands side by side, or scrolled, every position still naming the real head; the arrow keys."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

L, H, KV = 30, 9, 3


def _weights(T: int = 12, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).random((L, H, T, T)).astype(np.float32)
    w = np.tril(w)
    return w / w.sum(-1, keepdims=True)


def _mosaic(qtbot, size, *, bands: int = 4, T: int = 12):
    from app.widgets.head_grid import HeadMosaic

    m = HeadMosaic(keys=True)
    qtbot.addWidget(m)
    m.set_scrolling(20, 28, bands=bands)
    m.resize(*size)
    m.show()
    qtbot.waitExposed(m)
    m.set_data(_weights(T), kv_group=H // KV, row_labels=[f"L{r}" for r in range(L)])
    return m


def _cell_px(m) -> float:
    """A head's width on screen, in pixels."""
    g = m.geom
    return m.fit.cell_px() * g.S / (g.S + g.g)


def _visible(m, r: int, c: int) -> bool:
    return m.vb.viewRect().adjusted(-0.01, -0.01, 0.01, 0.01).contains(m.cell_rect(r, c))


@pytest.mark.parametrize(
    ("bands", "shown"), [(1, None), (2, None), (3, tuple(range(10, 20))), (2, (3, 7, 29))]
)
def test_every_place_of_a_banded_or_folded_grid_names_its_real_head(bands, shown):
    from app.widgets.head_grid import MosaicGeometry

    g = MosaicGeometry.of(L, H, 10, shown=shown, bands=bands, band_gap=2)
    rows = shown or tuple(range(L))
    assert g.drawn == rows and g.bands == min(bands, len(rows))
    cells = np.arange(L * H, dtype=np.float32).reshape(L, H, 1, 1) * np.ones((1, 1, 10, 10), np.float32)
    canvas = np.full(g.canvas_shape, -1.0, np.float32)
    g.place(canvas, cells)
    seen = set()
    for r in rows:
        for c in range(H):
            x, y = g.origin(r, c)
            assert g.locate(x + 3.5, y + 9.5, 10, 1) == (r, c, 9, 3)
            assert (canvas[y : y + 10, x : x + 10] == r * H + c).all()  # its own head's pixels
            seen.add((x, y))
    assert len(seen) == len(rows) * H  # no two heads in one place
    assert (canvas == -1).sum() == canvas.size - len(rows) * H * 100  # the rest is gaps
    if bands > 1:  # the empty cells between two bands hold no head
        assert g.locate(g.band_x(1) - 5.0, 2.0, 10, 1) is None
    for r in set(range(L)) - set(rows):
        assert not g.shows(r)
        with pytest.raises(ValueError):
            g.origin(r, 0)


def test_a_deep_grid_is_set_in_bands_when_that_draws_its_heads_readably(qtbot):
    m = _mosaic(qtbot, (900, 480))
    qtbot.waitUntil(lambda: m.geom.bands >= 2 and not m.scrolling, timeout=3000)
    assert _cell_px(m) >= 20
    assert all(_visible(m, r, c) for r in (0, 14, 15, 29) for c in (0, H - 1))  # everything in view
    # the rows of the bands after the first are named beside them; the axis names the first band's
    named = {t for t, _ in _tick_texts(m.plot.getAxis("left"))} | set(m.marks.row_texts())
    assert named == {f"L{r}" for r in range(L)}
    # every band names its K/V groups over its columns
    texts = m.top_axis.group_texts()
    assert len(texts) == 3 * m.geom.bands and {t[-1] for t in texts} == {"0", "1", "2"}
    # one mosaic of the same room in a single band: heads under 20 px, so scrolled
    one = _mosaic(qtbot, (900, 480), bands=1)
    qtbot.waitUntil(lambda: one.scrolling, timeout=3000)
    assert one.geom.bands == 1 and one.scroll.active


def _tick_texts(axis):
    from tests.app.layout_probe import axis_texts

    return axis_texts(axis)


def _wheel(m, notches: int, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    vp = m.view.viewport()
    pos = QPointF(vp.width() / 3, vp.height() / 2)
    ev = QWheelEvent(
        pos,
        m.view.mapToGlobal(pos.toPoint()).toPointF(),
        QPoint(0, 0),
        QPoint(0, 120 * notches),
        Qt.MouseButton.NoButton,
        modifiers,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(vp, ev)


def test_a_grid_too_deep_for_its_room_scrolls_by_rows_with_the_wheel_and_keys(qtbot):
    m = _mosaic(qtbot, (520, 320))
    qtbot.waitUntil(lambda: m.scrolling and m.scroll.active, timeout=3000)
    assert _cell_px(m) == pytest.approx(28, abs=1.5)  # the readable size, not a sliver
    assert _visible(m, 0, 0) and not _visible(m, L - 1, 0)
    _wheel(m, -3)  # three notches down: three rows
    assert m.fit.top_row() == pytest.approx(3, abs=0.01)
    assert m.scroll.bar.value() > 0
    width = m.vb.viewRect().width()
    _wheel(m, 1, Qt.KeyboardModifier.ControlModifier)  # Ctrl: the view box zooms instead
    qtbot.waitUntil(lambda: m.vb.viewRect().width() != pytest.approx(width), timeout=2000)
    m.reset_view()
    assert m.fit.top_row() == pytest.approx(0, abs=0.01)
    # a head far down is brought into view; the bar follows
    assert m.ensure_visible(27, 8) and _visible(m, 27, 8)
    assert m.scroll.bar.value() > 0.8 * m.scroll.bar.maximum()
    # Page Up scrolls back a screenful
    before = m.fit.top_row()
    qtbot.keyClick(m.view, Qt.Key.Key_PageUp)
    assert m.fit.top_row() < before - 2


def test_the_arrow_keys_ask_for_the_neighbouring_head_within_the_rows_shown(qtbot):
    m = _mosaic(qtbot, (900, 480))
    m.set_rows(range(10, 20))
    assert m.drawn_rows == tuple(range(10, 20))
    asked = []
    m.headStepped.connect(lambda r, c: asked.append((r, c)))
    opened = []
    m.headClicked.connect(lambda r, c: opened.append((r, c)))
    m.set_selected((12, 8))
    for key in (Qt.Key.Key_Right, Qt.Key.Key_Left, Qt.Key.Key_Up, Qt.Key.Key_Down):
        qtbot.keyClick(m.view, key)
    assert asked == [(13, 0), (12, 7), (11, 8), (13, 8)]
    m.set_selected((19, 4))
    qtbot.keyClick(m.view, Qt.Key.Key_Down)  # the last row shown: it stays
    m.set_selected((3, 4))  # folded away: the first head shown
    qtbot.keyClick(m.view, Qt.Key.Key_Up)
    assert asked[-2:] == [(19, 4), (10, 0)]
    m.set_selected((15, 2))
    qtbot.keyClick(m.view, Qt.Key.Key_Return)
    assert opened == [(15, 2)]


def test_folding_rows_away_keeps_clicks_and_marks_on_the_real_heads(qtbot):
    m = _mosaic(qtbot, (900, 480))
    qtbot.waitUntil(lambda: m.geom.bands >= 2, timeout=3000)
    all_px = _cell_px(m)
    m.set_rows(range(20, 30))
    qtbot.waitUntil(lambda: m.drawn_rows == tuple(range(20, 30)), timeout=3000)
    assert _cell_px(m) > all_px * 1.3  # ten layers: drawn larger
    assert {t for t, _ in _tick_texts(m.plot.getAxis("left"))} | set(m.marks.row_texts()) == {
        f"L{r}" for r in range(20, 30)
    }
    m.set_selected((25, 4))
    m.set_marked([(25, 4), (3, 3)])  # one folded away: no frame for it
    m.set_roles(
        [["ind" if (r, c) == (22, 1) else "" for c in range(H)] for r in range(L)],
        colors=[["#e6007e" if (r, c) in ((22, 1), (2, 2)) else None for c in range(H)] for r in range(L)],
    )
    assert [r for r, _ in m.marks.frames()] == [m.cell_rect(22, 1)]
    assert m.marks._select_item.isVisible()
    assert m.marks._select_item.rect() == m.cell_rect(25, 4).adjusted(-0.5, -0.5, 0.5, 0.5)
    QApplication.processEvents()
    with qtbot.waitSignal(m.headClicked, timeout=2000) as blk:
        qtbot.mouseClick(m.view.viewport(), Qt.MouseButton.LeftButton, pos=m.widget_pos_of(27, 6))
    assert tuple(blk.args) == (27, 6)
    w = m.values
    m.hover_at(*m.locate(*_view_xy(m, 23, 2, 7, 3)))
    assert m.readout.text().startswith("layer 23, head 2 (K/V head 0): query 7")
    assert f"weight {w[23, 2, 7, 3]:.3f}" in m.readout.text()
    m.set_rows(None)
    assert m.drawn_rows == tuple(range(L))


def _view_xy(m, r, c, q, k):
    p = m.vb.mapSceneToView(m.scene_pos_of(r, c, q, k))
    return p.x(), p.y()


def _prev_token_heads(T: int) -> np.ndarray:
    """Every head looks at the token before (a one-token diagonal); L0 h0 at the first token."""
    w = np.zeros((L, H, T, T), np.float32)
    q = np.arange(1, T)
    w[:, :, q, q - 1] = 1.0
    w[:, :, 0, 0] = 1.0
    w[0, 0] = 0.0
    w[0, 0, :, 0] = 1.0
    return w


def _screen_rect(m, r: int, c: int):
    return m.view.mapFromScene(m.vb.mapViewToScene(m.cell_rect(r, c))).boundingRect()


def _lit_rows(m, image, r: int, c: int, where) -> float:
    """Of the screen rows of head (r, c), the share with a pixel of the map's top colour (yellow: not
    its dark bottom, nor the masked grey, nor a frame) where ``where(row, rect)`` says the line is
    (± 2 px)."""
    rect = _screen_rect(m, r, c)
    lit = 0
    rows = range(rect.top() + 2, rect.bottom() - 1)
    for y in rows:
        x = where(y, rect)
        near = [image.pixelColor(xx, y) for xx in range(x - 2, x + 3)]
        lit += any(p.red() > 180 and p.blue() < 120 for p in near)
    return lit / len(rows)


def test_a_long_prompt_is_pooled_to_the_screen_so_thin_patterns_stay_lines(qtbot):
    from app.widgets.head_grid import HeadMosaic
    from model.interp.pooling import block_size, pool_max

    T = 548
    w = _prev_token_heads(T)
    b = block_size(T, L * H)  # what the inspection pools by: 5, heads of 110 pixels
    mask = np.tril(np.ones((T, T), bool))
    shots = {}
    for readable in (True, False):
        m = HeadMosaic(keys=True)
        qtbot.addWidget(m)
        if readable:
            m.set_scrolling(20, 28, bands=4)
        m.resize(900, 480)
        m.show()
        qtbot.waitExposed(m)
        m.set_data(
            w, mask=mask, overview=pool_max(w, b), block=b, kv_group=3, row_labels=[f"L{i}" for i in range(L)]
        )
        QApplication.processEvents()
        shots[readable] = (m, m.view.grab().toImage())
    m, image = shots[True]
    px = _screen_rect(m, 5, 4).width()
    assert m.block > b and m.geom.S <= 1.5 * px + 1  # at most 1.5 image pixels a screen pixel
    diagonal = lambda y, rect: rect.left() + (y - rect.top())  # noqa: E731
    first = lambda y, rect: rect.left() + 1  # noqa: E731
    assert _lit_rows(m, image, 5, 4, diagonal) > 0.95
    assert _lit_rows(m, image, 0, 0, first) > 0.95
    # the same heads drawn by scaling the 110-pixel image down: a dotted line, a column mostly lost
    plain, plain_image = shots[False]
    assert plain.block == b
    assert (
        _lit_rows(plain, plain_image, 5, 4, diagonal) < 0.8
        or _lit_rows(plain, plain_image, 0, 0, first) < 0.8
    )
    # the readout still reads the full-resolution weights
    m.hover_at(5, 4, 300, 299)
    assert "weight 1.000" in m.readout.text()


def test_zooming_in_draws_the_heads_finer_and_fit_draws_them_as_before(qtbot):
    from app.widgets.head_grid import HeadMosaic
    from model.interp.pooling import block_size, pool_max

    T = 548
    w = _prev_token_heads(T)
    b = block_size(T, L * H)
    m = HeadMosaic(keys=True)
    qtbot.addWidget(m)
    m.set_scrolling(20, 28, bands=4)
    m.resize(900, 480)
    m.show()
    qtbot.waitExposed(m)
    m.set_data(w, overview=pool_max(w, b), block=b, kv_group=3, row_labels=[f"L{i}" for i in range(L)])
    coarse = m.block
    centre = m.vb.viewRect().center()
    head = m.locate(centre.x(), centre.y())
    for _ in range(4):
        _wheel(m, 1, Qt.KeyboardModifier.ControlModifier)  # zoom in around the pointer
    qtbot.waitUntil(lambda: m.block < coarse, timeout=3000)
    assert m.fit.zoomed  # still the user's zoom, at the new resolution
    cell = _screen_rect(m, *head[:2]).width()
    assert m.geom.S <= 1.5 * cell + 1
    m.reset_view()
    assert m.block == coarse and not m.fit.zoomed


def test_role_names_are_written_only_where_they_fit_in_the_cell(qtbot):
    m = _mosaic(qtbot, (900, 480))
    names = [["" for _ in range(H)] for _ in range(L)]
    names[2][2], names[3][3] = "induction", "ind"
    m.set_roles(names, colors=[["#e6007e" if n else None for n in row] for row in names])

    def drawn():
        m.view.grab()  # paints
        return sorted(t for layer in m.marks._layers("cells") for t in layer.drawn)

    assert _cell_px(m) < 40 and drawn() == ["ind"]  # "induction" would cover the next head
    assert len(m.marks.frames()) == 2  # both framed in the role's colour all the same
    m.set_rows([2, 3])  # two layers: large heads
    qtbot.waitUntil(lambda: drawn() == ["ind", "induction"], timeout=3000)


def _drawn_on_screen(m):
    """The rect (viewport pixels) the heads' image takes on screen."""
    return m.view.mapFromScene(m.image.sceneBoundingRect()).boundingRect()


def test_fit_shows_the_whole_grid_in_the_view_after_scrolling_and_zooming(qtbot):
    m = _mosaic(qtbot, (520, 320), T=120)  # heads of 120 pixels, pooled to the screen
    qtbot.waitUntil(lambda: m.scrolling and m.scroll.active, timeout=3000)
    _wheel(m, -3)  # scrolled three rows down …
    f = m.fit.f
    for _ in range(3):
        _wheel(m, 1, Qt.KeyboardModifier.ControlModifier)  # … and zoomed in, drawn finer once it stops
    qtbot.waitUntil(lambda: m.fit.f != f, timeout=3000)
    m.reset_view()  # back to the layout: the first row at the readable size, not the zoomed one
    assert m.fit.top_row() == pytest.approx(0, abs=0.01) and m.fit.f == f
    m.fit_all()  # the page's Fit
    viewport = m.view.viewport().rect()
    qtbot.waitUntil(lambda: viewport.contains(_drawn_on_screen(m)), timeout=3000)
    assert not m.scrolling and not m.scroll.active
    assert all(_visible(m, r, c) for r in (0, L // 2, L - 1) for c in (0, H - 1))
    # fitted, not shrunk: the heads take the view's height, or its width
    box = m.view.mapFromScene(m.vb.sceneBoundingRect()).boundingRect()
    drawn = _drawn_on_screen(m)
    assert drawn.height() >= 0.9 * box.height() or drawn.width() >= 0.9 * box.width()
    m.resize(560, 300)  # a resize keeps the whole grid fitted
    qtbot.waitUntil(lambda: m.view.viewport().rect().contains(_drawn_on_screen(m)), timeout=3000)
    assert not m.scrolling


def test_the_readout_follows_the_head_that_scrolls_under_a_still_pointer(qtbot):
    m = _mosaic(qtbot, (520, 320))
    qtbot.waitUntil(lambda: m.scrolling and m.scroll.active, timeout=3000)
    vp = m.view.viewport()
    at = QPointF(vp.width() / 3, vp.height() / 2).toPoint()  # where _wheel points
    qtbot.mouseMove(vp, at)
    p = m.vb.mapSceneToView(m.view.mapToScene(at))
    before = m.locate(p.x(), p.y())
    assert before is not None
    qtbot.waitUntil(
        lambda: m.readout.text().startswith(f"layer {before[0]}, head {before[1]} "), timeout=2000
    )
    with qtbot.waitSignal(m.cellHovered, timeout=2000):
        _wheel(m, -3)  # three rows down: another head is under the pointer now
    p = m.vb.mapSceneToView(m.view.mapToScene(at))
    now = m.locate(p.x(), p.y())
    assert now is not None and now[0] == before[0] + 3 and now[1] == before[1]
    assert m.readout.text().startswith(f"layer {now[0]}, head {now[1]} ")
    assert f"query {now[2]} " in m.readout.text()


@pytest.mark.parametrize("kv_group", [4, 1])
@pytest.mark.parametrize("width", [1280, 850])
def test_the_names_of_32_heads_never_run_into_each_other(qtbot, width, kv_group):
    """32 query heads (a Llama-3-8B layer) in a grid as wide as a 1280-px window, and as wide as the
    Heads page in it: the column names the axis draws stay apart, and still name the heads."""
    from app.widgets.head_grid import HeadMosaic

    layers, heads = 32, 32
    w = np.full((layers, heads, 4, 4), 0.25, np.float32)
    m = HeadMosaic(keys=True)
    qtbot.addWidget(m)
    m.set_scrolling(20, 28, bands=4)
    m.resize(width, 560)
    m.show()
    qtbot.waitExposed(m)
    m.set_data(w, kv_group=kv_group)
    m.view.grab()
    groups = {t for g in m.top_axis.groups for t in g[2:]}
    names = [(t, r) for t, r in _tick_texts(m.top_axis) if t not in groups]
    assert names and names[0][0].endswith("0")  # the first head is named
    names.sort(key=lambda tr: tr[1].left())
    for (a, ra), (b, rb) in itertools.pairwise(names):
        assert ra.right() + 2 <= rb.left(), f"{a!r} runs into {b!r}"
    # thinned, not gone: a named column at least every 8th head
    assert len({t for t, _ in names}) >= heads // 8
