"""The window: tab registry, config validation gating Start, settings, export, data errors, About."""

from __future__ import annotations

import gc

import pytest
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from app.shell.window import TABS, MainWindow, TabEntry, TabError
from app.views.tab import TabBase


class BrokenTab(TabBase):
    def __init__(self, session, parent=None):
        raise RuntimeError("this tab is broken on purpose")


def test_every_registered_tab_is_there_and_built(tiny_window):
    win = tiny_window
    titles = [win.tab_widget.tabText(i) for i in range(win.tab_widget.count())]
    assert titles == [entry.title for entry in TABS]
    for tab_id, _title, spec in TABS:
        tab = win.tabs[tab_id]
        assert not isinstance(tab, TabError), (tab_id, tab.message.text())
        assert type(tab).__name__ == spec.partition(":")[2], tab_id


@pytest.mark.parametrize("tiny_window_tabs", [["labs", "budget"]])
def test_a_window_asked_for_some_tabs_builds_only_those(tiny_window):
    """What the single-tab test modules rely on: ``tabs=`` (through ``tiny_window_tabs``) builds
    just the named tabs, in order, and the window works around them."""
    win = tiny_window
    assert [win.tab_widget.tabText(i) for i in range(win.tab_widget.count())] == ["Labs", "Budget"]
    assert type(win.tabs["labs"]).__name__ == "LabsTab" and "train" not in win.tabs
    assert win.session.model is not None and win.data_panel is not None


def test_a_window_without_tabs_builds_and_works(qtbot, app_settings):
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False, tabs=[])
    qtbot.addWidget(win)
    win.show()
    assert win.tabs == {} and win.current_tab() is None and win.current_id() is None
    assert not win.show_tab("compare")
    with pytest.raises(KeyError):
        win.tab("compare")
    assert "no tabs" in win.menu.show_page_help().text()  # Help → What am I looking at? (F1)
    win.reset_layout()
    win.close()


def test_a_missing_or_broken_tab_module_does_not_take_the_app_down(qtbot, app_settings):
    tabs = [
        TabEntry("train", "Train", "app.views.train.tab:TrainTab"),
        TabEntry("nowhere", "Nowhere", "app.views.no_such_tab_module:Tab"),
        TabEntry("broken", "Broken", f"{__name__}:BrokenTab"),
        TabEntry("not-a-tab", "Not a tab", f"{__name__}:NotATab"),
    ]
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False, tabs=tabs)
    qtbot.addWidget(win)
    assert isinstance(win.tabs["nowhere"], TabError)
    assert "no_such_tab_module" in win.tabs["nowhere"].message.text()
    assert "broken on purpose" in win.tabs["broken"].message.text()
    # a widget that is not a Tab would be asked for hooks it does not have: it is refused by name
    assert isinstance(win.tabs["not-a-tab"], TabError)
    assert "NotATab is not a tab" in win.tabs["not-a-tab"].message.text()
    win.close()


def test_invalid_config_disables_start_and_says_why(qtbot, tiny_window):
    win = tiny_window
    panel, tab = win.config_panel, win.tabs["train"]
    assert tab.start_button.isEnabled() and panel.valid
    with qtbot.waitSignal(panel.validityChanged, timeout=5000, check_params_cb=lambda ok: not ok):
        panel.widgets["n_heads"].setValue(3)  # d_model 16 is not divisible by 3
    assert not tab.start_button.isEnabled()
    assert "not divisible" in panel.error_label.text()
    # the reason itself beside Start, and which panel to fix it in
    assert "not divisible" in tab.plan_label.text() and "Model panel" in tab.plan_label.text()
    assert panel.widgets["n_heads"].styleSheet() and panel.widgets["d_model"].styleSheet()
    # setting head_dim explicitly makes it valid again
    with qtbot.waitSignal(panel.validityChanged, timeout=5000, check_params_cb=lambda ok: ok):
        panel.widgets["head_dim"].setValue(8)
    assert tab.start_button.isEnabled() and panel.error_label.text() == ""
    assert win.session.config.attention.n_heads == 3 and win.session.config.attention.head_dim == 8


def test_invalid_training_settings_disable_start(qtbot, tiny_window):
    panel, tab = tiny_window.train_settings_panel, tiny_window.tabs["train"]
    panel.widgets["lr"].setText("fast")
    assert not tab.start_button.isEnabled() and "lr" in panel.error_label.text()
    panel.widgets["lr"].setText("0.001")
    assert tab.start_button.isEnabled() and tiny_window.session.train_settings.lr == 0.001


def test_settings_remember_geometry_config_and_training_settings(qtbot, app_settings, tiny_config):
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False)
    qtbot.addWidget(win)
    win.resize(640, 480)  # smaller than the offscreen screen, which clamps restored geometry
    win.config_panel.set_config(tiny_config.replace(n_layers=3))
    win.train_settings_panel.widgets["steps"].setValue(1234)
    win.docks["data"].raise_()
    win.close()

    again = MainWindow(settings=app_settings, confirm_close=False, restore=True)
    qtbot.addWidget(again)
    assert again.config_panel.config().core.n_layers == 3
    assert again.train_settings_panel.settings().steps == 1234
    assert (again.width(), again.height()) == (640, 480)
    again.close()


def test_last_directory_is_remembered(app_settings, tmp_path):
    app_settings.set_last_dir("checkpoint", tmp_path / "some-run")  # a path inside: its folder counts
    assert app_settings.last_dir("checkpoint") == str(tmp_path)


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_export_current_view(qtbot, tiny_window, tmp_path, monkeypatch, suffix):
    out = tmp_path / f"view{suffix}"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(out), ""))
    tiny_window.menu.export_action.trigger()
    written = sorted(tmp_path.iterdir())
    assert written, "nothing exported"
    for path in written:
        data = path.read_bytes()
        if suffix == ".png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert b"<svg" in data[:2000]
    # every other tab exports too (a placeholder as a whole, a real tab its export targets)
    tiny_window.tab_widget.setCurrentIndex(len(TABS) - 1)
    out2 = tmp_path / f"other{suffix}"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(out2), ""))
    tiny_window.menu.export_action.trigger()
    others = list(tmp_path.glob("other*"))
    assert others and all(p.stat().st_size > 100 for p in others)


def test_data_panel_shows_the_data_layers_error_and_keeps_the_source(
    qtbot, tiny_window, tmp_path, monkeypatch
):
    s, panel = tiny_window.session, tiny_window.data_panel
    before = s.source
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 10)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(binary), ""))
    panel.open_button.click()
    assert "binary" in panel.error_label.text() or "UTF-8" in panel.error_label.text()
    assert s.source is before
    assert not panel.choose("task:nonsense")
    assert "unknown task" in panel.error_label.text()
    text = tmp_path / "story.txt"
    text.write_text("the cat sat on the mat. " * 400, encoding="utf-8")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(text), ""))
    panel.open_button.click()
    assert panel.error_label.text() == ""
    assert s.source_spec == str(text) and s.config.core.vocab_size == s.source.tokenizer.vocab_size


def test_about_names_versions_and_device(qtbot, tiny_window, monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "about", lambda parent, title, text: shown.append(text))
    tiny_window.menu.about_action.trigger()
    assert shown and "PyTorch" in shown[0] and "PySide6" in shown[0] and "cpu" in shown[0]


def test_status_bar_shows_device_parameters_and_step(tiny_window):
    win = tiny_window
    n = win.session.model.num_params()
    assert f"{n:,}" in win.params_label.text()
    assert "cpu" in win.device_label.text()
    assert "Step: 0" in win.step_label.text()


def test_menus_have_the_expected_actions(tiny_window):
    win = tiny_window
    file_texts = [a.text().replace("&", "") for a in win.menu.file_menu.actions() if a.text()]
    for want in ("New run", "Open checkpoint…", "Save checkpoint", "Save checkpoint as…", "Quit"):
        assert want in file_texts
    assert any("Export" in t for t in file_texts)
    assert {"File", "View", "Help", "Training"} <= set(win.menu.menus)


def test_closing_with_unsaved_training_asks_and_cancel_keeps_the_window(qtbot, tiny_window, monkeypatch):
    win = tiny_window
    win.confirm_close = True
    win.session.dirty = True
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Cancel)
    assert not win.close()
    assert win.isVisible()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Discard)
    assert win.close()


def test_lazy_window_paints_first_then_builds_the_rest(qtbot, app_settings):
    from app.shell.gui import create_window

    win = create_window(confirm_close=False, restore=False, init=False, lazy=True)
    qtbot.addWidget(win)
    later = [entry.id for entry in TABS[1:]]
    assert win.data_panel is None and all(t in win._pending for t in later)
    frozen = gc.get_freeze_count()
    with qtbot.waitSignal(win.firstPainted, timeout=10_000):
        win.show()
    with qtbot.waitSignal(win.allTabsBuilt, timeout=60_000):
        qtbot.waitUntil(lambda: not win._pending and win.data_panel is not None, timeout=60_000)
    # what stands then (the tabs, their modules) is frozen out of later collections (app.session.garbage)
    assert gc.get_freeze_count() > frozen
    assert win.docks["data"].widget() is win.data_panel
    assert all(win.tabs[t] is win._holders[t].tab for t in later)
    assert "Training" in win.menu.menus
    win.close()


class NotATab(QWidget):
    def __init__(self, session, parent=None):
        super().__init__(parent)


class DataOnlyTab(TabBase):
    """A tab that wants only the Data dock beside it."""

    docks = ("data",)

    def __init__(self, session, parent=None):
        super().__init__(parent)


def _shown(win) -> dict[str, bool]:
    return {key: dock.isVisible() for key, dock in win.docks.items()}


def test_docks_follow_the_tab(qtbot, app_settings):
    tabs = [
        TabEntry("train", "Train", "app.views.train.tab:TrainTab"),
        TabEntry("data-only", "Data only", f"{__name__}:DataOnlyTab"),
        TabEntry("budget", "Budget", "app.views.budget.tab:BudgetTab"),
    ]
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False, tabs=tabs)
    qtbot.addWidget(win)
    win.show()
    before = _shown(win)
    assert before["model"]  # the Model dock is the raised one of the three
    win.tab_widget.setCurrentIndex(2)  # Budget has its own config editor: no second one beside it
    assert not any(_shown(win).values())
    win.tab_widget.setCurrentIndex(1)
    assert _shown(win) == {"data": True, "model": False, "training": False}
    win.tab_widget.setCurrentIndex(0)
    assert _shown(win) == before  # the user's layout comes back as it was
    # settings keep the user's layout, not the one a tab chose
    win.tab_widget.setCurrentIndex(2)
    win.close()
    again = MainWindow(settings=app_settings, confirm_close=False, restore=True, tabs=tabs)
    qtbot.addWidget(again)
    again.show()
    assert again.tab_widget.currentIndex() == 2 and not any(_shown(again).values())
    again.tab_widget.setCurrentIndex(0)
    assert _shown(again) == before
    again.close()
