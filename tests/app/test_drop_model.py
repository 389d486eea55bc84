"""A model file dropped on the window opens, as File → Open would: here a tiny Llama converted to a
Q8_0 GGUF file as llama.cpp converts it (tests/gguf_files.py); the status bar names its quantization
and its tooltip how each kind of tensor was stored. What is not one local path is not accepted."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


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


@pytest.fixture
def tiny_gguf(tmp_path, write_hf_family):
    from tests.gguf_files import write_gguf

    folder = tmp_path / "hf"
    folder.mkdir()
    model = write_hf_family(folder, "llama", hidden_size=64, intermediate_size=128, num_hidden_layers=3)
    return write_gguf(tmp_path / "tiny.Q8_0.gguf", model, folder, "Q8_0")


def test_a_dropped_gguf_file_opens_and_says_it_is_quantized(qtbot, tiny_window, tiny_gguf):
    win = tiny_window
    assert win.acceptDrops()
    mime = _mime(str(tiny_gguf))
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
    assert (cfg.core.n_layers, cfg.attention.n_heads, cfg.kv_heads, cfg.core.d_model) == (3, 4, 2, 64)
    assert "quantized weights Q8_0" in win.origin_label.text()
    assert "attn_q: Q8_0 (3 layers)" in win.origin_label.toolTip()


def test_what_is_not_one_local_file_is_not_accepted(tiny_window, tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    assert not _enter(tiny_window, _mime(str(a), str(b)))
    assert not _enter(tiny_window, _mime("https://example.org/model.gguf", web=True))
    assert not _enter(tiny_window, QMimeData())


def test_a_model_with_its_own_vocabulary_is_probed_with_text_not_the_datas_default(
    qtbot, tiny_window, tiny_gguf
):
    """The window's data is a synthetic task (its default probe prompt: the task's own symbols); a
    pretrained model opened over it is probed with plain text, and a prompt the user typed is kept."""
    from model.text.sources import FALLBACK_PROMPTS

    s = tiny_window.session
    task_prompt = s.probe_prompt
    assert task_prompt == s.source.default_prompt
    s.load_checkpoint(tiny_gguf)
    assert s.probe_prompt == FALLBACK_PROMPTS[0] != task_prompt
    s.probe.set("a prompt of my own")
    s.load_checkpoint(tiny_gguf)
    assert s.probe_prompt == "a prompt of my own"


def test_an_opened_model_is_frozen_out_of_later_collections_and_still_freed(qtbot, tiny_window, tiny_gguf):
    """Opening a model ends with a collection and a freeze (app.session.garbage.settle_garbage): a later full
    collection no longer walks the model's objects, and the model still goes when replaced."""
    import gc
    import weakref

    s = tiny_window.session
    frozen = gc.get_freeze_count()
    s.load_checkpoint(tiny_gguf)
    assert gc.get_freeze_count() > frozen
    first = weakref.ref(s.model)
    s.load_checkpoint(tiny_gguf)  # replaces it: reference counting frees the frozen model
    # once the jobs that may read it (the first model's idle probe, superseded: it stops at its next
    # block) ran and were delivered; then at once, however slow the machine (the compute thread keeps
    # nothing of a job it ran)
    qtbot.waitUntil(lambda: s.compute.idle, timeout=60_000)
    assert first() is None
