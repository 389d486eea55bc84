"""The window's menus: File (new run, open and save checkpoints, export the current view; what those
do is :mod:`app.shell.file_actions`), View (tabs, panels, layout), Help (what the current page shows, the
keyboard shortcuts, the GPT in one file, the README's sections, About; content in
:mod:`app.shell.help`), plus the menus tabs add through their ``menu_actions()`` hook.

:class:`WindowMenus` is a part of the :class:`~app.shell.window.MainWindow` (``window.menu``): it builds
the actions (parented on the window, so their shortcuts work anywhere in it) and the menu bar, and
reaches the window only through :class:`MenuHost`.
"""

from __future__ import annotations

import platform
import traceback
from collections.abc import Callable
from importlib.metadata import version
from typing import Any, Protocol

import numpy
import pyqtgraph
import PySide6
import torch
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu, QMenuBar, QMessageBox, QTabWidget, QWidget

from app.shell.file_actions import FileActions
from app.shell.help import HelpDialog, current_help, read_readme, reference_model_html, shortcuts_html
from app.views.tab import TabBase

APP_NAME = "Attention Lab"


class MenuHost(Protocol):
    """What :class:`WindowMenus` reads of the window (:class:`app.shell.window.MainWindow`, the parent of
    the actions and dialogs)."""

    session: Any
    tabs: dict[str, TabBase]
    docks: dict[str, QDockWidget]
    tab_widget: QTabWidget

    def current_tab(self) -> TabBase | None: ...
    def menuBar(self) -> QMenuBar: ...
    def window(self) -> QWidget:
        """The window's own widget (QWidget.window()): the parent of the actions and dialogs."""
        ...

    def reset_layout(self) -> None: ...
    def close(self) -> bool: ...


class WindowMenus:
    """The menu bar and its actions (see the module docstring). ``menus``: title → QMenu, every
    menu of the bar (the File, View and Help menus also as ``file_menu``, ``view_menu``,
    ``help_menu``); the actions are attributes (``open_action``, ...)."""

    def __init__(self, window: MenuHost, files: FileActions):
        self.window = window
        self.files = files
        self.session = window.session
        self._help_dialog: HelpDialog | None = None
        self._build_actions()
        self._build_menus()

    def _action(self, text: str, slot: Callable, shortcut=None, tip: str = "") -> QAction:
        act = QAction(text, self.window.window())
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
            act.setToolTip(tip)
        act.triggered.connect(lambda checked=False: slot())
        return act

    def _build_actions(self) -> None:
        S = QKeySequence.StandardKey
        files, window = self.files, self.window
        self.new_action = self._action(
            "&New run", files.new_run, S.New, "Forget the current model and start from an untrained one"
        )
        self.open_action = self._action(
            "&Open checkpoint…",
            files.open_checkpoint_dialog,
            S.Open,
            "Load a saved model with its config, tokenizer and loss history",
        )
        self.local_models_action = self._action(
            "Open a &local model…",
            files.local_models_dialog,
            "Ctrl+L",
            "The models already on this machine (Ollama, LM Studio, the Hugging Face cache, packages)",
        )
        self.get_model_action = self._action(
            "&Get a model…",
            files.get_model_dialog,
            "Ctrl+Shift+O",
            "Download a model from the Hugging Face Hub (a catalogue, or any repo id) and open it",
        )
        self.follow_action = self._action(
            "&Follow a run folder…",
            files.follow_run_dialog,
            None,
            "Watch a run that another process (attention-lab train --out DIR) writes, live",
        )
        self.history_action = self._action(
            "Open a training &history…",
            files.open_history_dialog,
            None,
            "Scrub through a model's checkpoints (Pythia's on the Hub, a folder, or a run's kept ones)",
        )
        self.save_action = self._action(
            "&Save checkpoint",
            files.save_checkpoint,
            S.Save,
            "Save the model (and training state) where it was last saved",
        )
        self.save_as_action = self._action(
            "Save checkpoint &as…",
            files.save_checkpoint_as,
            S.SaveAs,
            "Save the model (and training state) to a new directory",
        )
        self.export_action = self._action(
            "&Export current view as PNG/SVG…",
            files.export_current_view,
            "Ctrl+E",
            "Write what the current tab shows to a PNG or SVG file",
        )
        self.quit_action = self._action("&Quit", window.close, S.Quit, "Close Attention Lab")
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.about_action = self._action(
            "&About Attention Lab", self.show_about, None, "Versions, device and where things come from"
        )
        self.page_help_action = self._action(
            "&What am I looking at?",
            self.show_page_help,
            S.HelpContents,
            "What the current tab and page show, and how to read them",
        )
        self.shortcuts_action = self._action(
            "&Keyboard shortcuts",
            self.show_shortcuts,
            None,
            "Every keyboard shortcut of the window",
        )
        self.reference_action = self._action(
            "The &GPT in one file",
            self.show_reference_model,
            None,
            "model/nn/reference.py: the default GPT in about 150 lines of plain PyTorch, to read",
        )
        self.reset_layout_action = self._action(
            "Reset &layout", window.reset_layout, None, "Put the panels back where they started"
        )

    def _build_menus(self) -> None:
        bar = self.window.menuBar()
        self.file_menu = bar.addMenu("&File")
        for act in (
            self.new_action,
            None,
            self.get_model_action,
            self.open_action,
            self.local_models_action,
            self.follow_action,
            self.history_action,
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
        self._view_extra_anchor: QAction | None = None
        extra: dict[str, list[QAction]] = {}
        for tab in self.window.tabs.values():
            for menu, actions in self._tab_menu_actions(tab).items():
                extra.setdefault(menu, []).extend(actions)
        for menu, actions in extra.items():
            if menu in ("View", "Help"):  # added to the menus built below
                continue
            m = self.menus.get(menu) or bar.addMenu(f"&{menu}")
            self.menus[menu] = m
            for act in actions:
                m.addAction(act)
        self.view_menu = bar.addMenu("&View")
        self.menus["View"] = self.view_menu
        tab_widget = self.window.tab_widget
        for i in range(tab_widget.count()):
            title = tab_widget.tabText(i)
            act = self._action(f"{title} tab", lambda i=i: tab_widget.setCurrentIndex(i), f"Ctrl+{i + 1}")
            self.view_menu.addAction(act)
        self.view_menu.addSeparator()
        for dock in self.window.docks.values():
            act = dock.toggleViewAction()
            act.setText(f"{dock.windowTitle()} panel")
            self.view_menu.addAction(act)
        for act in extra.get("View", []):
            self.view_menu.addAction(act)
        self._view_extra_anchor = self.view_menu.addSeparator()
        self.view_menu.addAction(self.reset_layout_action)
        self.help_menu = bar.addMenu("&Help")
        self.menus["Help"] = self.help_menu
        self.help_menu.addAction(self.page_help_action)
        self.help_menu.addAction(self.shortcuts_action)
        self.help_menu.addAction(self.reference_action)
        self.readme_menu = self.help_menu.addMenu("&README")
        self.readme_actions = self._readme_actions()
        for act in self.readme_actions:
            self.readme_menu.addAction(act)
        self.help_menu.addSeparator()
        for act in extra.get("Help", []):
            self.help_menu.addAction(act)
        self.help_menu.addAction(self.about_action)

    def _readme_actions(self) -> list[QAction]:
        """One action per ``## `` section of the README (one saying it is missing when it is)."""
        sections, _ = read_readme()
        if not sections:
            return [self._action("README", lambda: self.show_readme(""), None, "The README is not installed")]
        return [
            self._action(title, lambda t=title: self.show_readme(t), None, f"The README's section {title!r}")
            for title, _ in sections
        ]

    @staticmethod
    def _tab_menu_actions(tab: TabBase) -> dict[str, list[QAction]]:
        try:
            return dict(tab.menu_actions())
        except Exception:
            traceback.print_exc()
            return {}

    def add_tab_actions(self, tab: TabBase) -> None:
        """Menus for a tab built after the menu bar (lazy windows)."""
        for menu, actions in self._tab_menu_actions(tab).items():
            if menu == "View":
                for act in actions:
                    if self._view_extra_anchor is None:
                        self.view_menu.addAction(act)
                    else:
                        self.view_menu.insertAction(self._view_extra_anchor, act)
                continue
            m = self.menus.get(menu)
            if m is None:
                m = QMenu(f"&{menu}", self.window.window())
                self.window.menuBar().insertMenu(self.view_menu.menuAction(), m)
                self.menus[menu] = m
            for act in actions:
                m.addAction(act)

    # ---- the Help menu (tests patch QMessageBox) -------------------------------------------------
    def show_about(self) -> None:
        QMessageBox.about(self.window.window(), f"About {APP_NAME}", about_text(self.session))

    def help_dialog(self) -> HelpDialog:
        """The window's help window (created on first use; it never blocks the window)."""
        if self._help_dialog is None:
            self._help_dialog = HelpDialog(self.window.window())
        return self._help_dialog

    def show_page_help(self) -> HelpDialog:
        """Help → What am I looking at? (F1): the current page's own explanation (app.shell.help)."""
        tabs, tab = self.window.tab_widget, self.window.current_tab()
        if tab is None:  # a window without tabs
            heading, body = APP_NAME, "<p>This window has no tabs.</p>"
        else:
            heading, body = current_help(tabs.tabText(tabs.currentIndex()), tab)
        dialog = self.help_dialog()
        dialog.show_html(heading, body)
        return dialog

    def show_shortcuts(self) -> HelpDialog:
        """Help → Keyboard shortcuts: every shortcut, read from the window's actions now."""
        dialog = self.help_dialog()
        dialog.show_html("Keyboard shortcuts", shortcuts_html(self.window.window()))
        return dialog

    def show_reference_model(self) -> HelpDialog:
        """Help → The GPT in one file: model/nn/reference.py's source, the reading path for learners."""
        dialog = self.help_dialog()
        dialog.show_html(*reference_model_html(), fit_width=True)
        return dialog

    def show_readme(self, section: str) -> HelpDialog:
        """Help → README → ``section``: that part of the README, rendered."""
        dialog = self.help_dialog()
        dialog.show_readme(section)
        return dialog


def about_text(session) -> str:
    """The About box: versions, the device in use, CUDA."""
    torch_v = torch.__version__
    try:  # the About box opens even where the CUDA driver cannot be asked
        cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "not available"
    except Exception:  # pragma: no cover
        cuda = "not available"
    try:
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


__all__ = ["APP_NAME", "MenuHost", "WindowMenus", "about_text"]
