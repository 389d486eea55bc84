"""The window's bad-input catalogue: each case gets a clear message in the window, the app stays alive (a
later action still works) and nothing already saved is touched (file bytes and mtimes compared).

Cases: opening a corrupt, hostile (pickle payloads that must never run, a lying config.json) or huge
checkpoint; a model config that does not fit memory (New run and Start refused in one line); a 100 KB
prompt and unusual Unicode in the Attention tab's prompt and the Generate box; a read-only save folder;
closing the window while a save is under way.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

#: Resident memory a refused open may add: far below what the refused models would need.
MAX_GROWTH = 300 * 1024**2


@pytest.fixture
def tiny_window_tabs():
    return ["train", "attention"]


@pytest.fixture
def errors(monkeypatch):
    """The error dialogs the window shows, as (title, message): recorded instead of blocking."""
    from PySide6.QtWidgets import QMessageBox

    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(
        QMessageBox, "critical", lambda parent, title, text, *a, **k: shown.append((title, text))
    )
    return shown


def snapshot(*folders: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folders``: its bytes and mtime (ns)."""
    out = {}
    for folder in folders:
        for p in sorted(Path(folder).rglob("*")):
            if p.is_file():
                out[str(p)] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_clear_line(text: str) -> str:
    """The message's reason line (the dialogs put the path first): one line, no traceback."""
    assert "Traceback" not in text and 'File "' not in text, text
    reason = [line for line in text.splitlines() if line.strip()][-1]
    assert 10 < len(reason) < 600, reason
    return reason


def alive(win, qtbot) -> None:
    """A later action still works: the probe of the (unchanged) model is recomputed and drawn."""
    s = win.session
    with qtbot.waitSignal(s.traceUpdated, timeout=20000):
        s.probe.refresh()
    assert s.latest_frame is not None


class Payload:
    """A pickle that would create ``marker`` when unpickled."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


# ---- opening checkpoints ------------------------------------------------------------------------
@pytest.fixture
def saved(tiny_window, tmp_path, write_hf_gpt2_skeleton):
    """The window and a checkpoint it saved (``good``), with broken copies beside it."""
    import torch

    win = tiny_window
    good = tmp_path / "good"
    win.session.save_checkpoint(good)
    marker = tmp_path / "PAYLOAD-RAN"

    corrupt = tmp_path / "corrupt"
    shutil.copytree(good, corrupt)
    data = bytearray((corrupt / "model.safetensors").read_bytes())
    data[8:64] = b"\xff" * 56  # the header's JSON becomes garbage
    (corrupt / "model.safetensors").write_bytes(bytes(data))

    truncated = tmp_path / "truncated"
    shutil.copytree(good, truncated)
    (truncated / "model.safetensors").write_bytes((good / "model.safetensors").read_bytes()[:100])

    lying = tmp_path / "lying"
    shutil.copytree(good, lying)
    cfg = json.loads((lying / "config.json").read_text())
    (lying / "config.json").write_text(json.dumps({**cfg, "d_model": 8192}))

    huge = tmp_path / "huge"
    shutil.copytree(good, huge)
    (huge / "config.json").write_text(json.dumps({**cfg, "n_layers": 10**7}))

    hf_pickle = write_hf_gpt2_skeleton(tmp_path / "hf_pickle")  # its weights: a pickle payload
    torch.save({"wte.weight": Payload(marker)}, hf_pickle / "pytorch_model.bin")

    nano_pickle = tmp_path / "nano_pickle"  # a nanoGPT ckpt.pt payload
    nano_pickle.mkdir()
    torch.save({"model": Payload(marker), "model_args": {"n_layer": 1}}, nano_pickle / "ckpt.pt")

    garbage = tmp_path / "garbage"  # not a checkpoint at all
    garbage.mkdir()
    (garbage / "notes.txt").write_text("hello")
    return win, good, marker


CASES = {
    "corrupt header": "corrupt",
    "truncated weights": "truncated",
    "lying config.json": "lying",
    "huge config.json": "huge",
    "pickle in pytorch_model.bin": "hf_pickle",
    "pickle in ckpt.pt": "nano_pickle",
    "not a checkpoint": "garbage",
    "missing folder": "nowhere",
}


def test_a_bad_checkpoint_is_refused_in_one_line_and_nothing_changes(saved, errors, qtbot):
    win, good, marker = saved
    s = win.session
    model, step, title = s.model, s.step, win.windowTitle()
    before = snapshot(good.parent)
    for case, name in CASES.items():  # one window for all (a window costs a second or two)
        errors.clear()
        mem = rss()
        assert win.files.open_checkpoint(str(good.parent / name)) is False, case
        assert rss() - mem < MAX_GROWTH, case
        assert len(errors) == 1 and errors[0][0] == "Could not open checkpoint", (case, errors)
        reason = one_clear_line(errors[0][1])
        if case.startswith("huge"):
            assert "n_layers=10000000" in reason, reason
        if case.startswith("lying"):
            assert "does not match" in reason and "does not describe these weights" in reason, reason
        assert not marker.exists(), f"{case}: a pickle payload ran"
        assert s.model is model and s.step == step, case  # the session is unchanged
        assert snapshot(good.parent) == before, case  # nothing on disk touched
        assert win.windowTitle() == title, case
    alive(win, qtbot)
    assert win.files.open_checkpoint(str(good)) is True  # and a good one still opens
    assert errors == [] or len(errors) == 1


# ---- a config that does not fit memory ----------------------------------------------------------
def test_a_config_too_large_for_memory_is_refused_by_new_run_and_start(tiny_window, errors, qtbot):
    from model.config import GPTConfig

    win = tiny_window
    s = win.session
    train = win.tab("train")
    model, history = s.model, list(s.history)
    huge = GPTConfig(context_length=32, n_layers=4096, d_model=8192, n_heads=8)
    win.config_panel.set_config(huge)
    assert win.config_panel.valid and s.config.core.d_model == 8192
    mem = rss()
    win.files.new_run()  # File → New run builds the config: refused before allocating
    assert len(errors) == 1
    reason = one_clear_line(errors[0][1])
    assert "needs about" in reason and "may be used" in reason
    # in the window's words: the panel and the value to lower, no flag and no environment variable
    assert "Model panel: lower" in reason and "--" not in reason and "ATTENTION_LAB" not in reason
    assert s.model is model
    # Start: disabled before it is pressed, the reason in the Train tab's status line, nothing cleared
    assert not train.start_button.isEnabled()
    train.start_button.click()
    assert not s.is_training
    assert "Start is disabled" in train.plan_label.text() and "needs about" in train.plan_label.text()
    assert s.history == history
    assert rss() - mem < MAX_GROWTH
    # the panel says so beside the fields
    assert "does not fit" in win.config_panel.summary.text()
    alive(win, qtbot)


# ---- prompts --------------------------------------------------------------------------------------
UNUSUAL = {
    "100 KB": "the head looks back " * 5120,
    "combining marks": "e\u0301e\u0301 a\u0308\u0308\u0308 n\u0303",
    "right to left": "\u05e9\u05dc\u05d5\u05dd \u202eabc\u202c \u0645\u0631\u062d\u0628\u0627",
    "zero-width joiners": "a\u200db\u200cc \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "NUL": "ab\x00cd",
    "lone surrogate": "ab\ud800cd",
    "only spaces": "   ",
}


@pytest.fixture(params=["task:copy", "bytes"])
def prompt_window(request, tiny_window):
    """The tiny window on ``task:copy`` (12 tokens: most text is refused by the vocabulary) or on bytes
    (every string encodes, so the long and unusual ones reach the model)."""
    if request.param == "bytes":
        from model.text.sources import resolve_source
        from model.text.tokens import ByteTokenizer

        s = tiny_window.session
        s.source = resolve_source("builtin:primer", tokenizer=ByteTokenizer())
        s.source_spec = "builtin:primer"
        s.build_model()
        assert s.tokenizer.vocab_size == 256
    return tiny_window, request.param


def _attention_outcome(tab, qtbot, text: str) -> tuple[str, str]:
    """Run ``text`` in the Attention tab: ("inspected", status) or ("failed", message)."""
    got: dict[str, str] = {}
    tab.inspected.connect(lambda res: got.setdefault("inspected", tab.prompt_bar.status_label.text()))
    tab.failed.connect(lambda msg: got.setdefault("failed", msg))
    tab.set_prompt(text, run=False)
    tab.run_inspection()
    qtbot.waitUntil(lambda: bool(got), timeout=30000)
    return next(iter(got.items()))


def test_unusual_prompts_in_the_attention_tab(prompt_window, qtbot):
    win, kind = prompt_window
    tab = win.tab("attention")
    win.tab_widget.setCurrentIndex(1)
    assert tab.wait_ready(60)
    outcomes = {}
    for case, text in UNUSUAL.items():
        kind, message = _attention_outcome(tab, qtbot, text)
        outcomes[case] = (kind, message)
        if kind == "failed":
            one_clear_line(message)
        else:
            assert tab.inspection.T <= win.session.model.config.core.context_length, case
        assert _attention_outcome(tab, qtbot, "abcabc")[0] == "inspected", case  # a later edit still works
    if kind == "bytes":
        assert outcomes["100 KB"] == ("inspected", outcomes["100 KB"][1]), outcomes  # cut to the context
        assert "tokens were left out" in outcomes["100 KB"][1]  # and the status says so


def test_a_prompt_too_large_for_memory_is_cut_to_fit_or_refused_with_the_numbers(
    tiny_window, qtbot, monkeypatch
):
    from model.budget import sizing
    from model.interp.plan import held_need, streamed_need
    from model.text.sources import resolve_source
    from model.text.tokens import ByteTokenizer

    win, s = tiny_window, tiny_window.session
    s.source = resolve_source("builtin:primer", tokenizer=ByteTokenizer())
    s.source_spec = "builtin:primer"
    s.build_model()
    tab = win.tab("attention")
    win.tab_widget.setCurrentIndex(1)
    assert tab.wait_ready(60)
    cfg = s.model.config
    half = cfg.core.context_length // 2

    def prompt_need(T):  # the tab holds the patterns or streams them, whichever fits
        return min(held_need(cfg, T).total, streamed_need(cfg, T).total)

    budget = (prompt_need(half) + prompt_need(half + 1)) // 2  # exactly half fits
    monkeypatch.setattr(sizing, "usable_bytes", lambda device="cpu": budget)
    kind, status = _attention_outcome(tab, qtbot, "the head looks back " * cfg.core.context_length)
    assert kind == "inspected" and tab.inspection.T == half, (kind, status)
    assert tab.inspection.weights.shape[-1] == half
    assert f"{cfg.core.context_length - half} more tokens were left out to fit in memory" in status, status
    kind, status = _attention_outcome(tab, qtbot, "x" * (half + 3))  # within the context: only memory
    assert kind == "inspected" and tab.inspection.T == half, (kind, status)
    assert "The first 3 tokens were left out to fit in memory" in status, status

    monkeypatch.setattr(sizing, "usable_bytes", lambda device="cpu": prompt_need(1) - 1)
    kind, message = _attention_outcome(tab, qtbot, "abcabc")
    assert kind == "failed" and "even for one token" in one_clear_line(message), message

    monkeypatch.undo()
    kind, status = _attention_outcome(tab, qtbot, "abcabc")
    assert kind == "inspected" and tab.inspection.T == 6 and "memory" not in status, status


def test_unusual_prompts_in_the_generate_box(prompt_window, qtbot):
    win, _ = prompt_window
    box = win.tab("train").generate_box
    box.max_tokens.setValue(4)
    for case, text in UNUSUAL.items():
        box.prompt.setText(text)
        box.generate(seed=0)
        qtbot.waitUntil(lambda: box.worker is None, timeout=30000)
        out = box.output.toPlainText()
        assert "Traceback" not in out, case
        if out.startswith("Cannot generate:") or "[generation failed" in out:
            one_clear_line(out)
        else:
            assert len(out) >= len(text), case
        box.prompt.setText("abc")  # a later generation still works
        box.generate(seed=0)
        qtbot.waitUntil(lambda: box.worker is None, timeout=30000)
        assert box.output.toPlainText().startswith("abc"), case


# ---- saving ----------------------------------------------------------------------------------------
def test_a_read_only_save_folder_is_refused_and_the_old_checkpoint_kept(
    tiny_window, errors, tmp_path, monkeypatch
):
    from PySide6.QtWidgets import QFileDialog

    win = tiny_window
    s = win.session
    good = tmp_path / "good"
    s.save_checkpoint(good)
    before = snapshot(good)
    s.dirty = True
    target = "/proc/attention-lab-save"  # a read-only filesystem, even for root
    if os.geteuid() != 0:  # and a folder without write permission
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        target = str(locked / "ckpt")
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (target, ""))
    assert win.files.save_checkpoint_as() is False
    assert len(errors) == 1 and errors[0][0] == "Could not save checkpoint"
    assert "read-only or no permission" in one_clear_line(errors[0][1])
    assert not Path(target).exists()
    assert s.checkpoint_path == str(good) and s.dirty  # still unsaved
    assert snapshot(good) == before
    assert win.files.save_checkpoint() is True  # File → Save to the old place still works


def test_a_read_only_save_folder_while_training_is_refused_at_once(tiny_window, errors, qtbot):
    win = tiny_window
    s = win.session
    s.train_settings = s.train_settings.replace(steps=400)
    win.train_settings_panel.set_settings(s.train_settings)
    with qtbot.waitSignal(s.eventsAppended, timeout=30000):
        win.tab("train").start_button.click()
    assert win.files.save_to("/proc/attention-lab-save") is False
    assert "read-only or no permission" in one_clear_line(errors[0][1])
    assert s.is_training  # the run goes on
    with qtbot.waitSignal(s.eventsAppended, timeout=30000):
        pass
    s.stop_training()
    qtbot.waitUntil(lambda: not s.is_training, timeout=30000)


def test_closing_the_window_mid_save_leaves_a_whole_checkpoint(tiny_window, qtbot, tmp_path):
    from model.io.checkpoint.saved import load_checkpoint

    win = tiny_window
    s = win.session
    older = tmp_path / "older"
    s.save_checkpoint(older)
    before = snapshot(older)
    s.train_settings = s.train_settings.replace(steps=400)
    win.train_settings_panel.set_settings(s.train_settings)
    with qtbot.waitSignal(s.eventsAppended, timeout=30000):
        win.tab("train").start_button.click()
    target = tmp_path / "mid"
    s.save_checkpoint(target)  # the worker writes it between two steps…
    win.close()  # …while the window closes at once
    assert not s.is_training
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # no half-written temporary folder
    if target.exists():  # written before the stop, then whole
        ckpt = load_checkpoint(target)
        assert ckpt.model.config.core.n_layers == s.model.config.core.n_layers
    assert snapshot(older) == before
