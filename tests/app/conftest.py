"""Fixtures for the GUI tests only (shared ones, and the reference models, are in ``tests/conftest.py``).

Labs: ``labs`` (the Labs tab on a tiny untrained model of ``task:copy``, one per test module) and
``wait_results`` (forget a page's result, trigger it, wait for the fresh one). ``window_of_one_tab``:
a main window holding one tab at a given size, with the tab and its scroll area, for the "fits a small
screen" tests. Attention: ``attention_session`` (a tiny model on ``builtin:primer``), ``attention_tab``
(the tab on it, shown, with "The head looks back." inspected) and ``make_attention_session(config)``.
"""

from __future__ import annotations

import pytest


def _tiny_labs_session():
    from app.session.session import Session
    from model.config import GPTConfig
    from model.train.settings import TrainSettings

    s = Session()
    s.train_settings = TrainSettings(
        steps=4, batch_size=2, seq_len=16, warmup=1, eval_every=2, eval_batches=1, threads=1, device="cpu"
    )
    s.sample_every = 0
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(GPTConfig(context_length=32, n_layers=2, d_model=16, n_heads=2))
    s.build_model()
    return s


@pytest.fixture
def shipped_starter():
    """The starter model shipped in assets/starter (its folder); the test is skipped when it is not
    built (``make starter``)."""
    from model.io.checkpoint import starter

    if not (starter.STARTER_DIR / "model.safetensors").is_file():
        pytest.skip("no starter model built (make starter)")
    return starter.STARTER_DIR


@pytest.fixture(scope="module")
def labs(qapp):
    """(tab, session): the Labs tab shown on a tiny untrained model, shared by one test module (building
    it takes a few seconds); workers stopped and the tab closed at teardown."""
    from app.shell.gui import make_app
    from app.views.labs.tab import LabsTab

    make_app()
    session = _tiny_labs_session()
    tab = LabsTab(session)
    tab.resize(1400, 850)
    tab.show()
    yield tab, session
    tab.shutdown()
    assert session.shutdown(timeout=30)
    tab.close()
    tab.deleteLater()


def _wait_results(qtbot, page, key: str, trigger=None, timeout: int = 20000):
    """Forget ``page``'s result under ``key``, call ``trigger()`` (default: ``page.refresh``), and wait
    until a fresh result is there and nothing is outstanding; return it."""
    page.results.pop(key, None)
    (trigger or page.refresh)()
    qtbot.waitUntil(lambda: key in page.results and page.idle, timeout=timeout)
    return page.results[key]


@pytest.fixture(scope="session", name="wait_results")
def _wait_results_fixture():
    """``wait_results(qtbot, page, key, trigger=None, timeout=20000)``: see :func:`_wait_results`."""
    return _wait_results


@pytest.fixture
def window_of_one_tab(qtbot, app_settings):
    """``open(tab_id, spec, size=(1280, 760)) -> (window, tab, scroll)``: a main window with only that
    tab (titled as in the registry), shown at ``size`` and laid out; closed (its session stopped) at
    teardown."""
    from app.shell.window import TABS, MainWindow, TabEntry

    opened = []
    titles = {entry.id: entry.title for entry in TABS}

    def open_(tab_id: str, spec: str, size: tuple[int, int] = (1280, 760)):
        entry = TabEntry(tab_id, titles[tab_id], spec)
        win = MainWindow(settings=app_settings, confirm_close=False, restore=False, tabs=[entry])
        qtbot.addWidget(win)
        opened.append(win)
        win.resize(*size)
        win.show()
        scroll = win._holders[tab_id].scroll_area
        qtbot.waitUntil(lambda: win.width() == size[0] and scroll.width() > 0, timeout=5000)
        return win, win.tabs[tab_id], scroll

    yield open_
    for win in opened:
        win.session.shutdown(timeout=30)
        win.close()


#: ms: the machine's two cores are shared with other test runs
ATTENTION_TIMEOUT = 30_000


def _attention_session(config=None):
    """A session on ``builtin:primer`` with ``config`` (default: 2 layers × 2 heads, d 32); no model yet."""
    from app.session.session import Session
    from model.config import GPTConfig
    from model.train.settings import TrainSettings

    s = Session()
    s.set_device("cpu")
    s.set_source("builtin:primer")
    s.train_settings = TrainSettings()
    s.set_config(config or GPTConfig(context_length=48, n_layers=2, d_model=32, n_heads=2))
    return s


@pytest.fixture(scope="session", name="make_attention_session")
def _make_attention_session_fixture():
    """``make_attention_session(config=None)``: see :func:`_attention_session`."""
    return _attention_session


@pytest.fixture
def attention_session(qtbot):
    s = _attention_session()
    s.build_model(seed=1)
    yield s
    s.shutdown(timeout=30)


@pytest.fixture
def attention_tab(qtbot, attention_session):
    from app.views.attention.tab import AttentionTab

    t = AttentionTab(attention_session)
    qtbot.addWidget(t)
    t.resize(1000, 760)
    with qtbot.waitSignal(t.inspected, timeout=ATTENTION_TIMEOUT):
        t.set_prompt("The head looks back.", run=False)
        t.show()
    yield t
    t.shutdown()


@pytest.fixture
def shown(qtbot):
    """``shown(widget, (width, height))``: the widget at that size, shown and exposed (closed after)."""

    def show(widget, size):
        widget.resize(*size)
        qtbot.addWidget(widget)
        widget.show()
        qtbot.waitExposed(widget)
        return widget

    return show
