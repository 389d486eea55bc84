"""The GUI's PNG and SVG exports (File → Export, the tabs' own export buttons) go through the project's
one writer (:func:`model.atomic.write_atomic`): a write that fails on the way (here a real ``EFBIG``
from a 1 KB soft file-size limit, ``SIGXFSZ`` ignored) is one :class:`~model.atomic.WriteError` line
naming the file, and the file that was there before is byte for byte as it was, no temporary left."""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.shell.file_actions import export_widget_targets
from app.widgets.exporting import write_png, write_svg, write_svg_group
from model.atomic import WriteError
from tests.app.test_budget_tab import session, tab

__all__ = ["session", "tab"]  # the Budget tab's fixtures

LIMIT = 1024
OLD = b"the export the user kept\n"


@contextlib.contextmanager
def file_size_limit(limit: int = LIMIT) -> Iterator[None]:
    """This process may write no file past ``limit`` bytes (the soft limit only, restored after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)


@pytest.fixture
def panel(shown) -> QWidget:
    """Two labels in a widget, drawn larger than the limit as PNG and as SVG."""
    w = QWidget()
    lay = QVBoxLayout(w)
    for i in range(2):
        lab = QLabel(f"head {i}: " + "attention " * 40, w)
        lab.setWordWrap(True)
        lay.addWidget(lab)
    return shown(w, (640, 400))


def _writers(panel: QWidget):
    labels = panel.findChildren(QLabel)
    return {
        "png": (".png", lambda p: write_png(panel, p)),
        "svg": (".svg", lambda p: write_svg(panel, p)),
        "svg group": (".svg", lambda p: write_svg_group(panel, labels, p)),
        "File → Export PNG": (".png", lambda p: export_widget_targets(panel, str(p))),
        "File → Export SVG": (".svg", lambda p: export_widget_targets(panel, str(p))),
    }


@pytest.mark.parametrize("kind", ["png", "svg", "svg group", "File → Export PNG", "File → Export SVG"])
def test_a_failed_export_is_one_line_and_keeps_the_old_file(panel, tmp_path, kind):
    suffix, write = _writers(panel)[kind]
    path = tmp_path / f"heads{suffix}"
    path.write_bytes(OLD)
    with file_size_limit(), pytest.raises(WriteError) as err:
        write(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message, message
    assert "File too large" in message and "file-size limit" in message, message
    assert path.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left beside it


@pytest.mark.parametrize("kind", ["png", "svg", "svg group"])
def test_an_export_replaces_the_old_file_whole(panel, tmp_path, kind):
    suffix, write = _writers(panel)[kind]
    path = tmp_path / f"heads{suffix}"
    path.write_bytes(OLD)
    assert write(path) == path
    data = path.read_bytes()
    assert len(data) > LIMIT and data != OLD
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:2000]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_an_export_into_a_new_folder_makes_it(panel, tmp_path):
    path = tmp_path / "new" / "folder" / "heads.png"
    assert write_png(panel, Path(path)).read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("suffix", [".csv", ".md"])
def test_a_failed_budget_table_export_keeps_the_old_file(tab, tmp_path, suffix):
    path = tmp_path / f"budget{suffix}"
    path.write_bytes(OLD)
    with file_size_limit(64), pytest.raises(WriteError) as err:
        tab.export_table(path)
    assert "\n" not in str(err.value) and "File too large" in str(err.value)
    assert path.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    tab.export_table(path)
    assert path.read_text(encoding="utf-8") != OLD.decode() and "token embedding" in path.read_text(
        encoding="utf-8"
    )
