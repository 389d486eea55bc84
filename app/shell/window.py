"""The main window: the tab registry, the setup docks that follow the tab, status bar and settings.

The window is made of parts: its menu bar and actions (``menu``, :mod:`app.shell.menus`), what the File
menu's actions do (``files``, :mod:`app.shell.file_actions`), and each tab's holder and scroll area
(:mod:`app.shell.tab_host`, with the :class:`TabError` that stands in for a broken tab).

Tabs
----
The main area's tabs come from :data:`TABS`, a list of :class:`TabEntry` ``(id, title, "module:Class")``:
the window keys its tabs by the stable ``id`` (:meth:`MainWindow.tab`, :meth:`MainWindow.show_tab`);
the ``title`` is only what the tab bar shows. A tab class derives from :class:`~app.views.tab.TabBase`
and is constructed as ``Class(session)``; the window attaches itself as the tab's host
(:class:`~app.views.tab.TabHost`: ask before replacing unsaved training, save as) and calls the tab's
hooks (:class:`~app.views.tab.Tab`: docks, on_activated, current_page / current_help, menu_actions,
export_targets, screenshot_pages, save_state / restore_state, shutdown) and nothing else.

A tab asks another for something with a message on the session's hub (:mod:`app.session.messages`);
the window only answers :class:`~app.session.messages.ShowTab` (brings that tab forward) and builds a
lazily built tab that a request is for (:class:`~app.core.hub.Unheard`).

A tab whose module is missing, fails to import or fails to construct shows a :class:`TabError` with
the reason instead of taking the app down.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, NamedTuple

from PySide6.QtCore import QByteArray, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QDockWidget, QLabel, QMainWindow, QMessageBox, QTabWidget, QWidget

from app.core.hub import Unheard
from app.panels.model import ConfigPanel
from app.session.messages import ShowTab, TabRequest
from app.session.session import Session
from app.session.settings import AppSettings
from app.shell.dock_room import DOCK_MIN_WIDTH, DOCK_WIDTH, DockRoom
from app.shell.file_actions import FileActions, export_widget_targets
from app.shell.menus import APP_NAME, WindowMenus, about_text
from app.shell.status_line import StatusLine
from app.shell.tab_host import TabError, TabHolder, load_tab
from app.shell.window_settings import STATE_VERSION, restore_window, save_window
from app.views.tab import TabBase

if TYPE_CHECKING:
    from app.panels.data import DataPanel
    from app.panels.training import TrainSettingsPanel


class TabEntry(NamedTuple):
    """One tab of the registry."""

    #: the stable key (``MainWindow.tab(id)``, a request's ``tab``, a screenshot's file name)
    id: str
    #: what the tab bar shows (may be translated; nothing looks a tab up by it)
    title: str
    #: ``"module:Class"`` of its :class:`~app.views.tab.TabBase`
    spec: str


#: The tabs of the main area. Later issues add their modules; nothing else.
TABS: list[TabEntry] = [
    TabEntry("train", "Train", "app.views.train.tab:TrainTab"),
    TabEntry("history", "History", "app.views.history.tab:HistoryTab"),
    TabEntry("attention", "Attention", "app.views.attention.tab:AttentionTab"),
    TabEntry("labs", "Labs", "app.views.labs.tab:LabsTab"),
    TabEntry("compare", "Compare", "app.views.compare.tab:CompareTab"),
    TabEntry("budget", "Budget", "app.views.budget.tab:BudgetTab"),
    TabEntry("features", "Features", "app.views.features.tab:FeaturesTab"),
]


#: The first window's size where the screen has room for it (see :func:`fit_to_screen`).
DEFAULT_SIZE = QSize(1500, 940)
#: Room kept for the window manager's frame and title bar around a fitted window.
FRAME_ROOM = QSize(16, 48)


def screen_area(widget: QWidget | None = None) -> QRect:
    """The part of the screen a window may use (``QScreen.availableGeometry``: without the task
    bars): of the screen ``widget`` is on, else the primary screen."""
    screen = widget.screen() if widget is not None else None
    screen = screen or QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else QRect(0, 0, 1920, 1080)


def fit_to_screen(size: QSize, area: QRect) -> QSize:
    """``size``, made smaller where ``area`` (minus the frame's room) is: a first window must show its
    edges and title-bar buttons on a 1280×800 laptop as on a 1920×1080 screen."""
    room = area.size() - FRAME_ROOM
    return size.boundedTo(room.expandedTo(QSize(640, 480)))


class MainWindow(QMainWindow):
    """The Attention Lab window. ``session`` and ``settings`` are created when not given; ``menu``
    (:class:`~app.shell.menus.WindowMenus`) and ``files``
    (:class:`~app.shell.file_actions.FileActions`) are its parts."""

    #: emitted once, after the first paint (cold-start measurement)
    firstPainted = Signal()
    #: emitted once a lazy window has built its last tab (``build_later``)
    allTabsBuilt = Signal()

    def __init__(
        self,
        session: Session | None = None,
        settings: AppSettings | None = None,
        *,
        confirm_close: bool = True,
        restore: bool = True,
        tabs: list[TabEntry] | None = None,
        lazy: bool = False,
    ):
        super().__init__()
        self.session = session if session is not None else Session()
        self.settings = settings if settings is not None else AppSettings()
        self.confirm_close = confirm_close
        self._painted = False
        self._closing = False
        self.setWindowTitle(APP_NAME)
        self.setObjectName("MainWindow")
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks)
        self.setAcceptDrops(True)  # a model file or folder dropped on the window opens (dropEvent)

        self.tab_widget = QTabWidget()
        self.tab_widget.setObjectName("mainTabs")
        self.tab_widget.setDocumentMode(True)
        self.setCentralWidget(self.tab_widget)
        #: id -> tab (a TabHolder until a lazily built tab exists); in registry order
        self.tabs: dict[str, TabBase] = {}
        self._holders: dict[str, TabHolder] = {}
        self._pending: dict[str, str] = {}
        self._lazy = lazy
        self.menu: WindowMenus | None = None  # built once the first tabs and the docks exist
        hub = self.session.hub
        # a tab's requests of another: the window brings tabs forward, and builds one not built yet
        self._subscriptions = [hub.subscribe(ShowTab, self._on_show_tab), hub.subscribe(Unheard, self._wake)]
        for i, (tab_id, title, spec) in enumerate(tabs if tabs is not None else TABS):
            holder = TabHolder(tab_id, title)
            self._holders[tab_id] = holder
            self.tabs[tab_id] = holder
            self.tab_widget.addTab(holder, title)
            if lazy and i > 0:
                self._pending[tab_id] = spec
            else:
                self._build_tab(tab_id, spec)
        self.tab_widget.currentChanged.connect(self._on_tab_changed)

        self._build_docks()
        self.files = FileActions(self)
        self.menu = WindowMenus(self, self.files)
        self._build_status_bar()
        self._connect_session()
        self.resize(fit_to_screen(DEFAULT_SIZE, screen_area(self)))
        self._restore = restore
        if restore:
            restore_window(self)
        self._apply_tab_docks(self.current_tab())
        if not lazy:
            self.finish_setup()

    # ---- construction --------------------------------------------------------------------------
    def _build_docks(self) -> None:
        """The Model dock now; Data and Training (which import torch) now or in ``finish_setup``."""
        self.config_panel = ConfigPanel(self.session)
        self.data_panel: DataPanel | None = None
        self.train_settings_panel: TrainSettingsPanel | None = None
        self.docks: dict[str, QDockWidget] = {}
        for key, title in (("data", "Data"), ("model", "Model"), ("training", "Training")):
            dock = QDockWidget(title, self)
            dock.setObjectName(f"dock_{key}")
            dock.setWidget(self.config_panel if key == "model" else QLabel("  Loading…"))
            dock.setFeatures(
                QDockWidget.DockWidgetFeature.DockWidgetMovable
                | QDockWidget.DockWidgetFeature.DockWidgetClosable
                | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            )
            dock.setMinimumWidth(DOCK_MIN_WIDTH)
            self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
            self.docks[key] = dock
        self.tabifyDockWidget(self.docks["data"], self.docks["model"])
        self.tabifyDockWidget(self.docks["model"], self.docks["training"])
        self.docks["model"].raise_()
        self.resizeDocks([self.docks["model"]], [DOCK_WIDTH], Qt.Orientation.Horizontal)
        self.dock_room = DockRoom(self, list(self.docks.values()))  # they give way on a small screen
        self._default_dock_state = self.saveState(STATE_VERSION)
        #: the dock layout from before the current tab hid the docks it does not want (else None)
        self._docks_state: QByteArray | None = None

    def _build_late_docks(self) -> None:
        if self.data_panel is not None:
            return
        # the late docks' modules (the data sources, the training settings): after the first paint
        from app.panels.data import DataPanel
        from app.panels.training import TrainSettingsPanel

        self.data_panel = data = DataPanel(self.session, settings=self.settings)
        self.train_settings_panel = training = TrainSettingsPanel(self.session)
        self.docks["data"].setWidget(data)
        self.docks["training"].setWidget(training)
        if self._restore:
            ts = self.settings.get_json("last/train_settings")
            if ts:
                training.restore(ts)

    def finish_setup(self) -> None:
        """Build everything a lazy window left for later (the late docks, then every tab)."""
        self._build_late_docks()
        for tab_id in list(self._pending):
            self._build_tab(tab_id)

    def build_later(self) -> None:
        """Lazy windows: build the late docks now and the other tabs one per event-loop turn."""
        self._build_late_docks()

        def next_tab():
            if self._pending and not self._closing:
                self._build_tab(next(iter(self._pending)))
                QTimer.singleShot(0, next_tab)
            elif not self._closing:
                self.allTabsBuilt.emit()

        QTimer.singleShot(0, next_tab)

    def _build_tab(self, tab_id: str, spec: str | None = None) -> TabBase:
        spec = spec if spec is not None else self._pending.pop(tab_id)
        self._pending.pop(tab_id, None)
        holder = self._holders[tab_id]
        tab = load_tab(holder.title, spec, self.session)
        tab.attach(self)
        holder.set_tab(tab)
        self.tabs[tab_id] = tab
        if self.menu is not None:  # a tab built after the menu bar (lazy windows)
            self.menu.add_tab_actions(tab)
            if self._restore:
                try:
                    tab.restore_state(self.settings)
                except Exception:
                    traceback.print_exc()
        return tab

    def tab(self, tab_id: str) -> TabBase:
        """The tab ``tab_id`` (its :class:`TabEntry` id), built now if it was waiting; KeyError when
        the window has no such tab."""
        if tab_id in self._pending:
            return self._build_tab(tab_id)
        return self.tabs[tab_id]

    def show_tab(self, tab_id: str) -> bool:
        """Bring the tab ``tab_id`` forward; False when the window has no such tab."""
        holder = self._holders.get(tab_id)
        if holder is None:
            return False
        self.tab_widget.setCurrentWidget(holder)
        return True

    def current_id(self) -> str | None:
        """The id of the tab in front (None in a window without tabs)."""
        holder = self.tab_widget.currentWidget()
        return holder.tab_id if isinstance(holder, TabHolder) else None

    def _on_show_tab(self, message: ShowTab) -> None:
        self.show_tab(message.tab)

    def _wake(self, unheard: Unheard) -> None:
        """A request nobody answered: when it is for a tab not built yet (a lazy window's first
        moments), build that tab now; it subscribes, and the hub hands it the request."""
        request = unheard.message
        if isinstance(request, TabRequest) and request.tab in self._pending:
            self._build_tab(request.tab)

    # ---- what a tab may ask of the window (app.views.tab.TabHost) ------------------------------
    def maybe_save(self, what: str) -> bool:
        """Whether the shown model may be replaced by ``what``: unsaved training is asked about first."""
        return self.files.maybe_save(what)

    def save_checkpoint_as(self) -> None:
        self.files.save_checkpoint_as()

    def _build_status_bar(self) -> None:
        self.status_line = StatusLine(self.statusBar(), self.session)
        line = self.status_line  # its labels, under the window's names
        self.origin_label, self.device_label, self.params_label = line.origin, line.device, line.params
        self.step_label, self.tps_label = line.step, line.tps
        self.update_status()

    def _connect_session(self) -> None:
        s = self.session
        for sig in (s.modelChanged, s.deviceChanged, s.historyReset, s.trainingStateChanged):
            sig.connect(lambda *_: self.update_status())
        s.eventsAppended.connect(lambda *_: self.update_status())
        s.errorOccurred.connect(self.show_error)
        s.statusMessage.connect(lambda text: self.statusBar().showMessage(text, 10000))
        s.checkpointSaved.connect(self._on_saved)
        s.trainingStateChanged.connect(self._update_actions)
        self._update_actions(s.state)

    # ---- status --------------------------------------------------------------------------------
    def show_error(self, title: str, message: str) -> None:
        """A dialog for what the user must see (tests patch ``QMessageBox.critical``)."""
        QMessageBox.critical(self, title, message)

    def update_status(self) -> None:
        """The status bar (:class:`~app.shell.status_line.StatusLine`) and the title: the model's name,
        ``*`` while it has unsaved training."""
        s = self.session
        self.status_line.update()
        title = APP_NAME
        if s.slot.name():
            title = f"{s.slot.name()} — {APP_NAME}"
        if s.dirty:
            title = "*" + title
        self.setWindowTitle(title)

    def _update_actions(self, state: str) -> None:
        menu = self.menu
        if menu is None:  # (built before the session is connected)
            return
        idle = state == "idle"
        menu.new_action.setEnabled(idle)
        menu.open_action.setEnabled(idle)
        menu.follow_action.setEnabled(idle or state == "following")

    def _on_saved(self, path: str) -> None:
        self.statusBar().showMessage(f"Saved checkpoint to {path}", 6000)
        self.update_status()

    # ---- export --------------------------------------------------------------------------------
    def current_tab(self) -> TabBase | None:
        """The current tab itself (not its holder), built now if it was waiting; None without tabs."""
        tab_id = self.current_id()
        return self.tab(tab_id) if tab_id is not None else None

    # ---- layout and settings -------------------------------------------------------------------
    def reset_layout(self) -> None:
        self._docks_state = None
        self.restoreState(self._default_dock_state, STATE_VERSION)
        for dock in self.docks.values():
            dock.show()
        self._apply_tab_docks(self.current_tab())

    def _apply_tab_docks(self, tab: TabBase | None) -> None:
        """Show only the docks ``tab`` wants (its ``docks``); a tab whose ``docks`` is None (or no tab)
        gets the layout back as it was before another tab hid docks."""
        wanted = tab.docks if tab is not None else None
        if self._docks_state is not None:  # start from the user's own layout
            state = self._docks_state
            if wanted is None:
                self._docks_state = None
            self.restoreState(state, STATE_VERSION)
        if wanted is None:
            return
        if self._docks_state is None:
            self._docks_state = self.saveState(STATE_VERSION)
        for key, dock in self.docks.items():
            if key not in wanted:
                dock.hide()

    # ---- events --------------------------------------------------------------------------------
    def _on_tab_changed(self, index: int) -> None:
        holder = self.tab_widget.widget(index)
        if not isinstance(holder, TabHolder):
            return
        tab = self.tab(holder.tab_id)
        self._apply_tab_docks(tab)
        try:
            tab.on_activated()
        except Exception:
            traceback.print_exc()

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        if not self._painted:
            self._painted = True
            QTimer.singleShot(0, self.firstPainted.emit)

    def closeEvent(self, event) -> None:
        """Ask about unsaved training, stop every worker and wait for it, then save settings."""
        if self._closing:
            event.accept()
            return
        if not self.files.maybe_save("Quit"):
            event.ignore()
            return
        self._closing = True
        save_window(self)
        if self.files.get_model is not None:
            self.files.get_model.shutdown()
        if self.files.local_models is not None:  # a scan of the machine's models still running
            self.files.local_models.shutdown()
        for tab in self.tabs.values():
            try:
                tab.shutdown()
            except Exception:
                traceback.print_exc()
        self.session.shutdown()
        event.accept()

    # ---- drag and drop: a model file or folder dropped anywhere on the window opens -------------
    @staticmethod
    def _dropped_path(event) -> str:
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        local = [u.toLocalFile() for u in urls if u.isLocalFile()]
        return local[0] if len(local) == 1 else ""

    def dragEnterEvent(self, event) -> None:
        if self._dropped_path(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        path = self._dropped_path(event)
        if not path:
            event.ignore()
            return
        event.acceptProposedAction()
        # after the drop returns: the source application is not kept waiting while the model loads
        QTimer.singleShot(0, lambda: self.files.open_dropped(path))

    def sizeHint(self) -> QSize:
        return fit_to_screen(DEFAULT_SIZE, screen_area(self))

    # ---- keyboard focus follows what is visible ------------------------------------------------
    def focusNextPrevChild(self, next: bool) -> bool:
        """Tab and Shift+Tab walk the widgets a person can see: Qt's own chain also enters the dock
        panels tabbed behind another (kept "visible" off screen), where keys would edit a hidden
        config. The same rules as Qt's otherwise (tab-focusable, enabled, shown, no focus proxy)."""
        start = QApplication.focusWidget()
        if start is None or start.window() is not self:
            return super().focusNextPrevChild(next)
        w: QWidget = start
        for _ in range(10_000):  # the chain is a ring; the bound only guards against a broken one
            step = w.nextInFocusChain() if next else w.previousInFocusChain()
            if step is start or step is None:
                break
            w = step
            if self.takes_tab_focus(w):
                reason = Qt.FocusReason.TabFocusReason if next else Qt.FocusReason.BacktabFocusReason
                w.setFocus(reason)
                return True
        return False

    def takes_tab_focus(self, w: QWidget) -> bool:
        """Whether Tab may move the focus to ``w``: as Qt decides, and not in a hidden dock panel."""
        if not (w.focusPolicy() & Qt.FocusPolicy.TabFocus) or w.focusProxy() is not None:
            return False
        if w.window() is not self or not w.isEnabled() or not w.isVisibleTo(self):
            return False
        return not any(dock.isAncestorOf(w) for dock in self.hidden_docks())

    def hidden_docks(self) -> list[QDockWidget]:
        """The dock panels that are not in sight: closed, or tabbed behind another panel."""
        return [d for d in self.docks.values() if not d.isVisible() or d.visibleRegion().isEmpty()]


__all__ = ["TABS", "MainWindow", "TabEntry", "TabError", "about_text", "export_widget_targets", "load_tab"]
