"""The Help menu's content: what the current page is, the window's keyboard shortcuts, the GPT in one
file (the reading path, :mod:`model.nn.reference`), the README.

Nothing here is written twice. The page help is the page's own header text (:func:`app.views.page.
page_help`, or a tab's ``current_help()`` hook); the shortcuts are read from the window's actions
and shortcuts when the dialog opens (:func:`shortcut_rows`); the README's sections are its ``## ``
headings, read from the ``README.md`` beside the package (:func:`readme_sections`); the GPT in one file
is that module's own source (:func:`reference_model_html`).
:class:`HelpDialog` shows any of them, without blocking the window.
"""

from __future__ import annotations

import html
import inspect
import math
import re
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import (
    QAction,
    QDesktopServices,
    QImage,
    QKeySequence,
    QShortcut,
    QTextCursor,
    QTextImageFormat,
)
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPlainTextEdit,
    QTabWidget,
    QTextBrowser,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

import app
import model.nn.reference
from app.views.page import page_help
from app.views.tab import TabBase


# ---- the README --------------------------------------------------------------------------------
def readme_path() -> Path:
    """Where the README is: the repository root, next to the ``app`` package."""
    return Path(app.__file__).resolve().parents[1] / "README.md"


def readme_sections(text: str) -> list[tuple[str, str]]:
    """``(title, markdown)`` of each ``## `` section of a README, in order (headings inside code
    blocks do not count). The markdown starts with the section's own heading."""
    sections: list[tuple[str, list[str]]] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            sections.append((line[3:].strip(), [line]))
        elif sections:
            sections[-1][1].append(line)
    return [(title, "\n".join(lines).strip() + "\n") for title, lines in sections]


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: ``"A model's training history"`` → ``a-models-training-history``."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def read_readme(path: Path | None = None) -> tuple[list[tuple[str, str]], str]:
    """The README's sections, and ``""``; or no sections and the one line that says why."""
    path = path or readme_path()
    try:
        return readme_sections(path.read_text(encoding="utf-8")), ""
    except (OSError, UnicodeDecodeError) as exc:
        why = "it is not there" if isinstance(exc, FileNotFoundError) else f"it cannot be read ({exc})"
        return [], (
            f"The README is not installed with this copy of Attention Lab: looked for {path}, and {why}. "
            "It is README.md at the top of the project's repository."
        )


def tab_intro(title: str, tab: QWidget) -> str:
    """What a tab is, for a person: the README's paragraph about it ("**Train.** …") when the README is
    there, else the first paragraph of the tab's module docstring."""
    sections, _ = read_readme()
    for _, body in sections:
        for para in re.split(r"\n\s*\n", body):
            if para.startswith(f"**{title}.**"):
                return _inline_markdown(para[len(f"**{title}.**") :])
    doc = inspect.getdoc(inspect.getmodule(type(tab))) or inspect.getdoc(type(tab)) or ""
    first = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    return html.escape(first.replace("``", ""), quote=False)


def _inline_markdown(text: str) -> str:
    out = html.escape(" ".join(text.split()), quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"`(.+?)`", r"<code>\1</code>", out)
    return re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", out)


# ---- what am I looking at ------------------------------------------------------------------------
def current_help(title: str, tab: TabBase) -> tuple[str, str]:
    """``(title, html)`` explaining what ``tab`` (titled ``title``) shows now: its ``current_help()``
    hook when it has one; else its current page's own header text (``current_page``, an attribute or
    a method) above what the tab is; else what the tab is."""
    found = tab.current_help()
    if found:
        return found
    intro = tab_intro(title, tab)
    page = tab.current_page
    text = page_help(page) if page is not None else ""
    if not text:
        return title, f"<p>{intro}</p>"
    name = getattr(page, "title", "") or ""
    lab = getattr(page, "lab", "")
    heading = " — ".join(p for p in (title, lab if lab and lab != name else "", name) if p)
    about = f"<p style='color:#555'><b>The {html.escape(title)} tab.</b> {intro}</p>" if intro else ""
    return heading, f"<p>{text}</p>{about}"


# ---- keyboard shortcuts ------------------------------------------------------------------------
def _clean(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").replace("…", "").strip()


def _keys(sequences) -> str:
    return ", ".join(s.toString(QKeySequence.SequenceFormat.NativeText) for s in sequences if not s.isEmpty())


def _where(window: QWidget, obj) -> str:
    """The tab an object lives in ("Train tab"), or "window"."""
    widget = obj if isinstance(obj, QWidget) else obj.parent()
    while widget is not None and not isinstance(widget, QWidget):
        widget = widget.parent()
    tabs = getattr(window, "tab_widget", None)
    if widget is None or not isinstance(tabs, QTabWidget):
        return "window"
    for i in range(tabs.count()):
        page = tabs.widget(i)  # the tab's holder
        if page is not None and (page is widget or page.isAncestorOf(widget)):
            return f"{tabs.tabText(i)} tab"  # its title, as the tab bar shows it
    return "window"


def _widget_label(widget: QWidget | None) -> str:
    """A short name for the widget a shortcut works in: its accessible name, placeholder, or object
    name in words ("probePrompt" → "probe prompt")."""
    if widget is None:
        return ""
    if widget.accessibleName():
        return widget.accessibleName()
    if isinstance(widget, (QLineEdit, QPlainTextEdit, QTextEdit)) and widget.placeholderText():
        return re.sub(r"\s*\(.*?\)", "", widget.placeholderText()).strip()
    name = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", widget.objectName()).replace("_", " ").lower()
    return name or type(widget).__name__


#: shortcut contexts that fire only while their own widget (or a child of it) has the focus
_FOCUSED = (Qt.ShortcutContext.WidgetShortcut, Qt.ShortcutContext.WidgetWithChildrenShortcut)


def shortcut_rows(window: QWidget) -> list[tuple[str, str, str]]:
    """Every keyboard shortcut the window has now, as ``(keys, what it does, where)``: the menus'
    actions in menu order ("File", "View → …"), then actions outside the menus and widget shortcuts
    (``QShortcut``, e.g. Ctrl+Return in a prompt), each with the tab it works in."""
    rows: list[tuple[str, str, str]] = []
    seen: set[int] = set()

    def add_action(act: QAction, where: str) -> None:
        if id(act) in seen or act.isSeparator():
            return
        seen.add(id(act))
        keys = _keys(act.shortcuts())
        if keys:
            rows.append((keys, _clean(act.text()), where))

    def walk(menu, path: list[str]) -> None:
        for act in menu.actions():
            sub = act.menu()
            if sub is not None:
                walk(sub, [*path, _clean(act.text())])
            else:
                add_action(act, " → ".join(path) + " menu")

    bar = window.menuBar() if isinstance(window, QMainWindow) else None
    for top in bar.actions() if bar is not None else []:
        if top.menu() is not None:
            walk(top.menu(), [_clean(top.text())])
    for act in window.findChildren(QAction):
        add_action(act, _where(window, act))
    for sc in window.findChildren(QShortcut):
        keys = _keys(sc.keys())
        if not keys or not sc.isEnabled():
            continue
        owner = sc.parent()
        parent = owner if isinstance(owner, QWidget) else None
        what = sc.whatsThis() or f"in the {_widget_label(parent)}"
        where = _where(window, sc)
        if sc.context() in _FOCUSED and parent is not None:  # fires only in its own box
            where = f"{where}, in the {_widget_label(parent)}"
        rows.append((keys, what, where))
    return rows


def shortcuts_html(window: QWidget) -> str:
    cells = "".join(
        f"<tr><td style='padding:2px 14px 2px 0'><b>{html.escape(k)}</b></td>"
        f"<td style='padding:2px 14px 2px 0'>{html.escape(w)}</td>"
        f"<td style='color:#666'>{html.escape(p)}</td></tr>"
        for k, w, p in shortcut_rows(window)
    )
    return (
        "<p>Every shortcut of this window, read from its menus and widgets as they are now.</p>"
        f"<table cellspacing='0'><tr><th align='left'>Keys</th><th align='left'>Does</th>"
        f"<th align='left'>Where</th></tr>{cells}</table>"
    )


# ---- the GPT in one file -------------------------------------------------------------------------
#: The README's section on the reading path (:func:`reference_model_html` links to it).
READING_SECTION = "Reading the model"


def reference_model_html() -> tuple[str, str]:
    """``(title, html)`` of Help → The GPT in one file: where :mod:`model.nn.reference` is in the
    repository, a line on what it is, and its source as it is installed, to read top to bottom."""
    module = model.nn.reference
    path = "/".join(module.__name__.split(".")) + ".py"
    intro = (
        f"<p><b>{path}</b>: the default GPT, the one <code>GPTConfig()</code> describes, in one file of "
        "plain PyTorch with each formula and tensor shape beside its line. It computes what the production "
        "model computes, from the same weights (tested); the README's section "
        f"<a href='#{anchor(READING_SECTION)}'>{READING_SECTION}</a> says what the production model adds.</p>"
    )
    source = html.escape(inspect.getsource(module), quote=False)
    return f"The GPT in one file — {path}", f"{intro}<pre>{source}</pre>"


# ---- the dialog --------------------------------------------------------------------------------
class HelpDialog(QDialog):
    """A non-blocking window of help text (HTML or the README's markdown); links to README sections
    (``#anchor``) show that section, web links open in the browser."""

    IMAGE_WIDTH = 760  # px: screenshots are shown at most this wide

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("helpDialog")
        self.setModal(False)
        self.heading = QLabel()
        self.heading.setObjectName("helpHeading")
        self.heading.setStyleSheet("font-size: 15px; font-weight: bold;")
        self.heading.setWordWrap(True)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(self._link)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.heading)
        lay.addWidget(self.browser, 1)
        lay.addWidget(buttons)
        self.resize(820, 640)

    def show_html(self, title: str, body: str, *, fit_width: bool = False) -> None:
        """``body`` under the heading ``title``; ``fit_width``: widen the dialog (up to the screen) so that
        its widest unbreakable line, such as a line of code, shows whole."""
        self.setWindowTitle(title)
        self.heading.setText(html.escape(title, quote=False))
        self.heading.show()
        self.browser.setHtml(body)
        if fit_width:
            self._fit_width()
        self._present()

    def _fit_width(self) -> None:
        doc = self.browser.document()
        doc.adjustSize()  # lays the text out at its ideal width, the widest line that cannot wrap
        scrollbar = self.browser.verticalScrollBar().sizeHint().width()
        need = (
            math.ceil(doc.idealWidth())
            + scrollbar
            + 2 * self.browser.frameWidth()
            + (self.width() - self.browser.width())
        )
        screen = self.screen().availableGeometry().width() if self.screen() is not None else need
        self.resize(max(self.width(), min(need, screen)), self.height())

    def show_readme(self, title: str) -> None:
        """The README's section ``title`` (or a line saying the README is not there)."""
        sections, why = read_readme()
        found = dict(sections).get(title)
        self.setWindowTitle(f"README — {title}")
        self.heading.hide()
        if found is None:
            self.browser.setPlainText(why or f"The README has no section {title!r}.")
        else:
            self.browser.document().setBaseUrl(QUrl.fromLocalFile(str(readme_path().parent) + "/"))
            self.browser.setMarkdown(found)
            self._fit_images()
        self._present()

    def text(self) -> str:
        """What the dialog shows, as plain text (tests and the screenshot command read it)."""
        return (self.heading.text() + "\n" if self.heading.isVisible() else "") + self.browser.toPlainText()

    def _present(self) -> None:
        self.browser.moveCursor(QTextCursor.MoveOperation.Start)
        self.show()
        self.raise_()
        self.activateWindow()

    def _fit_images(self) -> None:
        """Screenshots at most :attr:`IMAGE_WIDTH` wide, in proportion (markdown gives no sizes)."""
        doc = self.browser.document()
        base = readme_path().parent
        block = doc.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                fmt = frag.charFormat()
                if fmt.isImageFormat():
                    img_fmt = fmt.toImageFormat()
                    image = QImage(str(base / img_fmt.name()))
                    if not image.isNull() and image.width() > self.IMAGE_WIDTH:
                        fitted = QTextImageFormat(img_fmt)
                        fitted.setWidth(self.IMAGE_WIDTH)
                        fitted.setHeight(image.height() * self.IMAGE_WIDTH / image.width())
                        cursor = QTextCursor(doc)
                        cursor.setPosition(frag.position())
                        cursor.setPosition(frag.position() + frag.length(), QTextCursor.MoveMode.KeepAnchor)
                        cursor.setCharFormat(fitted)
                it += 1
            block = block.next()

    def _link(self, url: QUrl) -> None:
        if url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)
            return
        fragment = url.fragment()
        if fragment:
            for title, _ in read_readme()[0]:
                if anchor(title) == fragment:
                    self.show_readme(title)
                    return
        target = readme_path().parent / url.path()
        if url.path() and target.is_file():
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(target)))


__all__ = [
    "HelpDialog",
    "anchor",
    "current_help",
    "read_readme",
    "readme_path",
    "readme_sections",
    "reference_model_html",
    "shortcut_rows",
    "shortcuts_html",
    "tab_intro",
]
