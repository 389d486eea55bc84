"""The main window: the tab registry, the setup docks, menus, status bar and settings.

Tabs
----
The main area's tabs come from :data:`TABS`, a list of ``(title, "module:Class")``. A tab class is
constructed as ``Class(session, parent=None)`` and may offer these optional hooks:

* ``export_targets() -> dict[str, QWidget]``: what File → Export current view writes (pyqtgraph
  widgets export natively as SVG; any widget exports as PNG). Without it the whole tab is exported.
* ``screenshot_pages() -> list[tuple[str, Callable[[], None]]]``: named sub-pages; the screenshot
  command calls each callable (which shows that page) and then renders the tab.
* ``menu_actions() -> dict[str, list[QAction]]``: actions to add to the named menus.
* ``on_activated()``: called when the tab becomes the current one (compute lazily here).
* ``shutdown()``: called from ``closeEvent``; stop the tab's own workers and wait for them.
* ``save_state(settings)`` / ``restore_state(settings)``: persist what the tab wants (AppSettings).

A tab whose module is missing, fails to import or fails to construct shows a :class:`TabError` with
the reason instead of taking the app down.
"""

from __future__ import annotations

import importlib
import platform
import traceback
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.session import Session
from app.settings import AppSettings
from app.widgets.exporting import write_png, write_svg

#: The tabs of the main area: (title, "module:Class"). Later issues add their modules; nothing else.
TABS: list[tuple[str, str]] = [
    ("Train", "app.views.train.tab:TrainTab"),
    ("Attention", "app.views.attention.tab:AttentionTab"),
    ("Labs", "app.views.labs.tab:LabsTab"),
    ("Compare", "app.views.compare.tab:CompareTab"),
    ("Budget", "app.views.budget.tab:BudgetTab"),
]

#: Settings layout version: bump when docks change so an old saved state is not restored.
STATE_VERSION = 1

APP_NAME = "Attention Lab"


def load_tab(title: str, spec: str, session: Session) -> QWidget:
    """Build the tab ``spec`` ("module:Class"), or a :class:`TabError` that says what went wrong."""
    module_name, _, class_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), class_name)(session)
    except Exception as exc:
        traceback.print_exc()
        return TabError(title, f"{type(exc).__name__}: {exc}")


class TabError(QWidget):
    """Stands in for a tab that could not be built, and says why (selectable, so it can be reported)."""

    def __init__(self, title: str, error: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = title
        layout = QVBoxLayout(self)
        layout.setContentsMargins(40, 40, 40, 40)
        escaped = error.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        self.message = QLabel(
            f"<h2>{title}</h2><p>This tab could not be loaded:</p><p><tt>{escaped}</tt></p>"
        )
        self.message.setWordWrap(True)
        self.message.setMaximumWidth(720)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addStretch(1)
        layout.addWidget(self.message, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(2)


class _TabScroll(QScrollArea):
    """Shows a tab at the page's size, scrolling only when the page is smaller than its minimum.

    (``QScrollArea.setWidgetResizable`` would size a tab holding word-wrapped labels to its
    height-for-width, i.e. its preferred height, and scroll a tab that fits.)
    """

    def __init__(self, tab: QWidget):
        super().__init__()
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setWidgetResizable(False)
        self.setWidget(tab)
        tab.installEventFilter(self)

    def _fit(self) -> None:
        tab = self.widget()
        if tab is None:
            return
        minimum = tab.minimumSizeHint().expandedTo(tab.minimumSize())
        available = self.contentsRect().size()
        size = available.expandedTo(minimum)
        # a scroll bar in one direction takes room from the other
        if size.width() > available.width():
            available.setHeight(available.height() - self.horizontalScrollBar().sizeHint().height())
        if size.height() > available.height():
            available.setWidth(available.width() - self.verticalScrollBar().sizeHint().width())
        size = available.expandedTo(minimum)
        if tab.size() != size:
            tab.resize(size)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
        if obj is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            QTimer.singleShot(0, self._fit)
        return False


class _TabHolder(QWidget):
    """The page a tab lives in: "Loading…" until a lazy tab is built, then the tab.

    The tab sits in a :class:`_TabScroll`, so one wide tab's minimum size cannot force the whole
    window wider than the screen: below its minimum the tab scrolls instead.
    """

    def __init__(self, title: str):
        super().__init__()
        self.title = title
        self.tab: QWidget | None = None
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._loading = QLabel(f"Loading the {title} tab…")
        self._loading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._layout.addWidget(self._loading)

    def set_tab(self, tab: QWidget) -> None:
        self._layout.removeWidget(self._loading)
        self._loading.deleteLater()
        self.scroll = _TabScroll(tab)
        self.scroll.setObjectName(f"tabScroll_{self.title}")
        self._layout.addWidget(self.scroll)
        self.tab = tab


class MainWindow(QMainWindow):
    """The Attention Lab window. ``session`` and ``settings`` are created when not given."""

    #: emitted once, after the first paint (cold-start measurement)
    firstPainted = Signal()

    def __init__(
        self,
        session: Session | None = None,
        settings: AppSettings | None = None,
        *,
        confirm_close: bool = True,
        restore: bool = True,
        tabs: list[tuple[str, str]] | None = None,
        lazy: bool = False,
    ):
        super().__init__()
        self.session = session if session is not None else Session(self)
        self.settings = settings if settings is not None else AppSettings()
        self.confirm_close = confirm_close
        self._painted = False
        self._closing = False
        self.setWindowTitle(APP_NAME)
        self.setObjectName("MainWindow")
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks)

        self.tab_widget = QTabWidget()
        self.tab_widget.setObjectName("mainTabs")
        self.tab_widget.setDocumentMode(True)
        self.setCentralWidget(self.tab_widget)
        #: title -> tab (a _TabHolder until a lazily built tab exists); in registry order
        self.tabs: dict[str, QWidget] = {}
        self._holders: dict[str, _TabHolder] = {}
        self._pending: dict[str, str] = {}
        self._lazy = lazy
        for i, (title, spec) in enumerate(tabs if tabs is not None else TABS):
            holder = _TabHolder(title)
            self._holders[title] = holder
            self.tabs[title] = holder
            self.tab_widget.addTab(holder, title)
            if lazy and i > 0:
                self._pending[title] = spec
            else:
                self._build_tab(title, spec)
        self.tab_widget.currentChanged.connect(self._on_tab_changed)

        self._build_docks()
        self._build_actions()
        self._build_menus()
        self._build_status_bar()
        self._connect_session()
        self.resize(1500, 940)
        self._restore = restore
        if restore:
            self.restore_settings()
        if not lazy:
            self.finish_setup()

    # ---- construction --------------------------------------------------------------------------
    def _build_docks(self) -> None:
        """The Model dock now; Data and Training (which import torch) now or in ``finish_setup``."""
        from app.panels.model import ConfigPanel

        self.config_panel = ConfigPanel(self.session)
        self.data_panel = None
        self.train_settings_panel = None
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
            dock.setMinimumWidth(360)
            self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
            self.docks[key] = dock
        self.tabifyDockWidget(self.docks["data"], self.docks["model"])
        self.tabifyDockWidget(self.docks["model"], self.docks["training"])
        self.docks["model"].raise_()
        self.resizeDocks([self.docks["model"]], [390], Qt.Orientation.Horizontal)
        self._default_dock_state = self.saveState(STATE_VERSION)

    def _build_late_docks(self) -> None:
        if self.data_panel is not None:
            return
        from app.panels.data import DataPanel
        from app.panels.training import TrainSettingsPanel

        self.data_panel = DataPanel(self.session, settings=self.settings)
        self.train_settings_panel = TrainSettingsPanel(self.session)
        self.docks["data"].setWidget(self.data_panel)
        self.docks["training"].setWidget(self.train_settings_panel)
        if self._restore:
            ts = self.settings.get_json("last/train_settings")
            if ts:
                self.train_settings_panel.restore(ts)
        self._connect_panels()

    def finish_setup(self) -> None:
        """Build everything a lazy window left for later (the late docks, then every tab)."""
        self._build_late_docks()
        for title in list(self._pending):
            self._build_tab(title)

    def build_later(self) -> None:
        """Lazy windows: build the late docks now and the other tabs one per event-loop turn."""
        self._build_late_docks()

        def next_tab():
            if self._pending and not self._closing:
                self._build_tab(next(iter(self._pending)))
                QTimer.singleShot(0, next_tab)

        QTimer.singleShot(0, next_tab)

    def _build_tab(self, title: str, spec: str | None = None) -> QWidget:
        spec = spec if spec is not None else self._pending.pop(title)
        self._pending.pop(title, None)
        tab = load_tab(title, spec, self.session)
        self._holders[title].set_tab(tab)
        self.tabs[title] = tab
        if hasattr(self, "menus"):
            self._add_tab_menu_actions(tab)
            if self._restore:
                hook = getattr(tab, "restore_state", None)
                if callable(hook):
                    try:
                        hook(self.settings)
                    except Exception:
                        traceback.print_exc()
        return tab

    def tab(self, title: str) -> QWidget:
        """The tab ``title``, built now if it was waiting."""
        if title in self._pending:
            return self._build_tab(title)
        return self.tabs[title]

    def _connect_panels(self) -> None:
        """The setup panels' validity gates Start; "Save now" without a path asks for one."""
        train = self.tabs.get("Train")
        if train is None:
            return
        if hasattr(train, "set_config_valid"):
            self.config_panel.validityChanged.connect(train.set_config_valid)
            train.set_config_valid(self.config_panel.valid)
        if hasattr(train, "set_settings_valid"):
            self.train_settings_panel.validityChanged.connect(train.set_settings_valid)
            train.set_settings_valid(self.train_settings_panel.valid)
        if hasattr(train, "saveRequested"):
            train.saveRequested.connect(self.save_checkpoint_as)

    def _action(self, text: str, slot: Callable, shortcut=None, tip: str = "") -> QAction:
        act = QAction(text, self)
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
            act.setToolTip(tip)
        act.triggered.connect(lambda checked=False: slot())
        return act

    def _build_actions(self) -> None:
        S = QKeySequence.StandardKey
        self.new_action = self._action(
            "&New run", self.new_run, S.New, "Forget the current model and start from an untrained one"
        )
        self.open_action = self._action(
            "&Open checkpoint…",
            self.open_checkpoint_dialog,
            S.Open,
            "Load a saved model with its config, tokenizer and loss history",
        )
        self.save_action = self._action(
            "&Save checkpoint",
            self.save_checkpoint,
            S.Save,
            "Save the model (and training state) where it was last saved",
        )
        self.save_as_action = self._action(
            "Save checkpoint &as…",
            self.save_checkpoint_as,
            S.SaveAs,
            "Save the model (and training state) to a new directory",
        )
        self.export_action = self._action(
            "&Export current view as PNG/SVG…",
            self.export_current_view,
            "Ctrl+E",
            "Write what the current tab shows to a PNG or SVG file",
        )
        self.quit_action = self._action("&Quit", self.close, S.Quit, "Close Attention Lab")
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.about_action = self._action(
            "&About Attention Lab", self.show_about, None, "Versions, device and where things come from"
        )
        self.reset_layout_action = self._action(
            "Reset &layout", self.reset_layout, None, "Put the panels back where they started"
        )

    def _build_menus(self) -> None:
        bar = self.menuBar()
        self.file_menu = bar.addMenu("&File")
        for act in (
            self.new_action,
            None,
            self.open_action,
            self.save_action,
            self.save_as_action,
            None,
            self.export_action,
            None,
            self.quit_action,
        ):
            if act is None:
                self.file_menu.addSeparator()
            else:
                self.file_menu.addAction(act)
        self.menus = {"File": self.file_menu}
        self._view_extra_anchor = None
        extra: dict[str, list[QAction]] = {}
        for tab in self.tabs.values():
            for menu, actions in self._tab_menu_actions(tab).items():
                extra.setdefault(menu, []).extend(actions)
        for menu, actions in extra.items():
            if menu == "View":
                continue
            m = self.menus.get(menu) or bar.addMenu(f"&{menu}")
            self.menus[menu] = m
            for act in actions:
                m.addAction(act)
        self.view_menu = bar.addMenu("&View")
        self.menus["View"] = self.view_menu
        for i, title in enumerate(self.tabs):
            act = self._action(
                f"{title} tab", lambda i=i: self.tab_widget.setCurrentIndex(i), f"Ctrl+{i + 1}"
            )
            self.view_menu.addAction(act)
        self.view_menu.addSeparator()
        for dock in self.docks.values():
            act = dock.toggleViewAction()
            act.setText(f"{dock.windowTitle()} panel")
            self.view_menu.addAction(act)
        for act in extra.get("View", []):
            self.view_menu.addAction(act)
        self._view_extra_anchor = self.view_menu.addSeparator()
        self.view_menu.addAction(self.reset_layout_action)
        self.help_menu = bar.addMenu("&Help")
        self.menus["Help"] = self.help_menu
        self.help_menu.addAction(self.about_action)

    @staticmethod
    def _tab_menu_actions(tab: QWidget) -> dict[str, list[QAction]]:
        hook = getattr(tab, "menu_actions", None)
        if not callable(hook):
            return {}
        try:
            return dict(hook())
        except Exception:
            traceback.print_exc()
            return {}

    def _add_tab_menu_actions(self, tab: QWidget) -> None:
        """Menus for a tab built after the menu bar (lazy windows)."""
        for menu, actions in self._tab_menu_actions(tab).items():
            if menu == "View":
                for act in actions:
                    self.view_menu.insertAction(self._view_extra_anchor, act)
                continue
            m = self.menus.get(menu)
            if m is None:
                m = QMenu(f"&{menu}", self)
                self.menuBar().insertMenu(self.view_menu.menuAction(), m)
                self.menus[menu] = m
            for act in actions:
                m.addAction(act)

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.origin_label = QLabel()  # where a loaded model came from (name, kind, size, tokenizer)
        self.origin_label.setContentsMargins(8, 0, 8, 0)
        bar.addWidget(self.origin_label, 1)
        self.device_label = QLabel()
        self.params_label = QLabel()
        self.step_label = QLabel()
        self.tps_label = QLabel()
        for w in (self.device_label, self.params_label, self.step_label, self.tps_label):
            w.setContentsMargins(8, 0, 8, 0)
            bar.addPermanentWidget(w)
        self._update_status()

    def _connect_session(self) -> None:
        s = self.session
        for sig in (s.modelChanged, s.deviceChanged, s.historyReset, s.trainingStateChanged):
            sig.connect(lambda *_: self._update_status())
        s.eventsAppended.connect(lambda *_: self._update_status())
        s.errorOccurred.connect(self.show_error)
        s.statusMessage.connect(lambda text: self.statusBar().showMessage(text, 10000))
        s.checkpointSaved.connect(self._on_saved)
        s.trainingStateChanged.connect(self._update_actions)
        self._update_actions(s.state)

    # ---- status --------------------------------------------------------------------------------
    def _update_status(self) -> None:
        s = self.session
        origin = s.model_origin()
        self.origin_label.setText(f"Model: {origin}" if origin else "")
        self.origin_label.setToolTip(str(s.checkpoint_path or ""))
        self.device_label.setText(f"Device: {s.device if s.device is not None else '…'}")
        n = s.num_params
        self.params_label.setText(f"Parameters: {n:,}" if n is not None else "Parameters: –")
        target = f" / {s.target_steps}" if s.is_training and s.target_steps else ""
        self.step_label.setText(f"Step: {s.step}{target}")
        tps = s.tokens_per_s
        self.tps_label.setText(f"Tokens/s: {tps:,.0f}" if tps else "Tokens/s: –")
        title = APP_NAME
        if s.checkpoint_path:
            title = f"{Path(s.checkpoint_path).name} — {APP_NAME}"
        if s.dirty:
            title = "*" + title
        self.setWindowTitle(title)

    def _update_actions(self, state: str) -> None:
        idle = state == "idle"
        self.new_action.setEnabled(idle)
        self.open_action.setEnabled(idle)

    def _on_saved(self, path: str) -> None:
        self.statusBar().showMessage(f"Saved checkpoint to {path}", 6000)
        self._update_status()

    # ---- dialogs (tests patch QMessageBox / QFileDialog) -----------------------------------------
    def show_error(self, title: str, message: str) -> None:
        QMessageBox.critical(self, title, message)

    def show_about(self) -> None:
        QMessageBox.about(self, f"About {APP_NAME}", about_text(self.session))

    # ---- file actions --------------------------------------------------------------------------
    def new_run(self) -> None:
        if self.session.is_training:
            return
        if not self._maybe_save("Start a new run"):
            return
        try:
            self.session.new_run()
        except Exception as exc:
            self.show_error("New run", str(exc))
            return
        self.statusBar().showMessage("New untrained model: press Start to train it", 6000)

    def open_checkpoint_dialog(self) -> None:
        if self.session.is_training:
            self.show_error("Open checkpoint", "Stop training before opening a checkpoint.")
            return
        if not self._maybe_save("Open a checkpoint"):
            return
        path = QFileDialog.getExistingDirectory(
            self, "Open checkpoint directory", self.settings.last_dir("checkpoint")
        )
        if path:
            self.open_checkpoint(path)

    def open_checkpoint(self, path: str) -> bool:
        """Load the checkpoint at ``path``; an error dialog (and nothing changed) when it cannot."""
        self.settings.set_last_dir("checkpoint", Path(path).parent)
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            self.session.load_checkpoint(path)
        except Exception as exc:
            QApplication.restoreOverrideCursor()
            self.show_error("Could not open checkpoint", f"{path}\n\n{exc}")
            return False
        QApplication.restoreOverrideCursor()
        self.statusBar().showMessage(f"Opened {path} at step {self.session.step}", 6000)
        self._update_status()
        return True

    def save_checkpoint(self) -> bool:
        if self.session.checkpoint_path:
            return self._save_to(self.session.checkpoint_path)
        return self.save_checkpoint_as()

    def save_checkpoint_as(self) -> bool:
        if self.session.model is None:
            self.show_error("Save checkpoint", "There is no model to save yet.")
            return False
        start = str(Path(self.settings.last_dir("checkpoint")) / f"run-step{self.session.step}")
        path, _ = QFileDialog.getSaveFileName(
            self, "Save checkpoint as (a directory is created)", start, "Checkpoint directory (*)"
        )
        if not path:
            return False
        self.settings.set_last_dir("checkpoint", Path(path).parent)
        return self._save_to(path)

    def _save_to(self, path: str) -> bool:
        try:
            self.session.save_checkpoint(path)
        except Exception as exc:
            self.show_error("Could not save checkpoint", f"{path}\n\n{exc}")
            return False
        return True

    def _maybe_save(self, what: str) -> bool:
        """Ask about unsaved training before discarding it; False when the user cancels."""
        if not (self.confirm_close and self.session.dirty and self.session.model is not None):
            return True
        B = QMessageBox.StandardButton
        answer = QMessageBox.question(
            self,
            what,
            f"The model has trained {self.session.step} steps since it was last saved. Save it first?",
            B.Save | B.Discard | B.Cancel,
            B.Save,
        )
        if answer == B.Cancel:
            return False
        if answer == B.Save:
            return self.save_checkpoint()
        return True

    # ---- export --------------------------------------------------------------------------------
    def current_tab(self) -> QWidget:
        """The current tab itself (not its holder), built now if it was waiting."""
        return self.tab(self.tab_widget.tabText(self.tab_widget.currentIndex()))

    def export_current_view(self) -> None:
        title = self.tab_widget.tabText(self.tab_widget.currentIndex()).lower()
        start = str(Path(self.settings.last_dir("export")) / f"attention-lab-{title}.png")
        path, chosen = QFileDialog.getSaveFileName(
            self, "Export current view", start, "PNG image (*.png);;SVG drawing (*.svg)"
        )
        if not path:
            return
        if not Path(path).suffix:
            path += ".svg" if "svg" in (chosen or "").lower() else ".png"
        self.settings.set_last_dir("export", Path(path).parent)
        try:
            written = export_widget_targets(self.current_tab(), path)
        except Exception as exc:
            self.show_error("Export failed", f"{path}\n\n{exc}")
            return
        self.statusBar().showMessage("Exported " + ", ".join(written), 8000)

    # ---- layout and settings -------------------------------------------------------------------
    def reset_layout(self) -> None:
        self.restoreState(self._default_dock_state, STATE_VERSION)
        for dock in self.docks.values():
            dock.show()

    def restore_settings(self) -> None:
        st = self.settings
        geometry = st.get_bytes("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        state = st.get_bytes("window/state")
        if state is not None:
            self.restoreState(state, STATE_VERSION)
        idx = st.value("window/tab")
        try:
            if idx is not None:
                self.tab_widget.setCurrentIndex(int(idx))
        except (TypeError, ValueError):
            pass
        cfg = st.get_json("last/config")
        if cfg:
            try:
                from model.config import GPTConfig

                self.config_panel.set_config(GPTConfig.from_dict(cfg, validate=False))
            except Exception:
                pass
        for tab in self.tabs.values():
            hook = getattr(tab, "restore_state", None)
            if callable(hook):
                try:
                    hook(st)
                except Exception:
                    traceback.print_exc()

    def save_settings(self) -> None:
        st = self.settings
        st.set_bytes("window/geometry", self.saveGeometry())
        st.set_bytes("window/state", self.saveState(STATE_VERSION))
        st.set_value("window/tab", self.tab_widget.currentIndex())
        try:
            st.set_json("last/config", self.config_panel.config().to_dict())
        except Exception:
            pass
        if self.train_settings_panel is not None:
            st.set_json("last/train_settings", self.train_settings_panel.values())
        for tab in self.tabs.values():
            hook = getattr(tab, "save_state", None)
            if callable(hook):
                try:
                    hook(st)
                except Exception:
                    traceback.print_exc()
        st.sync()

    # ---- events --------------------------------------------------------------------------------
    def _on_tab_changed(self, index: int) -> None:
        title = self.tab_widget.tabText(index)
        tab = self.tab(title) if title in self.tabs else self.tab_widget.widget(index)
        hook = getattr(tab, "on_activated", None)
        if callable(hook):
            try:
                hook()
            except Exception:
                traceback.print_exc()

    def paintEvent(self, event) -> None:  # noqa: N802
        super().paintEvent(event)
        if not self._painted:
            self._painted = True
            QTimer.singleShot(0, self.firstPainted.emit)

    def closeEvent(self, event) -> None:  # noqa: N802
        """Ask about unsaved training, stop every worker and wait for it, then save settings."""
        if self._closing:
            event.accept()
            return
        if not self._maybe_save("Quit"):
            event.ignore()
            return
        self._closing = True
        self.save_settings()
        for tab in self.tabs.values():
            hook = getattr(tab, "shutdown", None)
            if callable(hook):
                try:
                    hook()
                except Exception:
                    traceback.print_exc()
        self.session.shutdown()
        event.accept()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(1500, 940)


def about_text(session: Session) -> str:
    import numpy
    import pyqtgraph
    import PySide6

    try:
        import torch

        torch_v = torch.__version__
        cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "not available"
    except Exception:  # pragma: no cover
        torch_v, cuda = "not installed", "not available"
    try:
        from importlib.metadata import version

        app_v = version("attention-lab")
    except Exception:
        app_v = "development"
    return (
        f"<h3>{APP_NAME} {app_v}</h3>"
        "<p>Train or load a small GPT and watch every attention head work, live.</p>"
        f"<p>Device in use: <b>{session.device}</b><br>CUDA: {cuda}</p>"
        f"<p>Python {platform.python_version()} · PyTorch {torch_v} · PySide6 {PySide6.__version__} · "
        f"pyqtgraph {pyqtgraph.__version__} · NumPy {numpy.__version__}</p>"
    )


def export_widget_targets(tab: QWidget, path: str) -> list[str]:
    """Write ``tab`` (or each of its ``export_targets()``) to ``path`` as PNG or SVG; returns the files.

    PNG: the whole tab as on screen (``QWidget.grab``). SVG: each export target (the whole tab when
    it has none) drawn as vectors (:mod:`app.widgets.exporting`); several targets get their names
    appended to the file name.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise ValueError(f"export as .png or .svg, not {suffix or 'a file without extension'}")
    if suffix == ".png":
        return [str(write_png(tab, p))]
    hook = getattr(tab, "export_targets", None)
    targets = hook() if callable(hook) else {}
    if not targets:
        targets = {"": tab}
    written = []
    for name, widget in targets.items():
        out = p if len(targets) == 1 or not name else p.with_name(f"{p.stem}-{name}{p.suffix}")
        write_svg(widget, out)
        written.append(str(out))
    return written


__all__ = ["TABS", "MainWindow", "about_text", "export_widget_targets", "load_tab"]
