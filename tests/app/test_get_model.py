"""File → Get a model…: the catalogue, a typed repo, progress, cancel, errors, and the model opened,
against the fake Hub on 127.0.0.1."""

import pytest
from PySide6.QtCore import Qt

TIMEOUT = 30_000
REPO = "tiny/gpt2"


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def _dialog(win):
    win.menu.get_model_action.trigger()
    return win.files.get_model


def test_catalogue_lists_family_and_size_before_downloading(qtbot, tiny_window, fake_hub):
    from model.io.hub import CATALOGUE

    dlg = _dialog(tiny_window)
    assert dlg.table.rowCount() == len(CATALOGUE) >= 9
    names = [dlg.table.item(r, 0).text() for r in range(dlg.table.rowCount())]
    for want in (
        "gpt2",
        "distilgpt2",
        "gpt2-medium",
        "pythia-70m",
        "pythia-160m",
        "SmolLM2-135M",
        "SmolLM2-360M",
        "Qwen2.5-0.5B",
        "TinyLlama-1.1B",
    ):
        assert want in names
    assert not dlg.download_button.isEnabled()  # nothing chosen yet
    dlg.select("pythia-70m")
    assert "GPT-NeoX" in dlg.info.text() and "MiB to download" in dlg.info.text()
    assert dlg.download_button.isEnabled() and not fake_hub.requests  # nothing asked yet


def test_typed_repo_downloads_with_progress_and_opens(qtbot, tiny_window, fake_hub, tiny_gpt2_repo_files):
    win, s = tiny_window, tiny_window.session
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    dlg = _dialog(win)
    qtbot.keyClicks(dlg.repo_edit, REPO)
    assert dlg.chosen().repo_id == REPO
    with qtbot.waitSignal(dlg.lookup_button.clicked):
        dlg.lookup_button.click()
    qtbot.waitUntil(lambda: "on the Hub: model_type gpt2" in dlg.info.text(), timeout=TIMEOUT)
    with qtbot.waitSignal(s.historyReset, timeout=TIMEOUT):
        dlg.download_button.click()
    assert s.checkpoint_meta["kind"] == "hf-gpt2" and s.model.config.core.n_layers == 2
    assert REPO in win.origin_label.text()
    assert dlg.board.get("hub.download").state == "done" and "100%" in dlg.progress_label.text()
    assert not dlg.isVisible()


def test_errors_show_in_the_dialog(qtbot, tiny_window, fake_hub, tiny_gpt2_repo_files):
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    fake_hub.status["down/repo"] = 502
    files = {k: v for k, v in tiny_gpt2_repo_files.items() if k != "model.safetensors"}
    fake_hub.add_repo("old/pickles", {**files, "pytorch_model.bin": b"pickle"})
    dlg = _dialog(tiny_window)
    for repo, says in (
        ("nobody/nothing", "not found on the Hub (404)"),
        ("down/repo", "answered 502"),
        ("old/pickles", "only as PyTorch pickles"),
        (REPO + "@v2", "has no revision 'v2'"),
    ):
        dlg.repo_edit.setText(repo)
        dlg.download_button.click()
        qtbot.waitUntil(lambda: dlg.worker is None and bool(dlg.error_label.text()), timeout=TIMEOUT)
        assert says in dlg.error_label.text()
        assert tiny_window.session.checkpoint_meta.get("kind") != "hf-gpt2"


def test_cancel_stops_the_download_and_opens_nothing(
    qtbot, tiny_window, fake_hub, tiny_gpt2_repo_files, monkeypatch
):
    from huggingface_hub import constants

    from model.io import hub
    from model.io.hub import download

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 256)
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    dlg = _dialog(tiny_window)
    dlg.repo_edit.setText(REPO)
    # hold the transfer inside the weights until the test has pressed Cancel
    import threading

    pressed = threading.Event()
    real_add = download._Tracker.add

    def slow_add(self, n):
        if self.file == "model.safetensors":
            pressed.wait(TIMEOUT / 1000)
        real_add(self, n)

    monkeypatch.setattr(download._Tracker, "add", slow_add)
    dlg.download_button.click()
    qtbot.waitUntil(lambda: bool(fake_hub.gets("model.safetensors")), timeout=TIMEOUT)
    assert dlg.job_bar.busy and not dlg.download_button.isEnabled()
    dlg.job_bar.cancel_button.click()
    pressed.set()
    qtbot.waitUntil(lambda: dlg.worker is None, timeout=TIMEOUT)
    assert "cancelled" in dlg.progress_label.text() and not dlg.error_label.text()
    assert tiny_window.session.checkpoint_meta.get("kind") != "hf-gpt2"
    folder = hub.cached_folder(REPO)
    assert folder is not None and not (folder / "model.safetensors").exists()
    assert dlg.download_button.isEnabled()


def test_typing_a_repo_id_key_by_key_never_raises_and_keeps_every_character(qtbot, tiny_window, fake_hub):
    """Every prefix of a repo id passes through the look-up while typing: 'openai-', 'EleutherAI/',
    'owner/name@' are not repo ids yet, and huggingface_hub would raise on them. The info line says so
    quietly; no exception reaches the event loop (pytest-qt fails the test on one), no dialog opens,
    and the field keeps every key."""
    dlg = _dialog(tiny_window)
    seen: dict[str, str] = {}
    for repo in ("openai-community/gpt2", "a//b", "-x", "x--y.", "owner/name@", "EleutherAI/pythia-70m"):
        dlg.repo_edit.clear()
        typed = ""
        for ch in repo:
            qtbot.keyClicks(dlg.repo_edit, ch)
            typed += ch
            assert dlg.repo_edit.text() == typed
            seen[typed] = dlg.info.text()
    partials = ("openai-", "openai-community/", "a//b", "-x", "x--y.", "owner/name@", "EleutherAI/pythia-")
    for partial in partials:
        assert "not a repo id yet" in seen[partial], (partial, seen[partial])
    assert "not a repo id yet" not in seen["openai-community/gpt2"]
    assert "GPT-2" in seen["openai-community/gpt2"] and "124M parameters" in seen["openai-community/gpt2"]
    # the field ends on the last id: the catalogue's Pythia, described, and Download allowed
    assert dlg.repo_edit.text() == "EleutherAI/pythia-70m"
    assert "GPT-NeoX" in dlg.info.text() and "MiB to download" in dlg.info.text()
    assert dlg.chosen().repo_id == "EleutherAI/pythia-70m" and dlg.download_button.isEnabled()
    qtbot.keyClicks(dlg.repo_edit, "@")
    assert "nothing after '@'" in dlg.info.text() and not dlg.download_button.isEnabled()
    assert not fake_hub.requests  # typing asks the Hub nothing


def test_the_keyboard_starts_in_the_repo_field_and_tab_leaves_the_catalogue(qtbot, tiny_window, fake_hub):
    dlg = _dialog(tiny_window)
    dlg.activateWindow()
    qtbot.waitUntil(dlg.repo_edit.hasFocus, timeout=5000)  # typing a repo id needs no click first
    dlg.table.setFocus()
    qtbot.waitUntil(dlg.table.hasFocus, timeout=5000)
    qtbot.keyClick(dlg.table, Qt.Key.Key_Tab)
    assert not dlg.table.hasFocus()  # Tab leaves the table instead of walking its cells


def test_one_dialog_is_reused_and_closing_the_window_shuts_it_down(qtbot, tiny_window, fake_hub, monkeypatch):
    """Get a model… twice is one dialog (not one more on every use), and the window's closeEvent
    shuts that dialog's workers down."""
    from app.dialogs.get_model import GetModelDialog

    first = _dialog(tiny_window)
    first.reject()
    second = _dialog(tiny_window)
    assert second is first and second.isVisible()
    assert len(tiny_window.findChildren(GetModelDialog)) == 1
    shut: list[GetModelDialog] = []
    real = GetModelDialog.shutdown
    monkeypatch.setattr(
        GetModelDialog, "shutdown", lambda self, *a, **k: (shut.append(self), real(self, *a, **k))
    )
    tiny_window.close()
    assert shut == [first]
