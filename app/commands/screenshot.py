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

from app.cli import UserError
from model.atomic import OutputError, check_output, write_atomic

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
    m = re.fullmatch(r"(\d+)x(\d+)", args.size or "")
    if not m:
        raise UserError(f"--size {args.size!r} must look like 1600x1000")
    width, height = int(m.group(1)), int(m.group(2))
    if args.steps is None:
        args.steps = 0 if args.checkpoint is not None else 300
    if args.steps < 0:
        raise UserError("--steps must be 0 or more")
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
    from PySide6.QtWidgets import QApplication

    from app.session.event_wait import wait_until
    from app.shell.gui import make_app
    from app.shell.window import MainWindow

    app = make_app()
    win = MainWindow(confirm_close=False, restore=False)
    # wide enough that no tab needs its horizontal scroll bar (the widest tab's minimum, with the docks
    # beside it unless it wants none, decides)
    dock = max(d.minimumSizeHint().width() for d in win.docks.values())
    widest = max(
        (
            t.minimumSizeHint().width() + (dock if getattr(t, "docks", None) != () else 0)
            for t in win.tabs.values()
        ),
        default=0,
    )
    win.resize(width if args.exact else max(width, widest + 40), height)
    win.show()
    s = win.session
    written: list[Path] = []
    unfinished: list[str] = []

    def settle(ms: int = 150) -> None:
        end = time.monotonic() + ms / 1000
        wait_until(lambda: time.monotonic() > end and (s._compute is None or s.compute.idle), timeout=60)
        for _ in range(3):
            QApplication.processEvents()

    def shot(widget, name: str) -> None:
        if args.only and args.only not in name:
            return
        settle()
        path = write_atomic(out / f"{name}.png", _png(widget))  # a failed write: WriteError, one line
        written.append(path)
        print(f"wrote {path}", flush=True)

    try:
        s.init_default()
        if args.source != s.source_spec and not win.data_panel.choose(args.source):
            raise UserError(f"--source {args.source!r}: {win.data_panel.error_label.text()}")
        panel = win.train_settings_panel
        panel.set_settings(s.train_settings.replace(steps=args.steps, seed=args.seed, probe_every=10))
        panel.sample_every.setValue(max(1, args.steps // 3) if args.steps else 0)
        s.build_model(seed=args.seed)
        train_tab = win.tabs.get("Train")
        if args.checkpoint is not None:
            try:
                from app.commands.download import local_checkpoint  # hf:REPO, package:NAME

                s.load_checkpoint(str(local_checkpoint(args.checkpoint)))
            except Exception as exc:
                raise UserError(f"--checkpoint {args.checkpoint}: {exc}") from None
        if args.prompt and win.tabs.get("Attention") is not None:
            win.tabs["Attention"].set_prompt(args.prompt, run=False)
        elif args.steps:
            t0 = time.monotonic()
            what = "the opened model" if args.checkpoint else "the default model"
            print(f"training {args.steps} steps of {what} on {s.source_spec}…", flush=True)
            s.start_training()
            if not wait_until(lambda: not s.is_training, timeout=3600):
                raise UserError("training did not finish within an hour")
            last = s.history[-1] if s.history else {}
            print(
                f"trained to step {s.step} in {time.monotonic() - t0:.0f} s: train loss "
                f"{last.get('train_loss', float('nan')):.3f}",
                flush=True,
            )
        if train_tab is not None and hasattr(train_tab, "generate_box"):
            box = train_tab.generate_box
            box.chat.toggle.setChecked(box.chat.toggle.isEnabled())  # a chat model: its Chat mode
            box.prompt.setText(CHAT_MESSAGE if box.chat.active else (s.source.default_prompt or "the")[:40])
            box.max_tokens.setValue(160)
            box.generate(seed=args.seed)
            wait_until(lambda: box.worker is None, timeout=120)

        win.tab_widget.setCurrentIndex(0)
        shot(win, "window")
        for dock_key, dock in win.docks.items():
            dock.raise_()
            shot(dock.widget(), f"panel-{dock_key}")
        win.docks["model"].raise_()

        for index, (title, tab) in enumerate(win.tabs.items()):
            win.tab_widget.setCurrentIndex(index)
            slug = _slug(title)
            hook = getattr(tab, "screenshot_pages", None)
            pages = hook() if callable(hook) else []
            if not pages:
                shot(win, f"{index + 1:02d}-{slug}")
                continue
            for name, show in pages:
                name = _slug(name) if name else slug
                if not name.startswith(slug):
                    name = f"{slug}-{name}"
                name = f"{index + 1:02d}-{name}"
                if args.only and args.only not in name:
                    continue
                if show() is False:  # a page that was still computing when its wait ran out
                    unfinished.append(name)
                shot(win, name)

        if train_tab is not None and hasattr(train_tab, "show_frame") and len(s.frames) > 2:
            win.tab_widget.setCurrentIndex(0)
            train_tab.show_frame(len(s.frames) // 4)
            shot(train_tab, "01-train-scrubbed-to-an-early-step")
            train_tab.live.live_button.setChecked(True)

        # what a user sees when the config is invalid
        win.tab_widget.setCurrentIndex(0)
        widgets = win.config_panel.widgets
        old = widgets["n_heads"].value()
        widgets["n_heads"].setValue(3)
        win.docks["model"].raise_()
        shot(win, "window-invalid-config")
        widgets["n_heads"].setValue(old)

        # what a first launch shows: the starter model, its heads named (last: it replaces the model)
        attention, name = win.tabs.get("Attention"), "first-launch-starter-metrics"
        if attention is not None and (not args.only or args.only in name):
            attention.set_ablation(
                {}
            )  # every head on, as at a first launch (the Ablation shot switched one off)
        if attention is not None and (not args.only or args.only in name) and s.open_starter():
            win.tab_widget.setCurrentIndex(list(win.tabs).index("Attention"))
            attention.show_page("metrics")
            attention.wait_ready()
            shot(win, name)
    finally:
        win.close()  # stops every worker and waits for it (none may outlive the QApplication)
        app.processEvents()
        if created and not written:  # refused or failed before the first image: no empty folder left
            with contextlib.suppress(OSError):
                out.rmdir()
    print(f"{len(written)} screenshots in {out}", file=sys.stderr)
    if unfinished:
        print(
            f"still computing when captured (waited a minute each): {', '.join(unfinished)}",
            file=sys.stderr,
        )
        return 1
    return 0
