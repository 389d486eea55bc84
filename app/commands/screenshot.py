"""`attention-lab screenshot --out DIR`: train the default model briefly, render every tab and panel.

Offscreen and deterministic (fixed seed): the window is built at a fixed size, the default model
trains ``--steps`` steps on the default corpus with live attention on, then every registered tab
(and each sub-page a tab lists in ``screenshot_pages()``) and every setup panel is written as PNG.
Tabs added to ``app.shell.window.TABS`` appear here without changes to this file.

``--out DIR`` is created, or is a folder of earlier screenshots: one that holds anything but PNG
files is refused (a PNG of the same name is replaced), and a run refused before its first image
leaves no folder behind.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli import UserError
from model.atomic import OutputError, check_output, write_atomic

if TYPE_CHECKING:
    from app.panels.data import DataPanel
    from app.panels.training import TrainSettingsPanel
    from app.shell.window import MainWindow

HELP = "Render every tab of the app to PNG files, offscreen."
#: What the generation box asks a model that chats (the Train tab's screenshot shows the reply)
CHAT_MESSAGE = "What is the capital of France?"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="folder for the PNG files: created, or one that holds only PNG files (those of the same "
        "name are replaced)",
    )
    p.add_argument(
        "--steps",
        type=int,
        help="training steps before the screenshots (default 300; 0 with --checkpoint: the model as it is)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the weights, batches and samples (default 0)")
    p.add_argument(
        "--source", default="builtin:stdlib", help="data source to train on (default builtin:stdlib)"
    )
    p.add_argument(
        "--size", default="1600x1000", metavar="WxH", help="window size in pixels (default 1600x1000)"
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="keep the window at --size even when a tab then scrolls (default: widen it so none does)",
    )
    p.add_argument("--only", metavar="NAME", help="only tabs/pages whose file name contains NAME")
    p.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="open this model (any kind File > Open reads, e.g. a Hugging Face Llama folder or a GGUF "
        "file) instead of training the default one",
    )
    p.add_argument(
        "--prompt",
        metavar="TEXT",
        help="the Attention tab's prompt (e.g. an IOI sentence for the Patching page); default: its own",
    )
    p.add_argument(
        "--sae",
        metavar="DIR",
        help="an SAE folder (SAELens's format) announced to the window as one trained or opened: the "
        "Attention tab's SAE page reads it on the prompt",
    )
    p.add_argument(
        "--display", action="store_true", help="use the real display instead of offscreen rendering"
    )


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "page"


def _png(widget) -> bytes:
    """``widget`` as drawn, encoded as PNG in memory (written by :func:`model.atomic.write_atomic`)."""
    from app.widgets.exporting import png_bytes

    try:
        return png_bytes(widget)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _out_folder(text: str) -> Path:
    """``--out`` as a folder the screenshots may be written to: missing, or holding only PNG files."""
    try:
        out = check_output(text, what="--out", folder=True)
    except OutputError as exc:
        raise UserError(str(exc)) from None
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.suffix.lower() != ".png" or not p.is_file())
        if others:
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            raise UserError(
                f"--out {text}: the folder holds {', '.join(others[:3])}{more}, not only screenshots: "
                "choose a new folder or one of PNG files only"
            )
    return out


def run(args: argparse.Namespace) -> int:
    width, height = _size(args.size)
    if args.steps is None:
        args.steps = 0 if args.checkpoint is not None else 300
    if args.steps < 0:
        raise UserError("--steps must be 0 or more")
    if args.sae is not None and not (Path(args.sae) / "cfg.json").is_file():
        raise UserError(f"--sae {args.sae}: no cfg.json there (not an SAE folder in SAELens's format)")
    out = _out_folder(args.out)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out}: {exc.strerror or exc}") from None
    if not args.display:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    # a throw-away settings file: neither the user's geometry nor their last config leak in or out
    os.environ["ATTENTION_LAB_SETTINGS"] = str(
        Path(tempfile.mkdtemp(prefix="attention-lab-shots-")) / "s.ini"
    )

    # Qt, the window and torch are imported only now: a bad flag above is refused in milliseconds
    from app.shell.gui import make_app
    from app.shell.window import MainWindow

    app = make_app()
    win = MainWindow(confirm_close=False, restore=False)
    _fit(win, width, height, exact=args.exact)
    win.show()
    shots = _Shots(win, out, args.only)
    unfinished: list[str] = []
    try:
        _prepare(win, args)
        _generate(win, args.seed)
        _shoot_window_and_panels(win, shots)
        _shoot_open_dialog(win, shots)
        unfinished = _shoot_tabs(win, shots)
        _shoot_scrubbed(win, shots)
        _shoot_invalid_config(win, shots)
        _shoot_first_launch(win, shots)  # last: it replaces the model
    finally:
        win.close()  # stops every worker and waits for it (none may outlive the QApplication)
        app.processEvents()
        if created and not shots.written:  # refused or failed before the first image: no empty folder left
            with contextlib.suppress(OSError):
                out.rmdir()
    print(f"{len(shots.written)} screenshots in {out}", file=sys.stderr)
    if unfinished:
        print(
            f"still computing when captured (waited a minute each): {', '.join(unfinished)}",
            file=sys.stderr,
        )
        return 1
    return 0


def _size(text: str | None) -> tuple[int, int]:
    """``--size WxH`` as (width, height)."""
    m = re.fullmatch(r"(\d+)x(\d+)", text or "")
    if not m:
        raise UserError(f"--size {text!r} must look like 1600x1000")
    return int(m.group(1)), int(m.group(2))


def _fit(win: MainWindow, width: int, height: int, *, exact: bool) -> None:
    """Size the window: ``width`` × ``height``, or (unless ``exact``) wide enough that no tab needs its
    horizontal scroll bar (the widest tab's minimum, with the docks beside it unless it wants none,
    decides)."""
    dock_width = max(d.minimumSizeHint().width() for d in win.docks.values())
    widest = max(
        (t.minimumSizeHint().width() + (dock_width if t.docks != () else 0) for t in win.tabs.values()),
        default=0,
    )
    win.resize(width if exact else max(width, widest + 40), height)


class _Shots:
    """Writes the PNG files: each once the window has settled, those ``--only`` asks for alone."""

    def __init__(self, win: MainWindow, out: Path, only: str | None):
        self.session = win.session
        self.out = out
        self.only = only
        self.written: list[Path] = []

    def wanted(self, name: str) -> bool:
        return not self.only or self.only in name

    def settle(self, ms: int = 150) -> None:
        """Let ``ms`` pass and the session's background computation finish, then draw."""
        from PySide6.QtWidgets import QApplication

        from app.session.event_wait import wait_until

        s = self.session
        end = time.monotonic() + ms / 1000
        wait_until(lambda: time.monotonic() > end and (s._compute is None or s.compute.idle), timeout=60)
        for _ in range(3):
            QApplication.processEvents()

    def shot(self, widget, name: str) -> None:
        """``widget`` as ``name``.png (when wanted)."""
        if not self.wanted(name):
            return
        self.settle()
        path = write_atomic(self.out / f"{name}.png", _png(widget))  # a failed write: WriteError, one line
        self.written.append(path)
        print(f"wrote {path}", flush=True)


def _setup_panels(win: MainWindow) -> tuple[DataPanel, TrainSettingsPanel]:
    """The Data and Training docks' panels (a window built whole has both)."""
    from app.panels.data import DataPanel
    from app.panels.training import TrainSettingsPanel

    data, training = win.docks["data"].widget(), win.docks["training"].widget()
    if not isinstance(data, DataPanel) or not isinstance(training, TrainSettingsPanel):
        raise RuntimeError("the window's Data and Training docks were not built")
    return data, training


def _prepare(win: MainWindow, args: argparse.Namespace) -> None:
    """The model the screenshots show: the default one on ``--source`` with ``--seed`` (or
    ``--checkpoint``), ``--sae`` announced, then ``--prompt`` in the Attention tab, or else ``--steps``
    of training."""
    from app.views.attention.tab import AttentionTab

    s = win.session
    s.init_default()
    data_panel, settings_panel = _setup_panels(win)
    if args.source != s.source_spec and not data_panel.choose(args.source):
        raise UserError(f"--source {args.source!r}: {data_panel.error_label.text()}")
    settings = s.train_settings
    if settings is None:
        raise RuntimeError("the session has no training settings after init_default")
    settings_panel.set_settings(settings.replace(steps=args.steps, seed=args.seed, probe_every=10))
    settings_panel.sample_every.setValue(max(1, args.steps // 3) if args.steps else 0)
    s.build_model(seed=args.seed)
    if args.checkpoint is not None:
        try:
            from app.commands.download import local_checkpoint  # hf:REPO, package:NAME

            s.load_checkpoint(str(local_checkpoint(args.checkpoint)))
        except Exception as exc:
            raise UserError(f"--checkpoint {args.checkpoint}: {exc}") from None
    if args.sae is not None:
        from app.session.messages import SAEChosen

        s.hub.publish(SAEChosen(str(Path(args.sae).resolve())))
    attention = win.tabs.get("attention")
    if args.prompt and isinstance(attention, AttentionTab):
        attention.set_prompt(args.prompt, run=False)
    elif args.steps:
        _train(win, args.steps, opened=args.checkpoint is not None)


def _train(win: MainWindow, steps: int, *, opened: bool) -> None:
    """Train ``steps`` steps (of the opened model, or the default one), saying how far it got."""
    from app.session.event_wait import wait_until

    s = win.session
    t0 = time.monotonic()
    what = "the opened model" if opened else "the default model"
    print(f"training {steps} steps of {what} on {s.source_spec}…", flush=True)
    s.start_training()
    if not wait_until(lambda: not s.is_training, timeout=3600):
        raise UserError("training did not finish within an hour")
    last = s.history[-1] if s.history else {}
    print(
        f"trained to step {s.step} in {time.monotonic() - t0:.0f} s: train loss "
        f"{last.get('train_loss', float('nan')):.3f}",
        flush=True,
    )


def _generate(win: MainWindow, seed: int) -> None:
    """The Train tab's generation box answers (a chat model: in its Chat mode) before its shot."""
    from app.session.event_wait import wait_until
    from app.views.train.tab import TrainTab

    train_tab = win.tabs.get("train")
    if not isinstance(train_tab, TrainTab):
        return
    box = train_tab.generate_box
    box.chat.toggle.setChecked(box.chat.toggle.isEnabled())  # a chat model: its Chat mode
    box.prompt.setText(CHAT_MESSAGE if box.chat.active else (win.session.source.default_prompt or "the")[:40])
    box.max_tokens.setValue(160)
    box.generate(seed=seed)
    wait_until(lambda: box.worker is None, timeout=120)


def _shoot_window_and_panels(win: MainWindow, shots: _Shots) -> None:
    """The whole window on its first tab, then each setup dock's panel."""
    win.tab_widget.setCurrentIndex(0)
    shots.shot(win, "window")
    for key, dock in win.docks.items():
        dock.raise_()
        shots.shot(dock.widget(), f"panel-{key}")
    win.docks["model"].raise_()


def _shoot_open_dialog(win: MainWindow, shots: _Shots) -> None:
    """File → Open checkpoint's dialog in the shipped assets folder, as ``dialog-open`` (shown, not run)."""
    from app.dialogs.checkpoint_dialog import CheckpointDialog
    from model.io.checkpoint.starter import STARTER_DIR

    if not shots.wanted("dialog-open"):
        return
    dialog = CheckpointDialog(win, str(STARTER_DIR.parent))
    dialog.show()
    try:
        shots.shot(dialog, "dialog-open")
    finally:
        dialog.close()
        dialog.deleteLater()


def _shoot_tabs(win: MainWindow, shots: _Shots) -> list[str]:
    """Every tab, each of its ``screenshot_pages()`` in turn, as ``NN-tab[-page]``; the names of the
    pages still computing when their wait ran out."""
    unfinished: list[str] = []
    for index, (tab_id, tab) in enumerate(win.tabs.items()):
        win.tab_widget.setCurrentIndex(index)
        slug = _slug(tab_id)
        pages = tab.screenshot_pages()
        if not pages:
            shots.shot(win, f"{index + 1:02d}-{slug}")
            continue
        for page, show in pages:
            name = _slug(page) if page else slug
            if not name.startswith(slug):
                name = f"{slug}-{name}"
            name = f"{index + 1:02d}-{name}"
            if not shots.wanted(name):
                continue
            if show() is False:  # a page that was still computing when its wait ran out
                unfinished.append(name)
            shots.shot(win, name)
    return unfinished


def _shoot_scrubbed(win: MainWindow, shots: _Shots) -> None:
    """The Train tab scrubbed back to an early step (then live again)."""
    from app.views.train.tab import TrainTab

    train_tab = win.tabs.get("train")
    frames = win.session.frames
    if not isinstance(train_tab, TrainTab) or len(frames) <= 2:
        return
    win.tab_widget.setCurrentIndex(0)
    train_tab.show_frame(len(frames) // 4)
    shots.shot(train_tab, "01-train-scrubbed-to-an-early-step")
    train_tab.live.live_button.setChecked(True)


def _shoot_invalid_config(win: MainWindow, shots: _Shots) -> None:
    """What a user sees when the config is invalid (3 heads), then the config as it was."""
    from PySide6.QtWidgets import QSpinBox

    win.tab_widget.setCurrentIndex(0)
    heads = win.config_panel.widgets["n_heads"]
    if not isinstance(heads, QSpinBox):
        raise RuntimeError("the Model panel's n_heads is not a spin box")
    old = heads.value()
    heads.setValue(3)
    win.docks["model"].raise_()
    shots.shot(win, "window-invalid-config")
    heads.setValue(old)


def _shoot_first_launch(win: MainWindow, shots: _Shots) -> None:
    """What a first launch shows: the starter model, its heads named (it replaces the model)."""
    from app.views.attention.tab import AttentionTab

    attention, name = win.tabs.get("attention"), "first-launch-starter-metrics"
    if not isinstance(attention, AttentionTab) or not shots.wanted(name):
        return
    attention.set_ablation({})  # every head on, as at a first launch (the Ablation shot switched one off)
    if win.session.open_starter():
        win.show_tab("attention")
        attention.show_page("metrics")
        attention.wait_ready()
        shots.shot(win, name)
