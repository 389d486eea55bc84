"""The Labs tab as a whole: its pages and screenshots, the prompt it reads, model changes, shutdown,
and its place in the main window."""

import pytest


@pytest.fixture
def tiny_window_tabs():
    """The window here builds the Labs tab only: its place in the window is what is under test."""
    return ["labs"]


def test_every_lab_has_pages_and_screenshots(labs):
    tab, _ = labs
    names = [name for name, _ in tab.screenshot_pages()]
    assert len(names) == len(set(names)) == len(tab.classes) >= 5
    labs_seen = {cls.lab for cls in tab.classes.values()}
    assert labs_seen == {
        "Mask lab",
        "Softmax scaling lab",
        "Residual stream lab",
        "Positions lab",
        "Worked example",
        "KV cache lab",
    }
    for cls in tab.classes.values():  # every page explains itself
        assert cls.explanation and cls.formula and cls.notice, cls.slug
    # pages are built when first shown, the live norms at once (they record during training)
    assert "residual-live" in tab.pages and set(tab.pages) <= set(tab.classes)


def test_prompt_follows_the_session_until_typed(labs, qtbot, wait_results):
    tab, session = labs
    page = tab.show_page("mask-stages")
    session.probe.set("abc=abc\n")
    assert tab.prompt() == "abc=abc\n"
    st = wait_results(qtbot, page, "stages")
    assert st.weights.shape[0] == min(8, page.tokens.value())
    st = wait_results(qtbot, page, "stages", lambda: tab.set_prompt("ab"))
    assert st.weights.shape == (2, 2) and page.weights_view.row_labels == ["a", "b"]
    session.probe.set("chegijaf=chegijaf\n")
    assert tab.prompt() == "ab"  # typed by the user: kept
    tab.set_prompt(session.probe_prompt)


def test_model_change_recomputes_the_page_on_screen(labs, qtbot, wait_results):
    tab, session = labs
    page = tab.show_page("softmax-model")
    wait_results(qtbot, page, "saturation")
    from model.config import GPTConfig

    session.set_config(GPTConfig(context_length=32, n_layers=3, d_model=16, n_heads=4))
    s = wait_results(qtbot, page, "saturation", session.build_model)
    assert s.entropy_model.shape == (3, 4)
    assert "3 layers × 4 heads" in tab.model_label.text()


def test_no_model_says_so(qtbot):
    from app.session.session import Session
    from app.shell.gui import make_app
    from app.views.labs.tab import LabsTab

    make_app()
    session = Session()
    tab = LabsTab(session)
    qtbot.addWidget(tab)
    tab.show()
    page = tab.show_page("mask-stages")
    assert "No model yet" in page.message.text()
    assert tab.show_page("worked-example").weights_text() == ["0.401", "0.198", "0.401"]
    tab.shutdown()
    assert session.shutdown(timeout=10)


def test_shutdown_stops_a_running_comparison(labs, qtbot):
    tab, _ = labs
    page = tab.show_page("softmax-training")
    for w, v in (
        (page.head_dim, 8),
        (page.d_model, 16),
        (page.n_layers, 1),
        (page.steps, 100000),
        (page.seq_len, 16),
        (page.batch, 2),
    ):
        w.setValue(v)
    page.panel.start()
    qtbot.waitUntil(lambda: bool(page.panel.losses), timeout=60000)
    worker = page.panel.worker
    tab.shutdown()
    assert not worker.alive
    qtbot.waitUntil(lambda: not page.panel.running, timeout=10000)


def test_labs_tab_in_the_main_window(tiny_window, qtbot, wait_results):
    from app.views.labs.tab import LabsTab

    tab = tiny_window.tabs["labs"]
    assert isinstance(tab, LabsTab)
    tiny_window.tab_widget.setCurrentWidget(tab)
    page = tab.show_page("residual-norms")
    norms, _ = wait_results(qtbot, page, "norms")
    assert norms.names[0] == "embed"
    assert tab.export_targets()  # File → Export current view has something to write
