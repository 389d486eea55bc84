"""The Compare tab: variants trained together, the same prompt through every model, A − B, files."""

from __future__ import annotations

import numpy as np
import pytest

from model.config import ConfigError

TIMEOUT = 60_000  # ms; generous because the test machine's two cores are shared


@pytest.fixture
def session(qtbot, tiny_config, tiny_settings):
    from app.session.session import Session
    from app.shell.gui import make_app

    make_app()
    s = Session()
    s.train_settings = tiny_settings.replace(eval_every=2, probe_every=0)
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(tiny_config)
    s.build_model(seed=0)
    yield s
    s.shutdown(timeout=30)


@pytest.fixture
def tab(qtbot, session):
    from app.views.compare.tab import CompareTab

    t = CompareTab(session)
    qtbot.addWidget(t)
    t.resize(1300, 850)
    t.show()
    yield t
    t.shutdown()


def _train(qtbot, tab, steps):
    with qtbot.waitSignal(tab.trainingFinished, timeout=TIMEOUT) as done:
        assert tab.train_variants(steps)
    # the prompt goes through every model right after training
    qtbot.waitUntil(lambda: all(r.record.attention is not None for r in tab.runs), timeout=TIMEOUT)
    return done.args


def test_two_variants_train_together_and_show_both_curves(qtbot, tab):
    tab.add_variant({})
    tab.add_variant("n_kv_heads=1")
    assert [r.name for r in tab.runs] == ["base", "n_kv_heads=1"]
    assert tab.setup.train_button.isEnabled()
    reason, _ = _train(qtbot, tab, 4)
    assert reason == "done"
    for r in tab.runs:
        assert tab.pages["loss"].loss_plot.points(r.name) == 4  # one curve per run, every step on it
        assert [h["step"] for h in r.record.history] == [1, 2, 3, 4]
        assert r.model is not None and r.status == "trained 4 steps"
    val = tab.pages["loss"].loss_plot.val_curves["base"]
    qtbot.waitUntil(lambda: val.xData is not None and len(val.xData) == 2)  # the throttled repaint
    assert val.xData.tolist() == [2.0, 4.0]  # validation every 2 steps
    t = tab.pages["loss"].summary_table
    assert t.rowCount() == 2
    rows = tab.summary_rows()
    assert [row["steps"] for row in rows] == [4, 4]
    base, _ = tab.runs
    assert rows[0]["params"] == sum(p.numel() for p in base.model.parameters())
    assert rows[1]["params"] < rows[0]["params"]  # one K/V head instead of two
    assert rows[1]["kv_cache_bytes_per_token"] * 2 == rows[0]["kv_cache_bytes_per_token"]
    assert t.item(1, 2).text() == "4" and t.item(0, 3).text() == f"{rows[0]['train_loss']:.4f}"
    # the config diff shows the one field that differs, with the value an "auto" size takes
    ct = tab.show_page("config").config_table
    assert ct.rowCount() == 1 and ct.item(0, 0).text() == "n_kv_heads"
    assert [ct.item(0, c).text() for c in (1, 2)] == ["auto (2)", "1"]
    # same shape: the difference page and the aligned metric table fill in
    assert tab.diff is not None and tab.diff.shape == base.record.attention.weights.shape
    L, H = base.config.core.n_layers, base.config.attention.n_heads
    mt = tab.show_page("metrics").metric_table
    assert mt.rowCount() == L * H and mt.columnCount() == 5  # layer, head, two runs, Δ


def test_difference_of_a_model_with_itself_is_exactly_zero(qtbot, session, tab):
    a = tab.add_current_model("A")
    b = tab.add_current_model("B")
    assert a.model is not session.model and b.model is not a.model  # frozen copies
    with qtbot.waitSignal(tab.attentionReady, timeout=TIMEOUT):
        tab.run_prompt(session.source.default_prompt)
    tab.set_pair("A", "B")
    assert tab.diff is not None and tab.diff.shape[:2] == (2, 2)
    assert not np.any(tab.diff)  # exactly zero, not merely small
    diff_page = tab.pages["difference"]  # set_pair shows it
    assert not np.any(diff_page.diff_grid.diff)
    lo, hi = diff_page.diff_grid.levels
    assert lo == -hi and hi > 0
    assert "exactly alike" in diff_page.diff_status.text()
    # another initialisation is not the same model: a non-zero difference on symmetric levels
    session.build_model(seed=1)
    tab.add_current_model("C")
    with qtbot.waitSignal(tab.attentionReady, timeout=TIMEOUT):
        tab.run_prompt()
    tab.set_pair("A", "C")
    m = float(np.abs(tab.diff).max())
    assert m > 0 and diff_page.diff_grid.levels == pytest.approx((-m, m))
    assert diff_page.diff_table.rowCount() == 4


def test_models_of_different_shapes_get_no_difference_map(qtbot, session, tab, tiny_config):
    tab.add_current_model("two heads")
    session.set_config(tiny_config.replace(n_heads=4))
    session.build_model()
    tab.add_current_model("four heads")
    with qtbot.waitSignal(tab.attentionReady, timeout=TIMEOUT):
        tab.run_prompt(session.source.default_prompt)
    tab.set_pair("two heads", "four heads")
    assert tab.diff is None and "same shape" in tab.pages["difference"].diff_status.text()
    # the metric table still aligns the heads, with "–" where a run has no such head
    mt = tab.show_page("metrics").metric_table
    assert mt.rowCount() == 2 * 4
    missing = [mt.item(r, 2).text() for r in range(mt.rowCount())]
    assert missing.count("–") == 4


def test_bad_variants_are_named(qtbot, tab):
    with pytest.raises(ConfigError, match="n_kv_heads"):
        tab.add_variant("n_kv_heads=3")  # 2 query heads
    setup = tab.setup
    setup.changes_edit.setText("n_head=4")
    setup.add_variant_button.click()
    assert "did you mean 'n_heads'" in setup.variant_error.text() and tab.runs == []
    setup.quick_combo.setCurrentIndex(0)  # Pre-LN vs Post-LN
    setup.quick_button.click()
    assert [r.record.changes for r in tab.runs] == [{"norm_position": "pre"}, {"norm_position": "post"}]


def test_comparison_file_round_trips(qtbot, tmp_path, session, tab):
    from app.views.compare.tab import CompareTab

    tab.add_variant({}, "pre-LN")
    tab.add_variant("norm_position=post", "post-LN")
    _train(qtbot, tab, 2)
    tab.set_pair("pre-LN", "post-LN")
    path = tab.save_comparison(tmp_path / "ln.comparison.json", with_models=True)
    assert (tmp_path / "ln.comparison.runs" / "pre-LN" / "model.safetensors").is_file()

    other = CompareTab(session)
    qtbot.addWidget(other)
    other.open_comparison(path)
    assert [r.name for r in other.runs] == ["pre-LN", "post-LN"]
    assert all(r.model is None for r in other.runs)  # weights stay on disk until needed
    for before, after in zip(tab.runs, other.runs, strict=True):
        assert after.record.history == before.record.history
        assert after.record.config == before.record.config
        assert other.pages["loss"].loss_plot.points(after.name) == 2
        assert np.array_equal(after.record.attention.weights, before.record.attention.weights)
        np.testing.assert_allclose(after.metrics.entropy, before.metrics.entropy)
    st, ot = tab.show_page("loss").summary_table, other.pages["loss"].summary_table
    assert [[ot.item(r, c).text() for c in range(ot.columnCount())] for r in range(ot.rowCount())] == [
        [st.item(r, c).text() for c in range(st.columnCount())] for r in range(st.rowCount())
    ]
    other.set_pair("pre-LN", "post-LN")
    assert np.array_equal(other.diff, tab.diff)
    other_config, other_prompt = (
        other.show_page("config").config_table,
        other.show_page("attention").prompt_edit,
    )
    assert (
        other_config.rowCount() == 1 and other_prompt.text() == tab.show_page("attention").prompt_edit.text()
    )
    # the saved weights load for a new prompt and give back the very same attention
    with qtbot.waitSignal(other.attentionReady, timeout=TIMEOUT):
        other.run_prompt()
    assert all(r.model is not None and r.status == "weights loaded" for r in other.runs)
    for before, after in zip(tab.runs, other.runs, strict=True):
        assert np.array_equal(after.record.attention.weights, before.record.attention.weights)
    other.shutdown()


@pytest.fixture
def compare_window(qtbot, app_settings, tiny_config, tiny_settings):
    """A window with the Compare tab only, on the tiny model of ``task:copy``."""
    from app.shell.gui import make_app
    from app.shell.window import MainWindow, TabEntry

    make_app()
    win = MainWindow(
        settings=app_settings,
        confirm_close=False,
        restore=False,
        tabs=[TabEntry("compare", "Compare", "app.views.compare.tab:CompareTab")],
    )
    qtbot.addWidget(win)
    s = win.session
    win.train_settings_panel.set_settings(tiny_settings)
    s.set_device("cpu")
    assert win.data_panel.choose("task:copy")
    win.config_panel.set_config(tiny_config)
    s.build_model()
    win.show()
    yield win
    s.shutdown(timeout=30)
    win.close()


def test_closing_the_window_stops_the_variants(qtbot, compare_window):
    win = compare_window
    tab = win.tab("compare")
    tab.add_variant({})
    tab.add_variant("causal=false")
    assert tab.train_variants(1_000_000)
    qtbot.waitUntil(lambda: len(tab.runs[1].record.history) >= 2, timeout=TIMEOUT)
    worker = tab.worker
    win.close()
    assert not worker.alive


def test_a_checkpoint_joins_the_comparison(qtbot, tmp_path, session, tab):
    session.save_checkpoint(tmp_path / "ckpt")
    tab.add_current_model("live")
    with qtbot.waitSignal(tab.runsChanged, timeout=TIMEOUT):
        tab.add_checkpoint(str(tmp_path / "ckpt"))
    run = tab.run("ckpt")
    assert run.kind == "checkpoint" and run.record.path == str(tmp_path / "ckpt")
    with qtbot.waitSignal(tab.attentionReady, timeout=TIMEOUT):
        tab.run_prompt(session.source.default_prompt)
    tab.set_pair("live", "ckpt")
    assert tab.diff is not None and not np.any(tab.diff)  # the saved weights are the live ones
    with qtbot.waitSignal(tab.loadFailed, timeout=TIMEOUT):
        tab.add_checkpoint(str(tmp_path / "missing"))
    assert "Could not open" in tab.setup.variant_error.text() and len(tab.runs) == 2


def test_the_initialisation_is_where_a_run_with_that_seed_starts(qtbot, session, tab):
    tab.add_current_model("now")  # the session's model is untrained, built with the training seed
    with qtbot.waitSignal(tab.runsChanged, timeout=TIMEOUT):
        assert tab.add_initial_model()
    init = tab.run("initialisation (seed 0)")
    assert init.model is not session.model and init.status == "untrained"
    with qtbot.waitSignal(tab.attentionReady, timeout=TIMEOUT):
        tab.run_prompt(session.source.default_prompt)
    tab.set_pair("now", "initialisation (seed 0)")
    assert tab.diff is not None and not np.any(tab.diff)


def test_pages_follow_the_state(qtbot, tab):
    config = tab.pages["config"]
    assert tab.current_page is tab.pages["loss"] and not config.built
    tab.add_variant({})
    tab.add_variant("n_kv_heads=1")
    assert not config.built and config.stale  # out of view: only marked
    assert tab.setup.run_list.count() == 2 and tab.pages["loss"].summary_table.rowCount() == 2
    assert tab.show_page("config").config_table.rowCount() == 1 and not config.stale
    tab.remove_run("n_kv_heads=1")  # in view: drawn at once
    assert config.config_table.rowCount() == 0 and "two or more" in config.config_label.text()
    assert tab.pages["loss"].stale  # and the page out of view waits
    tab.state.say("training", "a message")
    assert tab.setup.train_status.text() == "a message"
    tab.set_prompt("abc")
    edit = tab.show_page("attention").prompt_edit
    assert edit.text() == "abc"
    qtbot.keyClicks(edit, "d")  # typing sets the state's prompt
    assert tab.state.prompt == "abcd" and tab.prompt() == "abcd"
    tab.set_prompt("xyz")
    assert edit.text() == "xyz"


def test_a_variant_too_large_to_train_is_refused_with_the_train_tabs_remedy(qtbot, session, tab, monkeypatch):
    """Compare sizes every variant before it trains and names the value to lower in the same words as
    the Train tab's Start does for the same config and settings (a sequence length "auto" of 8,192)."""
    from model.budget import sizing

    monkeypatch.setattr(sizing, "available_memory", lambda *a, **k: sizing.Available(512 * 2**20, "test"))
    session.train_settings = session.train_settings.replace(seq_len=None, batch_size=32)
    session.set_config(session.config.replace(context_length=8192))
    tab.add_variant({})
    assert not tab.train_variants(4)
    said = tab.state.messages["training"]
    (train_tab_says,) = session.run.problems()
    assert said == f"Cannot train base: {train_tab_says}"
    assert "Sequence length (auto = the model's context, 8,192) to" in said and "--" not in said
    assert all(r.status != "training" for r in tab.runs)
