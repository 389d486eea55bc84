"""The History tab: a tiny Pythia-like history from the fake Hub, scrubbed, plotted, exported, compared."""

from __future__ import annotations

import csv

import numpy as np
import pytest

TIMEOUT = 60_000


@pytest.fixture
def tiny_window_tabs():
    return ["history", "compare"]


def _open(qtbot, tab, revisions, tmp_path):
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT) as shown:
        assert tab.open_history(
            "hf:tiny/pythia", revisions, prompt="a b c d a b c d", cache_dir=tmp_path / "c"
        )
    assert shown.args == [0]
    return tab.state.history


def test_scrubbing_draws_each_revision_and_the_latest_request_wins(
    qtbot, tiny_window, neox_history_hub, tiny_neox_history, tmp_path
):
    tab = tiny_window.tab("history")
    revs = list(tiny_neox_history)
    h = _open(qtbot, tab, revs, tmp_path)
    assert tab.scrubber.maximum() == 4 and tab.mosaic.weights is not None
    shown = []
    tab.stepShown.connect(shown.append)
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT, check_params_cb=lambda i: i == 4):
        for i in (1, 2, 3, 4):  # dragged past three steps: only the last one is drawn
            tab.scrubber.setValue(i)
    assert shown == [4]
    np.testing.assert_array_equal(tab.mosaic.weights, h.snapshot(4).weights)
    assert "step 64" in tab.step_label.text() and "induction" in tab.best_label.text()
    # every step, drawn in turn, is that revision's own attention
    for i in (3, 1):
        with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT):
            tab.scrubber.setValue(i)
        np.testing.assert_array_equal(tab.mosaic.weights, h.snapshot(i).weights)
    assert not np.allclose(h.snapshot(1).weights, h.snapshot(3).weights)


def test_trace_all_plot_click_export_and_compare(qtbot, tiny_window, neox_history_hub, tmp_path):
    tab = tiny_window.tab("history")
    h = _open(qtbot, tab, ["step0", "step4", "step64"], tmp_path)
    tab.trace_all()
    qtbot.waitUntil(
        lambda: all(h.peek(i) is not None for i in range(3)) and not tab._filling, timeout=TIMEOUT
    )
    qtbot.waitUntil(lambda: tab.plot.curves.points("induction") == 3, timeout=TIMEOUT)
    assert set(tab.plot.curves.series) == {"induction", "previous-token", "sink", "entropy"}
    assert tab.plot.curves.plot.getViewBox().state["logMode"][0]  # log-x
    want = [h.snapshot(i).best("induction")[0] for i in range(3)]
    np.testing.assert_allclose(tab.plot.curves.series["induction"].y, want)
    tab.plot.plot_combo.setCurrentIndex(1)  # every head: induction
    assert len(tab.plot.curves.series) == 2 * 4
    # clicking the point of step 4 jumps there
    item = tab.plot.curves.curves["L1H2"]
    spot = item.scatter.points()[1]
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT) as shown:
        item.sigPointsClicked.emit(item, [spot], None)
    assert shown.args == [1] and tab.scrubber.value() == 1
    # exports: the table as CSV (one row per revision), the plot as PNG and SVG
    with open(tab.plot.export_csv(str(tmp_path / "t.csv")), newline="") as f:
        table = list(csv.reader(f))
    assert [r[0] for r in table[1:]] == ["0", "4", "64"] and "induction L1H3" in table[0]
    for name in ("plot.png", "plot.svg"):
        assert tab.plot.export_plot(str(tmp_path / name)).stat().st_size > 1000
    # two steps side by side in the Compare tab: A − B per head, metrics aligned
    with qtbot.waitSignal(tab.compareReady, timeout=TIMEOUT) as ready:
        tab.compare_steps(2, 0)
    assert ready.args == ["step 64", "step 0"]
    compare = tiny_window.tab("compare")
    assert tiny_window.current_tab() is compare
    diff = h.snapshot(2).weights.astype(np.float32) - h.snapshot(0).weights.astype(np.float32)
    np.testing.assert_allclose(compare.state.diff, diff, atol=1e-3)
    names, rows = compare.state.metric_rows("induction")
    assert names == ["step 64", "step 0"] and len(rows) == 8
    assert rows[7]["step 64"] == pytest.approx(float(h.snapshot(2).metrics["induction"][1, 3]), abs=1e-6)


def test_a_bad_source_says_why(qtbot, tiny_window, tmp_path):
    tab = tiny_window.tab("history")
    with qtbot.waitSignal(tab.failed, timeout=TIMEOUT):
        assert not tab.open_history(str(tmp_path / "nothing-here"))
    assert "Cannot open" in tab.status_label.text()
    tab.cancel()  # nothing running: harmless
    assert tab.state.history is None and not tab.scrubber.isEnabled()


def test_file_menu_opens_a_folder_history(qtbot, tiny_window, tmp_path, write_hf_family, monkeypatch):
    from app.views.history import open_dialog
    from model.io.history.revisions import log_spaced_steps

    root = tmp_path / "ckpts"
    for step, seed in ((10, 1), (30, 2)):
        write_hf_family(root / f"step{step}", "gpt_neox", seed=seed, num_key_value_heads=None)
    menu = [a.text() for a in tiny_window.menu.file_menu.actions()]
    assert "Open a training &history…" in menu

    dialog = open_dialog.OpenHistoryDialog()
    qtbot.addWidget(dialog)
    assert dialog.choice() == ("hf:EleutherAI/pythia-70m", log_spaced_steps())  # Pythia's 16 by default
    dialog.revisions_edit.setText("1000, step2 main")
    assert dialog.choice()[1] == [1000, "step2", "main"]

    def chosen(self):
        self.folder_edit.setText(str(root))
        self.folder_radio.setChecked(True)
        return 1

    monkeypatch.setattr(open_dialog.OpenHistoryDialog, "exec", chosen)
    tab = tiny_window.tab("history")
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT):
        tiny_window.menu.history_action.trigger()
    assert tab.state.history.steps == [10, 30] and tiny_window.current_tab() is tab
    assert tab.mosaic.weights.shape[:2] == (2, 4)


def test_cancel_mid_download_then_the_step_loads_again(
    qtbot, tiny_window, neox_history_hub, tmp_path, monkeypatch
):
    from huggingface_hub import constants

    tab = tiny_window.tab("history")
    h = _open(qtbot, tab, ["step0", "step16"], tmp_path)
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 512)  # many chunks: the cancel lands mid-file
    tab.show_step(1)
    tab.cancel()  # at once, while step16 downloads in the compute thread
    qtbot.waitUntil(lambda: "Cancelled step16" in tab.status_label.text(), timeout=TIMEOUT)
    assert not h.cached(1) and tab.state.shown.step == 0  # the grid still shows step 0
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT) as shown:
        tab.show_step(1)  # asked again: fetched (finished files kept) and shown
    assert shown.args == [1] and tab.state.shown.step == 16 and h.cached(1)


@pytest.mark.parametrize("tiny_window_tabs", [["history"]])
def test_two_steps_are_asked_of_compare_by_a_message_and_without_that_tab_it_says_so(
    qtbot, tiny_window, neox_history_hub, tmp_path
):
    """History holds no Compare tab: it publishes a request (CompareRuns) on the session's hub. In a
    window without the Compare tab nothing crashes and one line says so; whoever answers the request
    gets both steps as runs on the history's prompt."""
    from app.session.messages import CompareRuns

    tab = tiny_window.tab("history")
    h = _open(qtbot, tab, ["step0", "step4"], tmp_path)
    tab.compare_steps(1, 0)
    qtbot.waitUntil(lambda: tab.status_label.text() == "The Compare tab is not open.", timeout=TIMEOUT)
    assert tiny_window.current_tab() is tab

    asked: list[CompareRuns] = []
    subscription = tiny_window.session.hub.subscribe(CompareRuns, asked.append)
    with qtbot.waitSignal(tab.compareReady, timeout=TIMEOUT) as ready:
        tab.compare_steps(1, 0)
    assert ready.args == ["step 4", "step 0"]
    [request] = asked
    assert [run.name for run in request.runs] == ["step 4", "step 0"] and request.prompt == h.prompt
    for run, i in zip(request.runs, (1, 0), strict=True):
        np.testing.assert_array_equal(run.record.attention.weights, h.snapshot(i).weights)
    subscription.cancel()
