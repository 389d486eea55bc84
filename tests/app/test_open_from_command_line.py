"""`attention-lab MODEL` and `attention-lab --checkpoint MODEL` open the window on that model; a name
that is no command and no model is one line and exit 2 before the window (or Qt) is started."""

from __future__ import annotations

import pytest

from app import main as entry
from app.commands.window import WindowRequest, window_request
from model.config import GPTConfig
from model.io.checkpoint.saved import save_checkpoint
from model.nn.gpt import init_model
from model.text.tokens import CharTokenizer

pytestmark = pytest.mark.usefixtures("shipped_starter")


@pytest.fixture
def saved_model(tmp_path):
    """A tiny checkpoint folder of our own format (3 layers, unlike the starter's 2)."""
    tok = CharTokenizer("abcdefgh ")
    config = GPTConfig(vocab_size=tok.vocab_size, context_length=16, n_layers=3, d_model=16, n_heads=2)
    path = tmp_path / "tiny-run"
    save_checkpoint(path, init_model(config, seed=3), tok)
    return path


@pytest.fixture
def launched(monkeypatch):
    """What ``app.main.main`` would open the window on (the window itself is not started)."""
    calls: list[WindowRequest] = []
    import app.shell.gui

    monkeypatch.setattr(app.shell.gui, "launch", lambda model=None, **_: calls.append(model) or 0)
    return calls


@pytest.mark.parametrize("form", ["positional", "--checkpoint"])
def test_a_model_named_on_the_command_line_opens_the_window_on_it(form, saved_model, launched):
    argv = [str(saved_model)] if form == "positional" else ["--checkpoint", str(saved_model)]
    assert entry.main(argv) == 0
    assert launched == [WindowRequest(str(saved_model))]


def test_a_packaged_model_is_opened_under_its_own_name(launched, smollm2_path):
    assert entry.main(["--checkpoint", "package:SmolLM2-135M-Instruct"]) == 0
    (request,) = launched
    assert request.name == "SmolLM2-135M-Instruct" and request.path == str(smollm2_path)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["trian"], "did you mean 'train'"),
        (["no-such-model.gguf"], "no such file or folder: no-such-model.gguf"),
        (["--checkpoint", "package:NoSuchModel"], "no such packaged model"),
        (["--checkpoint", "/dev/null"], "not a regular file or folder"),
        (["--checkpoint", ""], "path is empty"),
        (["a", "--checkpoint", "b"], "name the model once"),
    ],
)
def test_a_name_that_is_no_command_and_no_model_is_one_line(argv, says, launched, capsys):
    assert entry.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert launched == []  # the window was never opened


def test_keep_stored_goes_with_the_named_model_and_is_refused_without_one(saved_model, launched, capsys):
    assert entry.main([str(saved_model), "--keep-stored"]) == 0
    assert entry.main(["--checkpoint", str(saved_model), "--no-keep-stored"]) == 0
    assert launched == [
        WindowRequest(str(saved_model), stored=True),
        WindowRequest(str(saved_model), stored=False),
    ]
    assert entry.main(["--keep-stored"]) == 2
    err = capsys.readouterr().err
    assert "for a MODEL you name" in err and err.count("\n") == 1 and len(launched) == 2


def test_the_help_says_how_to_open_the_window_on_a_model(capsys):
    assert entry.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "attention-lab [MODEL | --checkpoint MODEL]" in out and "package:NAME" in out
    assert window_request(["--help"]) == 0
    assert "--checkpoint MODEL" in capsys.readouterr().out


def test_the_window_opens_on_the_named_model_after_the_starter(qtbot, app_settings, saved_model):
    from app.shell.gui import create_window

    win = create_window(
        confirm_close=False, restore=False, model=WindowRequest(str(saved_model), "my tiny run")
    )
    qtbot.addWidget(win)
    s = win.session
    s.set_device("cpu")
    # from the first paint, Start says the window is opening the model, not "choose a data source"
    assert win.tabs["train"].plan_label.text() == "Start is disabled: opening my tiny run…"
    with qtbot.waitSignal(win.firstPainted, timeout=10_000):
        win.show()
    qtbot.waitUntil(lambda: s.model is not None and s.model.config.core.n_layers == 3, timeout=60_000)
    assert "starter" not in s.checkpoint_meta and s.checkpoint_meta["name"] == "my tiny run"
    assert s.model.config.core.d_model == 16 and s.tokenizer.vocab_size == 9
    assert win.windowTitle().startswith("tiny-run")  # where Save writes: the folder it came from
    qtbot.waitUntil(lambda: not win._pending, timeout=60_000)
    win.close()


@pytest.mark.slow
def test_a_model_that_cannot_be_read_leaves_the_starter_and_says_why(
    qtbot, app_settings, tmp_path, monkeypatch
):
    from PySide6.QtWidgets import QMessageBox

    from app.shell.gui import create_window

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    shown: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "critical", lambda _w, title, text, *a, **k: shown.append(f"{title}: {text}")
    )
    win = create_window(confirm_close=False, restore=False, model=WindowRequest(str(broken)))
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: bool(shown), timeout=60_000)
    assert "Could not open" in shown[0] and str(broken) in shown[0]
    assert win.session.checkpoint_meta.get("starter")  # the starter is still shown
    qtbot.waitUntil(lambda: not win._pending, timeout=60_000)
    win.close()


@pytest.mark.slow
def test_a_folder_that_holds_no_model_is_one_line_and_exit_2_before_the_window(tmp_path):
    """A folder holding only a symlink to itself is a folder, but no model: the process says so in one
    line and exits 2 without starting the window (a subprocess, as a user runs it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "loop").symlink_to(folder, target_is_directory=True)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "OMP_NUM_THREADS": "1"}
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "app.main", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=60,  # before the check, the window opened and waited on its error dialog
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "holds no model" in proc.stderr and "Traceback" not in proc.stderr
