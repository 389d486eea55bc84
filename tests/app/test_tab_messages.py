"""Tabs ask; they do not reach: a tab's request of another is a typed message on the session's hub
(``app.session.messages``), answered by the tab it names by a stable id, and no view finds another
tab through the window."""

from __future__ import annotations

import ast
from pathlib import Path

from app.session.messages import REQUESTS, InspectPrompt, ask
from app.shell.window import TABS, MainWindow, TabEntry
from app.views.tab import TabBase

VIEWS = Path(__file__).resolve().parents[2] / "app" / "views"


class Quiet(TabBase):
    """A tab that answers nothing."""

    def __init__(self, session, parent=None):
        super().__init__(parent)


class Listening(TabBase):
    """A tab that answers :class:`InspectPrompt`."""

    def __init__(self, session, parent=None):
        super().__init__(parent)
        self.heard: list[InspectPrompt] = []
        self.listen(session.hub, InspectPrompt, self.heard.append)


def test_every_request_names_a_tab_of_the_registry_by_its_id():
    ids = [entry.id for entry in TABS]
    assert len(set(ids)) == len(ids)
    assert REQUESTS and all(request.tab in ids for request in REQUESTS)


def test_a_destroyed_tab_no_longer_hears_requests(qtbot, app_settings):
    from app.session.session import Session

    session = Session()
    tab = Listening(session)
    assert ask(session.hub, InspectPrompt("a b c")) and tab.heard == [InspectPrompt("a b c")]
    heard = tab.heard
    tab.deleteLater()
    # ``tab`` (the Python object) is still referenced here: the widget's end ends the subscription
    qtbot.waitUntil(lambda: session.hub.receivers(InspectPrompt) == 0, timeout=5000)
    assert not ask(session.hub, InspectPrompt("d e f"))
    assert heard == [InspectPrompt("a b c")]
    session.shutdown()


def test_a_request_for_a_tab_not_built_yet_builds_it_and_brings_it_forward(qtbot, app_settings):
    attention_entry = next(entry for entry in TABS if entry.id == "attention")
    tabs = [TabEntry("quiet", "Quiet", f"{__name__}:Quiet"), attention_entry]
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False, tabs=tabs, lazy=True)
    qtbot.addWidget(win)
    assert "attention" in win._pending and win.current_id() == "quiet"
    assert ask(win.session.hub, InspectPrompt("the cat sat on the mat"))
    attention = win.tabs["attention"]
    assert "attention" not in win._pending and attention.prompt() == "the cat sat on the mat"
    assert win.current_id() == "attention" and win.current_tab() is attention
    win.close()


#: what the window offers for finding or showing its tabs (app.shell.window.MainWindow)
WINDOW_TABS = {"tab_widget", "tabText", "show_tab", "current_tab", "current_id"}


def _reaches(path: Path) -> list[str]:
    """Where the module at ``path`` looks a tab up through the window: a ``window`` parameter, a call
    ``.tab("…")`` with a tab's name, or the window's own tab registry (:data:`WINDOW_TABS`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.arg) and node.arg in ("window", "main_window"):
            found.append(f"{path.name}:{node.lineno}: parameter {node.arg}")
        elif isinstance(node, ast.Attribute) and node.attr in WINDOW_TABS:
            found.append(f"{path.name}:{node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "tab"
            and any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
        ):
            found.append(f"{path.name}:{node.lineno}: .tab(name)")
    return found


def test_no_tab_package_reaches_another_tab_through_the_window():
    """The import contract ("the tabs are independent") sees imports only; this sees the runtime path
    round it: a view handed the window, or asking it for a tab."""
    packages = [entry.spec.split(":")[0].rsplit(".", 1)[0] for entry in TABS]
    assert all(p.startswith("app.views.") for p in packages)
    found = []
    for package in packages:
        for path in sorted((VIEWS / package.split(".")[-1]).rglob("*.py")):
            found += _reaches(path)
    assert found == []
