"""The window's menus and what their actions do: File (new run, open and save checkpoints, export
the current view), View (tabs, panels, layout), Help (what the current page shows, the keyboard
shortcuts, the README's sections, About; content in :mod:`app.help`), plus the menus tabs add through
their ``menu_actions()`` hook. :class:`WindowMenus` is mixed into :class:`app.window.MainWindow`; it uses
the window's ``session``, ``settings``, ``tabs``, ``docks`` and ``tab_widget``.
"""

from __future__ import annotations

import platform
import traceback
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu, QMessageBox, QWidget

from app.widgets.exporting import write_png, write_svg, write_svg_group

APP_NAME = "Attention Lab"


class WindowMenus:
    """The menu bar and its actions, for :class:`app.window.MainWindow`."""

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
        self.get_model_action = self._action(
            "&Get a model…",
            self.get_model_dialog,
            "Ctrl+Shift+O",
            "Download a model from the Hugging Face Hub (a catalogue, or any repo id) and open it",
        )
        self.follow_action = self._action(
            "&Follow a run folder…",
            self.follow_run_dialog,
            None,
            "Watch a run that another process (attention-lab train --out DIR) writes, live",
        )
        self.history_action = self._action(
            "Open a training &history…",
            self.open_history_dialog,
            None,
            "Scrub through a model's checkpoints (Pythia's on the Hub, a folder, or a run's kept ones)",
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
        self.reset_layout_action = self._action(
            "Reset &layout", self.reset_layout, None, "Put the panels back where they started"
        )

    def _build_menus(self) -> None:
        bar = self.menuBar()
        self.file_menu = bar.addMenu("&File")
        for act in (
            self.new_action,
            None,
            self.get_model_action,
            self.open_action,
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
        self._view_extra_anchor = None
        extra: dict[str, list[QAction]] = {}
        for tab in self.tabs.values():
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
        self.help_menu.addAction(self.page_help_action)
        self.help_menu.addAction(self.shortcuts_action)
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
        from app.help import read_readme

        sections, _ = read_readme()
        if not sections:
            return [self._action("README", lambda: self.show_readme(""), None, "The README is not installed")]
        return [
            self._action(title, lambda t=title: self.show_readme(t), None, f"The README's section {title!r}")
            for title, _ in sections
        ]

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

    # ---- dialogs (tests patch QMessageBox / QFileDialog) -----------------------------------------
    def show_error(self, title: str, message: str) -> None:
        QMessageBox.critical(self, title, message)

    def show_about(self) -> None:
        QMessageBox.about(self, f"About {APP_NAME}", about_text(self.session))

    def help_dialog(self):
        """The window's help window (created on first use; it never blocks the window)."""
        from app.help import HelpDialog

        dialog = getattr(self, "_help_dialog", None)
        if dialog is None:
            dialog = self._help_dialog = HelpDialog(self)
        return dialog

    def show_page_help(self):
        """Help → What am I looking at? (F1): the current page's own explanation (app.help)."""
        from app.help import current_help

        title = self.tab_widget.tabText(self.tab_widget.currentIndex())
        heading, body = current_help(title, self.current_tab())
        dialog = self.help_dialog()
        dialog.show_html(heading, body)
        return dialog

    def show_shortcuts(self):
        """Help → Keyboard shortcuts: every shortcut, read from the window's actions now."""
        from app.help import shortcuts_html

        dialog = self.help_dialog()
        dialog.show_html("Keyboard shortcuts", shortcuts_html(self))
        return dialog

    def show_readme(self, section: str):
        """Help → README → ``section``: that part of the README, rendered."""
        dialog = self.help_dialog()
        dialog.show_readme(section)
        return dialog

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
        from app.checkpoint_dialog import CheckpointDialog

        path = CheckpointDialog.get_path(self, self.settings.last_dir("checkpoint"))
        if path:
            self.open_checkpoint(path)

    def open_checkpoint(self, path: str, *, remember_dir: bool = True) -> bool:
        """Load the checkpoint at ``path`` (a folder, or a nanoGPT ``ckpt.pt``); an error dialog (and
        nothing changed) when it cannot. The next Open starts where ``path`` is, unless
        ``remember_dir`` is False (a model downloaded into the Hugging Face cache)."""
        if remember_dir:
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

    def follow_run_dialog(self) -> None:
        if not self._maybe_save("Follow a run folder"):
            return
        path = QFileDialog.getExistingDirectory(self, "Follow a run folder", self.settings.last_dir("run"))
        if path:
            self.follow_run(path)

    def follow_run(self, path: str) -> bool:
        """Follow the run folder at ``path`` in the Train tab; an error dialog when it cannot."""
        self.settings.set_last_dir("run", Path(path).parent)
        try:
            self.session.follow.start(path)
        except Exception as exc:
            self.show_error("Could not follow the run", f"{path}\n\n{exc}")
            return False
        if "Train" in self.tabs:
            self.tab_widget.setCurrentIndex(list(self.tabs).index("Train"))
        self.statusBar().showMessage(f"Following {path}", 6000)
        return True

    def open_history_dialog(self) -> None:
        """File → Open a training history…: the History tab's dialog, then that tab."""
        try:
            tab = self.tab("History")
        except KeyError:
            return
        if not hasattr(tab, "open_dialog"):  # the tab could not be built: it says why
            return
        self.tab_widget.setCurrentIndex(
            [self.tab_widget.tabText(i) for i in range(self.tab_widget.count())].index("History")
        )
        tab.open_dialog()

    def get_model_dialog(self):
        """File → Get a model…: the download dialog (one per window, kept between uses)."""
        from app.get_model import GetModelDialog

        dialog = getattr(self, "_get_model", None)
        if dialog is None:
            dialog = self._get_model = GetModelDialog(self)
            dialog.downloaded.connect(self._open_downloaded)
        dialog.show()
        dialog.raise_()
        return dialog

    def _open_downloaded(self, folder: str, ref: str) -> None:
        if self.session.is_training:
            self._get_model.error_label.setText("Stop training before opening a model.")
            return
        if not self._maybe_save("Open a downloaded model"):
            return
        if self.open_checkpoint(folder, remember_dir=False):
            self.session.checkpoint_meta["name"] = ref  # the repo, not the cache's commit folder
            self._update_status()
            self.statusBar().showMessage(f"Opened {ref} from the Hugging Face cache", 6000)
            self._get_model.accept()

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


def about_text(session) -> str:
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
    """Write ``tab`` (or its ``export_targets()``) to exactly ``path`` as PNG or SVG; returns ``[path]``.

    PNG: the whole tab as on screen (``QWidget.grab``). SVG: the export targets (the whole tab when
    it has none) drawn as vectors (:mod:`app.widgets.exporting`), several of them in one drawing, each
    where it is on screen: the file is the one the user named, never one named after a target.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".png", ".svg"):
        raise ValueError(f"export as .png or .svg, not {suffix or 'a file without extension'}")
    if suffix == ".png":
        return [str(write_png(tab, p))]
    hook = getattr(tab, "export_targets", None)
    targets = hook() if callable(hook) else {}
    widgets = list(targets.values()) if targets else [tab]
    if len(widgets) == 1:
        return [str(write_svg(widgets[0], p))]
    return [str(write_svg_group(tab, widgets, p))]


__all__ = ["APP_NAME", "WindowMenus", "about_text", "export_widget_targets"]
