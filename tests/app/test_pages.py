"""The one page protocol (``app.views.page``): its shared helpers, and every tab's pages following it
(built, prepared for a screenshot, and naming what File → Export writes)."""

import pytest
from PySide6.QtWidgets import QWidget

from app.views.page import Page, bring_into_view, page_targets, screenshot_steps


class FakePage:
    """A page that records what was done to it."""

    title, key = "Fake", "fake"

    def __init__(self, log: list, stale: bool = True):
        self.log, self.stale = log, stale

    def ensure_built(self):
        self.log.append("build")

    def refresh(self):
        self.log.append("refresh")
        self.stale = False

    def clear(self):
        self.log.append("clear")

    def export_targets(self):
        return {"plot": "widget"}

    def prepare_screenshot(self):
        self.log.append("prepare")


def test_the_protocol_is_checked_by_isinstance():
    assert isinstance(FakePage([]), Page)

    class NoScreenshot:
        title, key, stale = "x", "x", False

        def ensure_built(self): ...

        def refresh(self): ...

        def clear(self): ...

        def export_targets(self): ...

    assert not isinstance(NoScreenshot(), Page)


def test_bring_into_view_redraws_only_a_stale_page():
    log = []
    page = FakePage(log, stale=True)
    bring_into_view(page)
    assert log == ["build", "refresh"] and not page.stale
    bring_into_view(page)
    assert log == ["build", "refresh", "build"]  # fresh: built (a no-op once built), not redrawn


def test_page_targets_prefix_the_names_and_build_the_page():
    log = []
    assert page_targets(None, "x ") == {}
    assert page_targets(FakePage(log), "lab ") == {"lab plot": "widget"}
    assert log == ["build"]


def test_screenshot_steps_prepare_then_show_then_settle():
    log = []
    pages = {"a": FakePage(log), "b": FakePage(log)}
    steps = screenshot_steps(
        ["b", "a"],
        pages.__getitem__,
        lambda key: log.append(f"show {key}"),
        prefix="tab-",
        before=lambda: log.append("before"),
        settle=lambda page: log.append(f"settle {page is pages['b']}"),
    )
    assert [name for name, _ in steps] == ["tab-b", "tab-a"]
    assert log == []  # nothing runs until a step is taken
    steps[0][1]()
    assert log == ["before", "build", "prepare", "show b", "settle True"]


@pytest.fixture(scope="module")
def paged_window(qapp, tmp_path_factory):
    """A window with the tabs that have pages (Attention, Labs, Budget) on a tiny untrained model."""
    from app.session.settings import AppSettings
    from app.shell.gui import make_app
    from app.shell.window import TABS, MainWindow
    from model.config import GPTConfig

    make_app()
    settings = AppSettings(tmp_path_factory.mktemp("settings") / "settings.ini")
    tabs = [entry for entry in TABS if entry.id in ("attention", "labs", "compare", "budget")]
    win = MainWindow(settings=settings, confirm_close=False, restore=False, tabs=tabs)
    s = win.session
    s.set_device("cpu")
    assert win.data_panel.choose("task:copy")
    win.config_panel.set_config(GPTConfig(context_length=32, n_layers=2, d_model=16, n_heads=2))
    s.build_model()
    win.resize(1280, 760)
    win.show()
    yield win
    for tab in win.tabs.values():
        tab.shutdown()
    s.shutdown(timeout=30)
    win.close()
    win.deleteLater()


def tab_pages(tab) -> list:
    """Every page of ``tab`` (the Labs tab builds its pages on first use)."""
    if hasattr(tab, "classes"):
        return [tab.page(slug) for slug in tab.classes]
    return list(tab.pages.values())


@pytest.mark.slow
@pytest.mark.parametrize("tab_id", ["attention", "labs", "compare", "budget"])
def test_every_page_follows_the_protocol(paged_window, qtbot, tab_id):
    tab = paged_window.tabs[tab_id]
    paged_window.show_tab(tab_id)
    pages = tab_pages(tab)
    assert pages
    for page in pages:
        assert isinstance(page, Page), type(page).__name__
        assert page.title and page.key, type(page).__name__
        page.ensure_built()
        page.prepare_screenshot()
        targets = page.export_targets()
        assert all(isinstance(w, QWidget) for w in targets.values()), page.key
        # the tab's File → Export hook is the page in view's targets
        tab.show_page(page.key)
        names = set(tab.export_targets())
        assert len(names) == len(targets) and all(n.endswith(tuple(targets)) for n in names), page.key
    keys = [page.key for page in pages]
    assert len(set(keys)) == len(keys)
    shots = [name for name, _ in tab.screenshot_pages()]
    offered = getattr(tab, "offered_pages", lambda: pages)()  # (Attention: Experts only for an MoE)
    assert len(shots) == len(offered) and all(any(n.endswith(k) for k in keys) for n in shots)
    tab.shutdown()  # the training comparisons that prepare_screenshot started
    qtbot.waitUntil(lambda: all(getattr(p, "idle", True) for p in pages), timeout=60000)
