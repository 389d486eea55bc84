"""The window's menus as a new user meets them: export writes the file named, the file dialogs start
where the last one ended, Open checkpoint takes a file or a folder, and the Help menu."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from PySide6.QtWidgets import QFileDialog

from app.shell.file_actions import FileActions


@pytest.fixture
def tiny_window_tabs():
    return ["train", "attention", "labs"]


def test_svg_export_writes_the_file_the_user_named_with_every_target(
    qtbot, tiny_window, tmp_path, monkeypatch
):
    """The Train tab exports two graphics (curves, attention): both go into the one file chosen."""
    from app.widgets.exporting import write_svg

    win = tiny_window
    win.tab_widget.setCurrentIndex(0)
    targets = win.current_tab().export_targets()
    assert len(targets) == 2
    out = tmp_path / "foo.svg"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(out), "SVG drawing (*.svg)"))
    win.menu.export_action.trigger()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foo.svg"]
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    # one drawing as large as both graphics together, holding what each alone holds
    width, height = (float(v) for v in root.get("viewBox").split()[2:])
    assert width >= max(w.width() for w in targets.values())
    assert height >= max(w.height() for w in targets.values())
    assert width * height > max(w.width() * w.height() for w in targets.values())
    alone = [write_svg(w, tmp_path / "alone" / f"{name}.svg").stat().st_size for name, w in targets.items()]
    assert out.stat().st_size > 0.9 * sum(alone)
    assert str(out) in win.statusBar().currentMessage()


# ---- Open checkpoint: a file or a folder -----------------------------------------------------------
def _accept_choosing(monkeypatch, choose):
    """Make ``CheckpointDialog.exec`` act as a user: ``choose(dialog)`` picks, then the dialog ends."""
    from app.dialogs.checkpoint_dialog import CheckpointDialog

    seen = {}

    def exec_(self):
        seen["start"] = self.directory().absolutePath()
        seen["dialog"] = self
        choose(self)
        return self.result()

    def folders_only(*a, **k):
        raise AssertionError("Open checkpoint used a dialog that picks folders only")

    monkeypatch.setattr(CheckpointDialog, "exec", exec_)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", folders_only)
    return seen


def test_open_checkpoint_takes_a_nanogpt_ckpt_file(
    qtbot, tiny_window, tmp_path, monkeypatch, write_nanogpt, nanogpt_chars
):
    """README: "nanoGPT. Open out-…/ckpt.pt" — the dialog lists files, and the file opens."""
    from PySide6.QtWidgets import QFileDialog

    out = tmp_path / "out-shakespeare-char"
    out.mkdir()
    write_nanogpt(out / "ckpt.pt")
    (out / "input.txt").write_text(nanogpt_chars, encoding="utf-8")

    def choose(dialog):
        assert dialog.testOption(QFileDialog.Option.DontUseNativeDialog)
        assert dialog.fileMode() == QFileDialog.FileMode.ExistingFile
        assert any("*.pt" in f for f in dialog.nameFilters())
        dialog.selectFile(str(out / "ckpt.pt"))
        dialog.accept()

    _accept_choosing(monkeypatch, choose)
    s = tiny_window.session
    with qtbot.waitSignal(s.historyReset, timeout=60_000):
        tiny_window.menu.open_action.trigger()
    assert s.checkpoint_meta["kind"] == "nanogpt" and s.model.config.core.n_layers == 2


def test_open_checkpoint_takes_a_folder_or_a_file_inside_one(qtbot, tiny_window, tmp_path, monkeypatch):
    """An Attention Lab checkpoint folder opens by its config.json, or by 'Open this folder' on the
    folder selected in the list or shown."""
    from app.dialogs.checkpoint_dialog import CheckpointDialog, checkpoint_target

    s = tiny_window.session
    saved = tmp_path / "runs" / "ckpt-a"
    s.save_checkpoint(str(saved))
    assert checkpoint_target(saved / "config.json") == str(saved)
    assert checkpoint_target(saved / "model.safetensors") == str(saved)
    assert checkpoint_target(saved) == str(saved)

    opened = []
    monkeypatch.setattr(FileActions, "open_checkpoint", lambda self, path, **k: opened.append(path))
    for choose in (
        lambda d: (d.selectFile(str(saved / "config.json")), d.accept()),  # a file inside: its folder
        lambda d: (d.setDirectory(str(saved)), d.folder_button.click()),  # the folder shown
    ):
        _accept_choosing(monkeypatch, choose)
        tiny_window.menu.open_action.trigger()
    assert opened == [str(saved), str(saved)]
    # the folder selected in the list (not gone into) is the one 'Open this folder' opens
    dialog = CheckpointDialog(tiny_window, str(saved.parent))
    qtbot.addWidget(dialog)
    dialog.selectFile(str(saved))
    assert dialog.selected_folder() == str(saved)
    dialog.folder_button.click()
    assert dialog.result() == CheckpointDialog.DialogCode.Accepted and dialog.chosen == str(saved)


def test_open_checkpoint_holds_the_weights_as_chosen_and_says_where_the_choice_does_not_apply(
    qtbot, tiny_window, tmp_path, monkeypatch, write_hf_family
):
    """The dialog's Weights choice: a small GGUF kept as stored when asked (by default it is decoded
    once); for our own checkpoint the status bar says the choice does not apply."""
    from app.dialogs.checkpoint_dialog import WEIGHT_CHOICES
    from model.nn.quantized import has_stored
    from tests.gguf_files import write_gguf

    folder = tmp_path / "hf"
    model = write_hf_family(folder, "llama", hidden_size=64, intermediate_size=128, num_attention_heads=4)
    gguf = write_gguf(tmp_path / "m.gguf", model, folder, "Q8_0")
    s = tiny_window.session
    ours = tmp_path / "ours"
    s.save_checkpoint(str(ours))

    def choosing(path, stored):
        def choose(dialog):
            dialog.weights.setCurrentIndex([v for _, v in WEIGHT_CHOICES].index(stored))
            dialog.selectFile(str(path))
            dialog.accept()

        return choose

    _accept_choosing(monkeypatch, choosing(gguf, True))
    with qtbot.waitSignal(s.historyReset, timeout=60_000):
        tiny_window.menu.open_action.trigger()
    assert s.checkpoint_meta["kind"] == "gguf" and has_stored(s.model)

    _accept_choosing(monkeypatch, choosing(ours / "config.json", False))
    with qtbot.waitSignal(s.historyReset, timeout=60_000):
        tiny_window.menu.open_action.trigger()
    said = tiny_window.statusBar().currentMessage()
    assert said.startswith(f"Opened {ours}") and "read into float32" in said


# ---- the folder a dialog starts in ---------------------------------------------------------------
def test_each_dialog_starts_where_the_last_one_of_its_kind_ended(qtbot, tiny_window, tmp_path, monkeypatch):
    """Follow a run folder, Open checkpoint, Export and the History tab's Open start beside the last
    folder chosen for them; a kind's first dialog starts where the last dialog of any kind did, and a
    folder since removed gives way to the nearest one above it, not to the home folder."""
    from model.io.runs.folder import RunWriter

    win = tiny_window
    runs = tmp_path / "runs"
    writer = RunWriter(runs / "demo")
    writer.status("done")
    writer.close()
    starts = []

    def pick(path):
        def fake(parent, caption, start="", *a, **k):
            starts.append(str(start))
            return str(path)

        return fake

    # the first Follow starts where the last dialog of any kind ended (here: an export into runs/)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(runs / "view.png"), ""))
    win.menu.export_action.trigger()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", pick(runs / "demo"))
    win.menu.follow_action.trigger()
    assert starts == [str(runs)] and win.session.is_following
    win.session.follow.stop(wait=True)
    qtbot.waitUntil(lambda: win.session.state == "idle", timeout=10_000)
    win.menu.follow_action.trigger()  # the next one starts beside the folder it followed
    assert starts[-1] == str(runs)
    win.session.follow.stop(wait=True)
    qtbot.waitUntil(lambda: win.session.state == "idle", timeout=10_000)

    # Open checkpoint starts beside the last checkpoint opened (or saved)
    ckpt = tmp_path / "models" / "ckpt-a"
    win.session.save_checkpoint(str(ckpt))
    seen = _accept_choosing(monkeypatch, lambda d: (d.setDirectory(str(ckpt)), d.folder_button.click()))
    with qtbot.waitSignal(win.session.historyReset, timeout=30_000):
        win.menu.open_action.trigger()
    win.menu.open_action.trigger()
    assert seen["start"] == str(ckpt.parent)

    # a folder since removed: the nearest one above it
    gone = tmp_path / "models" / "old" / "deeper"
    gone.mkdir(parents=True)
    win.settings.set_last_dir("run", gone)
    gone.rmdir()
    assert win.settings.last_dir("run") == str(gone.parent)


@pytest.mark.parametrize("tiny_window_tabs", [["train", "history"]])
def test_the_history_dialog_and_its_exports_start_where_the_last_ones_ended(
    qtbot, tiny_window, tmp_path, monkeypatch
):
    from app.views.history.open_dialog import OpenHistoryDialog

    win = tiny_window
    folder = tmp_path / "histories" / "my-run"
    folder.mkdir(parents=True)
    starts = []

    def exec_(self):
        starts.append(self.last_dir)
        self.folder_edit.setText(str(folder))
        self.folder_radio.setChecked(True)
        return False  # cancelled: nothing to open, the folder is not remembered

    monkeypatch.setattr(OpenHistoryDialog, "exec", exec_)
    win.menu.history_action.trigger()

    def exec_open(self):
        starts.append(self.last_dir)
        self.folder_edit.setText(str(folder))
        self.folder_radio.setChecked(True)
        return True

    monkeypatch.setattr(OpenHistoryDialog, "exec", exec_open)
    win.menu.history_action.trigger()  # the folder is no history: the tab says so, and remembers it
    win.menu.history_action.trigger()
    assert starts[1:] == [starts[0], str(folder.parent)]
    # the History tab's CSV and plot exports start in the last export folder
    exports = tmp_path / "exports"
    exports.mkdir()
    win.settings.set_last_dir("export", exports / "x.png")
    asked = []
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", lambda p, c, start, *a, **k: (asked.append(start), ("", ""))[1]
    )
    tab = win.tab("history")
    tab.plot._export_csv_dialog()
    tab.plot._export_plot_dialog()
    assert asked == [str(exports / "history.csv"), str(exports / "history.png")]


# ---- Help ----------------------------------------------------------------------------------------
def _plain(rich: str) -> str:
    from PySide6.QtGui import QTextDocumentFragment

    return " ".join(QTextDocumentFragment.fromHtml(rich).toPlainText().split())


def _shown(dialog) -> str:
    return " ".join(dialog.text().split())


def test_keyboard_shortcuts_lists_what_the_actions_say(qtbot, tiny_window):
    """Help → Keyboard shortcuts reads the window's actions when it opens: a new action is listed."""
    from PySide6.QtGui import QAction, QKeySequence

    win = tiny_window
    win.menu.shortcuts_action.trigger()
    text = _shown(win.menu.help_dialog())
    native = QKeySequence.SequenceFormat.NativeText
    save = QKeySequence(QKeySequence.StandardKey.Save).toString(native)
    for keys, does in (
        ("F5", "Start / continue training"),
        ("F6", "Pause / resume training"),
        ("F7", "Stop training"),
        (save, "Save checkpoint"),
        ("Ctrl+1", "Train tab"),
        ("Ctrl+3", "Labs tab"),
        ("Ctrl+Shift+O", "Get a model"),
        ("F1", "What am I looking at?"),
        ("Ctrl+Return, Ctrl+Enter", "Apply the edited probe prompt"),
    ):
        assert f"{keys} {does}" in text, (keys, does)
    assert "Frobnicate" not in text
    extra = QAction("Frobnicate the heads", win)
    extra.setShortcut(QKeySequence("Ctrl+Alt+K"))
    win.addAction(extra)
    in_menu = QAction("Zoom the grid", win)
    in_menu.setShortcut(QKeySequence("Ctrl+Alt+J"))
    win.menu.menus["View"].addAction(in_menu)
    win.menu.shortcuts_action.trigger()
    text = _shown(win.menu.help_dialog())
    assert "Ctrl+Alt+K Frobnicate the heads window" in text
    assert "Ctrl+Alt+J Zoom the grid View menu" in text
    assert not win.menu.help_dialog().isModal()


def test_f1_explains_the_page_in_view_with_its_own_header(qtbot, tiny_window):
    from PySide6.QtGui import QKeySequence

    win = tiny_window
    assert win.menu.page_help_action.shortcut() == QKeySequence(QKeySequence.StandardKey.HelpContents)
    attention = win.tab("attention")
    shown = {}
    win.show_tab("attention")
    for key in ("heads", "pipeline"):
        page = attention.show_page(key)
        shown[key] = (_shown(win.menu.show_page_help()), _plain(page.blurb), page.title)
    labs = win.tab("labs")
    win.show_tab("labs")
    lab_page = labs.show_page("mask-bug")
    win.menu.page_help_action.trigger()
    shown["lab"] = (_shown(win.menu.help_dialog()), _plain(lab_page.explanation), lab_page.title)
    for key, (text, header, title) in shown.items():
        assert header and header in text, key
        assert title in text
    assert shown["pipeline"][1] not in shown["heads"][0]
    assert _plain(lab_page.notice) in shown["lab"][0]
    # a tab without pages says what the tab is (the README's paragraph about it)
    win.show_tab("train")
    assert "Pick a corpus or a synthetic task" in _shown(win.menu.show_page_help())


def test_readme_sections_open_from_the_help_menu(qtbot, tiny_window, monkeypatch, tmp_path):
    import re
    from pathlib import Path

    import app
    from app.shell import help as help_module

    win = tiny_window
    readme = (Path(app.__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", readme, flags=re.M)
    assert [a.text() for a in win.menu.readme_actions] == headings
    assert {"Quick start", "What is in the window", "Command line", "A model's training history"} <= set(
        headings
    )
    quick = next(a for a in win.menu.readme_actions if a.text() == "Quick start")
    quick.trigger()
    text = win.menu.help_dialog().text()
    assert "make run" in text and "make test" in text and "Command line" not in text
    # a link to another section shows that section
    win.menu.help_dialog()._link(help_module.QUrl("#a-models-training-history"))
    assert "Pythia" in win.menu.help_dialog().text()
    # without the README: one clear line
    monkeypatch.setattr(help_module, "readme_path", lambda: tmp_path / "README.md")
    quick.trigger()
    assert (
        "The README is not installed" in win.menu.help_dialog().text()
        and str(tmp_path) in win.menu.help_dialog().text()
    )


def test_help_shows_the_gpt_in_one_file_and_the_readme_points_to_it(qtbot, tiny_window, monkeypatch):
    """The reading path for learners: Help → The GPT in one file shows model/nn/reference.py's own
    source, and its link opens the README's section that names the same file."""
    import inspect

    import model.nn.reference
    from app.shell import help as help_module

    win = tiny_window
    help_actions = [a.text().replace("&", "") for a in win.menu.help_menu.actions()]
    assert "The GPT in one file" in help_actions
    dialog = win.menu.help_dialog()
    dialog.resize(400, 300)  # narrower than a line of code: the code widens it, within the screen
    win.menu.reference_action.trigger()
    assert 400 < dialog.width() <= dialog.screen().availableGeometry().width()
    text = dialog.text()
    assert "model/nn/reference.py" in text
    assert inspect.getsource(model.nn.reference).strip() in dialog.browser.toPlainText()
    assert not dialog.isModal()
    # the README's section, linked from the dialog and in the README menu, names the same file
    shown: list[str] = []
    monkeypatch.setattr(help_module.HelpDialog, "show_readme", lambda self, title: shown.append(title))
    dialog._link(help_module.QUrl("#reading-the-model"))
    assert shown == ["Reading the model"]
    sections = dict(help_module.read_readme()[0])
    assert "model/nn/reference.py" in sections["Reading the model"]
    assert "Reading the model" in [a.text() for a in win.menu.readme_actions]
