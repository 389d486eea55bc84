"""What the Attention tab writes: the page in view as PNG or SVG (``app.widgets.exporting``), the
selected head as CSV, the prompt's tensors as .npz and a page's own numbers (CSV or .npz; the
Patching and Logit attribution pages) (``model.interp.export``), and the dialogs that ask where.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from app.views.attention.host import AttentionHost
from app.views.page import page_targets
from app.widgets.exporting import write_png, write_svg
from model.interp.export import save_inspection, write_head_csv, write_matrix_csv
from model.interp.inspection import write_inspection
from model.runtime import with_threads


class AttentionExports:
    """The Attention tab's exports; ``tab`` gives the page in view, the session, the settings (for
    the last folder), the status line and the ``exported``/``failed`` signals; the dialogs that ask
    where open over ``parent`` (the tab's widget)."""

    def __init__(self, tab: AttentionHost, parent: QWidget):
        self.tab = tab
        self.parent = parent
        self.state = tab.state

    def targets(self) -> dict[str, QWidget]:
        """What File → Export writes as SVG: the graphics of the page in view."""
        return page_targets(self.tab.current_page)

    def view(self, path: str | Path) -> list[str]:
        """The page in view as PNG (as on screen) or SVG (each of its graphics); returns the files."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".png":
            return [str(write_png(self.tab.current_page, path))]
        if suffix != ".svg":
            raise ValueError(f"export as .png or .svg, not {suffix or 'a file without extension'}")
        targets = self.targets()
        out: list[str] = []
        for name, widget in targets.items():
            p = path if len(targets) == 1 else path.with_name(f"{path.stem}-{name}{path.suffix}")
            out.append(str(write_svg(widget, p)))
        return out

    def head_csv(self, path: str | Path, layer: int | None = None, head: int | None = None) -> str:
        """Head (layer, head) (default: the selected one) as CSV with token labels; returns the file."""
        insp = self.state.inspection
        if insp is None:
            raise ValueError("there is nothing to export yet: run a prompt first")
        if layer is None or head is None:
            layer, head = self.state.selected
        written = str(write_head_csv(path, insp.head(layer, head), insp.labels))
        self.tab.exported.emit(written)
        return written

    def npz(self, path: str | Path) -> bool:
        """Write the prompt's tensors as .npz (the ``attention-lab inspect`` format) off the GUI thread.

        ``exported(path)`` or ``failed(message)`` follows. False when there is nothing to export.
        """
        tab = self.tab
        insp, model, tok = self.state.inspection, tab.session.model, tab.session.tokenizer
        if insp is None or model is None:
            return False
        ids, ablate, target = insp.ids, dict(insp.ablate), Path(path)

        # each layer's squares to the file as they are computed: never every head in memory twice
        job = with_threads(tab.threads, lambda: str(write_inspection(model, tok, ids, target, ablate=ablate)))

        def done(res: str, err: BaseException | None) -> None:
            if err is not None:
                tab.fail(f"Could not write {target}: {err}")
            else:
                tab.show_status(f"Wrote {res}" + (" (with switched-off heads)" if ablate else ""))
                tab.exported.emit(res)

        tab.session.compute.submit("attention.export", job, done)
        return True

    def numbers(self, path: str | Path) -> list[str]:
        """The numbers of the page in view (``page.numbers()``): ``.npz`` writes its arrays, ``.csv``
        each of its tables (``NAME-TABLE.csv`` when it has several). Returns the files."""
        page = self.tab.current_page
        got = page.numbers()
        if got is None:
            raise ValueError(f"the {page.title} page has no numbers to export (yet)")
        arrays, tables = got
        target = Path(path)
        suffix = target.suffix.lower()
        written: list[str] = []
        if suffix == ".npz":
            written.append(str(save_inspection(target, arrays)))
        elif suffix == ".csv":
            for name, (matrix, rows, cols, corner) in tables.items():
                p = target if len(tables) == 1 else target.with_name(f"{target.stem}-{name}{target.suffix}")
                written.append(str(write_matrix_csv(p, matrix, rows, cols, corner=corner)))
        else:
            raise ValueError(f"export numbers as .csv or .npz, not {suffix or 'a file without extension'}")
        for file in written:
            self.tab.exported.emit(file)
        return written

    # ---- dialogs -------------------------------------------------------------------------------
    def _ask_path(self, title: str, name: str, filters: str) -> str:
        settings = self.tab.settings
        start = Path(settings.last_dir("export")) if settings is not None else Path.home()
        path, _ = QFileDialog.getSaveFileName(self.parent, title, str(start / name), filters)
        if path and settings is not None:
            settings.set_last_dir("export", Path(path).parent)
        return path

    def view_dialog(self, kind: str) -> None:
        page = self.tab.current_page
        filt = "PNG image (*.png)" if kind == "png" else "SVG drawing (*.svg)"
        path = self._ask_path("Export this view", f"attention-{page.key}.{kind}", filt)
        if not path:
            return
        if not path.lower().endswith(f".{kind}"):
            path += f".{kind}"
        try:
            written = self.view(path)
        except Exception as exc:
            self.tab.show_status(f"Export failed: {exc}", error=True)
            return
        self.tab.show_status("Wrote " + ", ".join(written))
        for p in written:
            self.tab.exported.emit(p)

    def npz_dialog(self) -> None:
        path = self._ask_path("Save the prompt's tensors", "attention.npz", "NumPy arrays (*.npz)")
        if path:
            self.npz(path)

    def head_csv_dialog(self) -> None:
        if self.state.inspection is None:
            return
        layer, head = self.state.selected
        path = self._ask_path("Save the head as CSV", f"attention-L{layer}H{head}.csv", "CSV table (*.csv)")
        if not path:
            return
        try:
            written = self.head_csv(path)
        except Exception as exc:
            self.tab.show_status(f"Export failed: {exc}", error=True)
            return
        self.tab.show_status(f"Wrote {written}")

    def numbers_dialog(self) -> None:
        page = self.tab.current_page
        if page.numbers() is None:
            self.tab.show_status(f"The {page.title} page has no numbers to export (yet).", error=True)
            return
        path = self._ask_path(
            "Export this page's numbers",
            f"attention-{page.key}.csv",
            "CSV tables (*.csv);;NumPy arrays (*.npz)",
        )
        if not path:
            return
        try:
            written = self.numbers(path if Path(path).suffix.lower() in (".csv", ".npz") else path + ".csv")
        except Exception as exc:
            self.tab.show_status(f"Export failed: {exc}", error=True)
            return
        self.tab.show_status("Wrote " + ", ".join(written))

    def dialog(self, key: str) -> None:
        """The dialog of Export-menu entry ``key`` (``controls.EXPORTS``)."""
        {
            "png": lambda: self.view_dialog("png"),
            "svg": lambda: self.view_dialog("svg"),
            "npz": self.npz_dialog,
            "csv": self.head_csv_dialog,
            "numbers": self.numbers_dialog,
        }[key]()


__all__ = ["AttentionExports"]
