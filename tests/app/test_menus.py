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
