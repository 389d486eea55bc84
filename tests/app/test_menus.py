"""The window's menus as a new user meets them: export writes the file named, the file dialogs start
where the last one ended, Open checkpoint takes a file or a folder, and the Help menu."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from PySide6.QtWidgets import QFileDialog


@pytest.fixture
def tiny_window_tabs():
    return ["Train", "Attention", "Labs"]


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
    win.export_action.trigger()
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
    from app.checkpoint_dialog import CheckpointDialog

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
        tiny_window.open_action.trigger()
    assert s.checkpoint_meta["kind"] == "nanogpt" and s.model.config.n_layers == 2


def test_open_checkpoint_takes_a_folder_or_a_file_inside_one(qtbot, tiny_window, tmp_path, monkeypatch):
    """An Attention Lab checkpoint folder opens by its config.json, or by 'Open this folder' on the
    folder selected in the list or shown."""
    from app.checkpoint_dialog import CheckpointDialog, checkpoint_target

    s = tiny_window.session
    saved = tmp_path / "runs" / "ckpt-a"
    s.save_checkpoint(str(saved))
    assert checkpoint_target(saved / "config.json") == str(saved)
    assert checkpoint_target(saved / "model.safetensors") == str(saved)
    assert checkpoint_target(saved) == str(saved)

    opened = []
    monkeypatch.setattr(type(tiny_window), "open_checkpoint", lambda self, path, **k: opened.append(path))
    for choose in (
        lambda d: (d.selectFile(str(saved / "config.json")), d.accept()),  # a file inside: its folder
        lambda d: (d.setDirectory(str(saved)), d.folder_button.click()),  # the folder shown
    ):
        _accept_choosing(monkeypatch, choose)
        tiny_window.open_action.trigger()
    assert opened == [str(saved), str(saved)]
    # the folder selected in the list (not gone into) is the one 'Open this folder' opens
    dialog = CheckpointDialog(tiny_window, str(saved.parent))
    qtbot.addWidget(dialog)
    dialog.selectFile(str(saved))
    assert dialog.selected_folder() == str(saved)
    dialog.folder_button.click()
    assert dialog.result() == CheckpointDialog.DialogCode.Accepted and dialog.chosen == str(saved)
