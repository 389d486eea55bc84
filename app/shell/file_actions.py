"""What the File menu's actions do: a new run, opening, following and saving models, getting one
from the Hub, a model's training history, exporting the current view.

:class:`FileActions` is a part of the :class:`~app.shell.window.MainWindow` (``window.files``); the menu
bar (:mod:`app.shell.menus`) triggers its methods, and the window asks :meth:`FileActions.maybe_save`
before it closes. It reaches the window only through :class:`FileHost`. Dialogs go through
``QMessageBox`` and ``QFileDialog``, which the tests patch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox, QStatusBar, QWidget

from app.dialogs.checkpoint_dialog import CheckpointDialog
from app.session.event_wait import wait_until
from app.session.settings import AppSettings
from app.views.tab import TabBase
from app.widgets.exporting import write_png, write_svg, write_svg_group


class FileHost(Protocol):
    """What :class:`FileActions` reads of the window (:class:`app.shell.window.MainWindow`, also the
    parent of every dialog it opens)."""

    session: Any
    settings: AppSettings
    confirm_close: bool

    def tab(self, tab_id: str) -> TabBase: ...
    def show_tab(self, tab_id: str) -> bool: ...
    def current_tab(self) -> TabBase | None: ...
    def current_id(self) -> str | None: ...
    def window(self) -> QWidget:
        """The window's own widget (QWidget.window()): the parent of every dialog."""
        ...

    def statusBar(self) -> QStatusBar: ...
    def show_error(self, title: str, message: str) -> None: ...
    def update_status(self) -> None: ...
    def close(self) -> bool: ...


class FileActions:
    """The File menu's actions (see the module docstring). ``get_model``: the Get a model… dialog
    once it has been opened (one per window, kept between uses); ``local_models``: the Open a local
    model… dialog, likewise."""

    def __init__(self, window: FileHost):
        self.window = window
        self.session = window.session
        self.settings = window.settings
        self.get_model: Any = None
        self.local_models: Any = None

    # ---- file actions --------------------------------------------------------------------------
    def new_run(self) -> None:
        if self.session.is_training:
            return
        if not self.maybe_save("Start a new run"):
            return
        try:
            self.session.new_run()
        except Exception as exc:
            self.window.show_error("New run", str(exc))
            return
        self.window.statusBar().showMessage("New untrained model: press Start to train it", 6000)

    def open_checkpoint_dialog(self) -> None:
        if self.session.is_training:
            self.window.show_error("Open checkpoint", "Stop training before opening a checkpoint.")
            return
        if not self.maybe_save("Open a checkpoint"):
            return
        path, stored = CheckpointDialog.get_choice(self.window.window(), self.settings.last_dir("checkpoint"))
        if path:
            self.open_checkpoint(path, stored=stored)

    def open_dropped(self, path: str) -> bool:
        """A model file or folder dropped on the window: opened as File → Open would (after asking
        about unsaved training); False when it was not opened."""
        if self.session.is_training:
            self.window.show_error("Open checkpoint", "Stop training before opening a checkpoint.")
            return False
        if not self.maybe_save("Open a checkpoint"):
            return False
        return self.open_checkpoint(path)

    def open_checkpoint(self, path: str, *, remember_dir: bool = True, stored: bool | None = None) -> bool:
        """Load the checkpoint at ``path`` (a folder, or a nanoGPT ``ckpt.pt``); an error dialog (and
        nothing changed) when it cannot. The next Open starts where ``path`` is, unless
        ``remember_dir`` is False (a model downloaded into the Hugging Face cache). ``stored``: how its
        matrices are held (the dialog's Weights choice, ``open_model``'s ``stored``)."""
        if remember_dir:
            self.settings.set_last_dir("checkpoint", Path(path).parent)
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            note = self.session.load_checkpoint(path, stored=stored)
        except Exception as exc:
            QApplication.restoreOverrideCursor()
            self.window.show_error("Could not open checkpoint", f"{path}\n\n{exc}")
            return False
        QApplication.restoreOverrideCursor()
        step = self.session.step  # 0: a model trained elsewhere whose files name no step
        opened = f"Opened {path}" + (f" at step {step:,}" if step else "")
        self.window.statusBar().showMessage(opened + (f" · {note}" if note else ""), 10000 if note else 6000)
        self.window.update_status()
        return True

    def follow_run_dialog(self) -> None:
        if not self.maybe_save("Follow a run folder"):
            return
        path = QFileDialog.getExistingDirectory(
            self.window.window(), "Follow a run folder", self.settings.last_dir("run")
        )
        if path:
            self.follow_run(path)

    def follow_run(self, path: str) -> bool:
        """Follow the run folder at ``path`` in the Train tab; an error dialog when it cannot."""
        self.settings.set_last_dir("run", Path(path).parent)
        try:
            self.session.follow.start(path)
        except Exception as exc:
            self.window.show_error("Could not follow the run", f"{path}\n\n{exc}")
            return False
        self.window.show_tab("train")
        self.window.statusBar().showMessage(f"Following {path}", 6000)
        return True

    def open_history_dialog(self) -> None:
        """File → Open a training history…: the History tab's dialog, then that tab."""
        try:
            tab = self.window.tab("history")
        except KeyError:
            return
        from app.views.history.tab import HistoryTab  # built by now: its module is loaded

        if not isinstance(tab, HistoryTab):  # the tab could not be built: it says why
            return
        self.window.show_tab("history")
        tab.open_dialog()

    def get_model_dialog(self):
        """File → Get a model…: the download dialog (one per window, kept between uses)."""
        from app.dialogs.get_model import GetModelDialog  # the Hub's modules: not before the first paint

        dialog = self.get_model
        if dialog is None:
            dialog = self.get_model = GetModelDialog(self.window.window(), self.session.jobs)
            dialog.downloaded.connect(self._open_downloaded)
        dialog.show()
        dialog.raise_()
        return dialog

    def local_models_dialog(self):
        """File → Open a local model…: the models already on this machine (one dialog per window,
        kept between uses; it looks again each time it is opened)."""
        from app.dialogs.local_models_dialog import LocalModelsDialog

        dialog = self.local_models
        if dialog is None:
            dialog = self.local_models = LocalModelsDialog(self.window.window())
            dialog.openRequested.connect(self.open_local_model)
        elif not dialog.isVisible():
            dialog.refresh()
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def open_named(self, path: str, name: str = "", *, stored: bool | None = None) -> bool:
        """Open the model at ``path`` (``attention-lab MODEL``), called ``name`` when that says more
        than its path (a packaged GGUF file, a Hub repo's cache folder), its weights held as
        ``stored`` says (``--keep-stored``)."""
        if not self.open_checkpoint(path, remember_dir=False, stored=stored):
            return False
        if name:
            self.session.checkpoint_meta["name"] = name
        self.window.update_status()
        return True

    def open_local_model(self, model: Any) -> bool:
        """Open a :class:`~model.io.local.models.LocalModel` chosen in the dialog, named as the list
        names it (an Ollama blob or a cache's commit folder names nothing a person knows)."""
        dialog = self.local_models
        if self.session.is_training:
            if dialog is not None:
                dialog.show_message("Stop training before opening a model.")
            return False
        if not self.maybe_save("Open a local model"):
            return False
        if not self.open_named(str(model.path), model.name):
            return False
        self.window.statusBar().showMessage(f"Opened {model.name} ({model.source})", 6000)
        if dialog is not None:
            dialog.accept()
        return True

    def _open_downloaded(self, folder: str, ref: str) -> None:
        if self.session.is_training:
            self.get_model.error_label.setText("Stop training before opening a model.")
            return
        if not self.maybe_save("Open a downloaded model"):
            return
        if self.open_named(folder, ref):  # the repo, not the cache's commit folder
            self.window.statusBar().showMessage(f"Opened {ref} from the Hugging Face cache", 6000)
            self.get_model.accept()

    def save_checkpoint(self) -> bool:
        if self.session.checkpoint_path:
            return self.save_to(self.session.checkpoint_path)
        return self.save_checkpoint_as()

    def save_checkpoint_as(self) -> bool:
        """Ask where, then save. A run that is training holds still meanwhile (paused between two
        steps, resumed after), so the step the suggested name says is the step the save holds."""
        if self.session.model is None:
            self.window.show_error("Save checkpoint", "There is no model to save yet.")
            return False
        with self._run_held():
            start = str(Path(self.settings.last_dir("checkpoint")) / f"run-step{self.session.step}")
            path, _ = QFileDialog.getSaveFileName(
                self.window.window(),
                "Save checkpoint as (a directory is created)",
                start,
                "Checkpoint directory (*)",
            )
            if not path:
                return False
            self.settings.set_last_dir("checkpoint", Path(path).parent)
            return self.save_to(path)

    @contextmanager
    def _run_held(self) -> Iterator[None]:
        """While the block runs, a running training run is paused (its step stands still); after it,
        resumed (a save asked for meanwhile is written first, at that step)."""
        s = self.session
        if s.state != "running":
            yield
            return
        s.run.pause()
        wait_until(lambda: s.state != "running", timeout=600)  # the step in progress ends first
        try:
            yield
        finally:
            if s.state == "paused":
                s.run.resume()

    def save_to(self, path: str) -> bool:
        try:
            self.session.save_checkpoint(path)
        except Exception as exc:
            self.window.show_error("Could not save checkpoint", f"{path}\n\n{exc}")
            return False
        return True

    def maybe_save(self, what: str) -> bool:
        """Ask about unsaved training before discarding it; False when the user cancels."""
        if not (self.window.confirm_close and self.session.dirty and self.session.model is not None):
            return True
        B = QMessageBox.StandardButton
        unsaved = self.session.unsaved_steps
        if not unsaved:
            said = "The model has changes that are not saved."
        elif self.session.saved_step:
            at = self.session.saved_step
            said = f"The model has trained {unsaved:,} steps since it was saved at step {at:,}."
        else:
            said = f"The model has trained {unsaved:,} steps and has not been saved."
        answer = QMessageBox.question(
            self.window.window(),
            what,
            f"{said} Save it first?",
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
        tab, tab_id = self.window.current_tab(), self.window.current_id()
        if tab is None:  # a window without tabs: nothing to export
            return
        start = str(Path(self.settings.last_dir("export")) / f"attention-lab-{tab_id}.png")
        path, chosen = QFileDialog.getSaveFileName(
            self.window.window(), "Export current view", start, "PNG image (*.png);;SVG drawing (*.svg)"
        )
        if not path:
            return
        if not Path(path).suffix:
            path += ".svg" if "svg" in (chosen or "").lower() else ".png"
        self.settings.set_last_dir("export", Path(path).parent)
        try:
            written = export_widget_targets(tab, path)
        except Exception as exc:
            self.window.show_error("Export failed", f"{path}\n\n{exc}")
            return
        self.window.statusBar().showMessage("Exported " + ", ".join(written), 8000)


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
    targets = tab.export_targets() if isinstance(tab, TabBase) else {}
    widgets = list(targets.values()) if targets else [tab]
    if len(widgets) == 1:
        return [str(write_svg(widgets[0], p))]
    return [str(write_svg_group(tab, widgets, p))]


__all__ = ["FileActions", "FileHost", "export_widget_targets"]
