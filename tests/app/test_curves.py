"""Curves: the one training-curve widget (smoothing, log-y, validation points, series, throttling)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.widgets.curves import Curves, history_points
from app.widgets.palette import NAMED_COLORS, PALETTE, color_for, run_color
from model.train.smoothing import ema

LOSS = np.array([4.0, 3.0, 3.5, 2.0, 2.5, 1.5, 1.8, 1.2])
STEPS = np.arange(1, len(LOSS) + 1, dtype=np.float64)


def drawn(item) -> int:
    """Number of points a plot item was given (pyqtgraph keeps None for an empty item)."""
    return 0 if item.xData is None else len(item.xData)


@pytest.fixture
def curves(qtbot):
    w = Curves("loss", "nats", smoothing=0.5, redraw_ms=0)
    qtbot.addWidget(w)
    return w


def test_smoothing_draws_the_debiased_ema_and_follows_the_control(curves):
    curves.set_series("run", STEPS, LOSS)
    main, raw = curves.curves["run"], curves.raw_curves["run"]
    np.testing.assert_allclose(main.yData, ema(LOSS, 0.5))
    np.testing.assert_allclose(raw.yData, LOSS)  # the raw curve is drawn faintly under it
    assert not np.allclose(main.yData, LOSS)
    curves.smoothing.setValue(0.8)
    np.testing.assert_allclose(main.yData, ema(LOSS, 0.8))
    curves.smoothing.setValue(0.0)  # raw: the main line is the data, no second copy
    np.testing.assert_allclose(main.yData, LOSS)
    assert drawn(raw) == 0


def test_extend_continues_the_ema_exactly(curves):
    curves.extend("run", STEPS[:3], LOSS[:3])
    curves.extend("run", STEPS[3:5], LOSS[3:5])
    curves.extend("run", STEPS[5:], LOSS[5:])
    np.testing.assert_allclose(curves.curves["run"].yData, ema(LOSS, 0.5), rtol=1e-12)
    np.testing.assert_allclose(curves.smoothed("run"), ema(LOSS, 0.5), rtol=1e-12)
    assert curves.points("run") == len(LOSS)


def test_validation_points_and_history_events(curves):
    history = [
        {"step": 1, "train_loss": 3.0},
        {"step": 2, "train_loss": 2.0, "val_loss": 2.5},
        {"step": 3, "train_loss": float("nan")},  # dropped, not drawn as a gap of garbage
        {"step": 4, "train_loss": 1.0, "val_loss": 1.5},
    ]
    curves.set_history("run", history, (10, 20, 30))
    assert curves.points("run") == 3
    val = curves.val_curves["run"]
    assert val.xData.tolist() == [2.0, 4.0] and val.yData.tolist() == [2.5, 1.5]
    assert curves.curves["run"].opts["pen"].color().getRgb()[:3] == (10, 20, 30)
    steps, train, vs, vl = history_points(history)
    assert steps.tolist() == [1.0, 2.0, 4.0] and train.tolist() == [3.0, 2.0, 1.0]
    assert vs.tolist() == [2.0, 4.0] and vl.tolist() == [2.5, 1.5]


def test_log_y_moves_axis_and_reference_lines(curves):
    curves.set_series("run", STEPS, LOSS)
    curves.set_hline("ref", 10.0, "ln V")
    assert curves.hline("ref").value() == pytest.approx(10.0)
    curves.log_y.setChecked(True)
    assert curves.plot.ctrl.logYCheck.isChecked()
    assert curves.hline("ref").value() == pytest.approx(1.0)  # drawn at log10(10)
    np.testing.assert_allclose(curves.curves["run"].yData, ema(LOSS, 0.5))  # data stays the data
    curves.set_log_y(False)
    assert not curves.log_y.isChecked() and curves.hline("ref").value() == pytest.approx(10.0)
    curves.set_hline("ref", None)
    assert not curves.hline("ref").isVisible()


def test_series_add_remove_clear_and_colours(curves):
    curves.set_series("a", STEPS, LOSS)
    curves.set_series("b", STEPS, LOSS * 2, color=(1, 2, 3))
    assert set(curves.curves) == {"a", "b"}
    assert curves.curves["a"].opts["pen"].color().getRgb()[:3] == run_color(0)
    assert [c.name() for c in curves.curves.values()] == ["a", "b"]
    labels = [label.text for _, label in curves.legend.items]
    assert labels == ["a", "b"]  # raw and validation curves stay out of the legend
    curves.set_series("b", STEPS, LOSS, color=(200, 0, 0))  # a new colour re-pens the series
    assert curves.curves["b"].opts["pen"].color().getRgb()[:3] == (200, 0, 0)
    item = curves.curves["a"]
    curves.remove("a")
    assert set(curves.curves) == {"b"} and item not in curves.plot.items
    assert [label.text for _, label in curves.legend.items] == ["b"]
    curves.remove("nope")  # unknown names are ignored
    curves.clear()
    assert not curves.series and not curves.curves and curves.points("b") == 0
    assert not curves.legend.items


def test_throttled_redraw_eventually_shows_the_last_data(qtbot):
    w = Curves(redraw_ms=300)
    qtbot.addWidget(w)
    w.extend("run", [1.0], [2.0])
    item = w.curves["run"]
    assert drawn(item) == 0  # nothing drawn yet: the repaint waits for the timer
    for i in range(2, 40):
        w.extend("run", [float(i)], [1.0 / i])
    assert drawn(item) == 0
    qtbot.waitUntil(lambda: drawn(item) == 39, timeout=2000)
    assert item.xData[-1] == 39.0
    w.extend("run", [40.0], [0.5])  # right after a repaint the next one waits out the interval
    assert w._timer.isActive() and w._timer.interval() > 0
    qtbot.waitUntil(lambda: drawn(item) == 40, timeout=2000)
    y = [2.0] + [1.0 / i for i in range(2, 40)] + [0.5]
    np.testing.assert_allclose(item.yData, ema(np.array(y), 0.9))  # the default smoothing


def test_marker_and_panels(curves):
    extra = curves.add_panel("lr", "Learning rate", row=1)
    curves.set_series("lr", STEPS, STEPS * 0.1, panel="lr", smooth=False, label="")
    assert curves.curves["lr"] in extra.items and curves.curves["lr"] not in curves.plot.items
    np.testing.assert_allclose(curves.curves["lr"].yData, STEPS * 0.1)  # not smoothed
    curves.log_y.setChecked(True)  # the toggle is the main plot's only
    assert not extra.ctrl.logYCheck.isChecked()
    curves.set_marker(3, "shown")
    assert curves.marker.isVisible() and curves.marker.value() == 3
    curves.set_marker(None)
    assert not curves.marker.isVisible()


def test_non_finite_points_are_dropped(curves):
    curves.set_series("run", [1, 2, 3, 4], [1.0, math.inf, float("nan"), 0.5])
    assert curves.curves["run"].xData.tolist() == [1.0, 4.0]


def test_named_variant_colours():
    assert color_for("Post-LN") == NAMED_COLORS["Post-LN"] == PALETTE[1]
    assert color_for("something else", 2) == run_color(2) == PALETTE[2]
    assert run_color(len(PALETTE) + 1) == PALETTE[1]


def _shown(qtbot, widget, size):
    widget.resize(*size)
    widget.show()
    qtbot.waitExposed(widget)
    qtbot.waitUntil(lambda: widget.view.width() > 50, timeout=5000)


@pytest.mark.parametrize("size", [(380, 300), (700, 450)])
def test_the_legend_is_a_row_above_the_curves_never_on_them(qtbot, curves, size):
    for i, name in enumerate(("train (smoothed)", "validation", "a third run", "a fourth")):
        curves.set_series(name, STEPS, LOSS + i)
    _shown(qtbot, curves, size)
    legend_rect = curves.legend.sceneBoundingRect

    def laid_out():  # the row has taken the lines its entries need
        return all(legend_rect().contains(s.sceneBoundingRect().center()) for s, _ in curves.legend.items)

    qtbot.waitUntil(laid_out, timeout=5000)
    data = curves.plot.getViewBox().sceneBoundingRect()
    legend = legend_rect()
    assert not legend.intersects(data)  # pyqtgraph's floated over the top right of the data
    assert legend.bottom() <= data.top() + 0.5
    for sample, label in curves.legend.items:  # every entry in the row, within the plot's width
        for part in (sample, label):
            rect = part.sceneBoundingRect()
            assert legend.contains(rect.center()) and rect.right() <= curves.view.width() + 1


@pytest.mark.parametrize("width", [900, 1100])
def test_train_plot_titles_never_overlap_down_to_900_px(qtbot, window_of_one_tab, width):
    _, tab, _ = window_of_one_tab("train", "app.views.train.tab:TrainTab", (width, 700))
    plots = tab.plots
    qtbot.waitUntil(lambda: plots.view.isVisible() and plots.view.width() > 100, timeout=5000)
    titles = {k: p.titleLabel.item.sceneBoundingRect() for k, p in plots.panels.items()}
    shown = plots.view.mapToScene(plots.view.viewport().rect()).boundingRect()
    for key, rect in titles.items():
        box = plots.panels[key].sceneBoundingRect()
        assert box.adjusted(-1, -1, 1, 1).contains(rect), (key, "title wider than its plot")
        assert shown.adjusted(-1, -1, 1, 1).contains(rect), (key, "title cut")
    keys = list(titles)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            assert not titles[a].adjusted(4, 4, -4, -4).intersects(titles[b].adjusted(4, 4, -4, -4)), (a, b)
    # and the legend does not cover the loss
    assert not plots.legend.sceneBoundingRect().intersects(plots.plot.getViewBox().sceneBoundingRect())


@pytest.mark.parametrize(
    "y_range", [(9.9, 12.0), (8.0, 10.1)], ids=["line-near-the-bottom", "line-near-the-top"]
)
def test_a_reference_line_s_label_stays_inside_the_plot(qtbot, y_range):
    """The loss plot zoomed to the last steps puts ln V at the bottom edge: its label then sits above
    the line (it hung below it, cut by the axis); near the top it hangs below."""
    w = Curves("loss", "nats", smoothing=0.0, redraw_ms=0)
    qtbot.addWidget(w)
    w.resize(500, 300)
    w.show()
    qtbot.waitExposed(w)
    w.set_hline("ref", 10.0, "uniform guess: ln V", position=0.97)
    w.plot.setYRange(*y_range, padding=0)
    w.plot.setXRange(0, 10, padding=0)
    qtbot.wait_until(lambda: w.plot.getViewBox().viewRange()[1][0] == pytest.approx(y_range[0]))
    line = w.hline("ref")
    label = line.label
    w.grab()  # lay out and paint: the line takes the view's new transform
    line.viewTransformChanged()
    view = w.plot.getViewBox()
    box = view.mapRectToScene(view.boundingRect())
    text = label.textItem.mapRectToScene(label.textItem.boundingRect())
    assert box.top() - 0.5 <= text.top() and text.bottom() <= box.bottom() + 0.5, (text, box)
