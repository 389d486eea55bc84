"""`attention-lab [MODEL | --checkpoint MODEL]`: what the window opens on, read before Qt is imported.

A MODEL is anything File → Open reads (:data:`app.cli.MODEL_KINDS`); ``hf:REPO`` is fetched into the
Hugging Face cache first (progress on stderr) and ``package:NAME`` found in its package. A MODEL that is
neither a command nor a file, folder or model name is one line on stderr and exit code 2, so a typo of a
command (``attention-lab trian``) says so instead of opening a window; so is a file or folder that holds
no model File → Open would recognise (:func:`model.io.pretrained.detect`). ``--keep-stored`` /
``--no-keep-stored`` choose how MODEL's weights are held, as on the commands that open a model
(:mod:`app.commands.opening`) and File → Open's Weights list.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from app.cli import COMMANDS, MODEL_KINDS, WINDOW_EPILOG, WINDOW_USAGE, OneLineParser, UserError
from app.commands.opening import add_keep_stored
from model.errors import AttentionLabError
from model.files import check_input


@dataclass(frozen=True)
class WindowRequest:
    """What the window opens on: ``path`` (local; None: the starter) and ``name``, what the user
    called it when that says more than the path (``package:NAME`` → NAME, ``hf:REPO`` → REPO);
    ``stored``: how its weights are held (``open_model``'s ``stored``, None: automatic)."""

    path: str | None = None
    name: str = ""
    stored: bool | None = None


def _model_name(spec: str) -> str:
    from model.io.hub import is_hub_spec, resolve_name
    from model.io.hub.catalogue import PACKAGE_PREFIX

    if spec.startswith(PACKAGE_PREFIX):
        return spec[len(PACKAGE_PREFIX) :]
    return str(resolve_name(spec)) if is_hub_spec(spec) else ""


def _local_model(spec: str) -> WindowRequest:
    """``spec`` as a local model the window can open, or :class:`UserError` naming what is wrong."""
    from model.io.hub import HubError, is_hub_spec
    from model.io.hub.catalogue import PACKAGE_PREFIX

    if not spec.strip():
        raise UserError("the model's path is empty")
    if is_hub_spec(spec) or spec.startswith(PACKAGE_PREFIX):
        from app.commands.download import local_checkpoint  # hf: is fetched, with progress here

        try:
            return WindowRequest(str(local_checkpoint(spec)), _model_name(spec))
        except HubError as exc:
            raise UserError(str(exc)) from None
    path = check_input(Path(spec).expanduser(), error=UserError, what=spec, kind="any")
    if path.exists():
        from model.io.pretrained import detect  # torch: only when a model is named

        detect(path)  # a folder or file that holds no model: one line here, not a dialog in the window
        return WindowRequest(str(path))
    close = difflib.get_close_matches(spec, COMMANDS, n=1)
    if close and os.sep not in spec:
        raise UserError(f"{spec!r} is neither a command nor a model here: did you mean {close[0]!r}?")
    raise UserError(f"no such file or folder: {spec} (a MODEL is {MODEL_KINDS})")


def window_request(argv: list[str]) -> WindowRequest | int:
    """What ``attention-lab [MODEL | --checkpoint MODEL]`` opens the window on, or an exit code:
    0 after ``--help``, 2 after one line on stderr naming the mistake (nothing of Qt imported)."""
    parser = OneLineParser(
        prog="attention-lab",
        usage=WINDOW_USAGE,
        description="Open the window, on MODEL when one is named.",
        epilog=WINDOW_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", nargs="?", metavar="MODEL", help="the model to open")
    parser.add_argument("--checkpoint", metavar="MODEL", help="the model to open (the same as MODEL)")
    add_keep_stored(parser)
    try:
        args = parser.parse_args(argv)
        if args.model is not None and args.checkpoint is not None:
            parser.error("name the model once: MODEL or --checkpoint MODEL, not both")
        if args.model is None and args.checkpoint is None and args.keep_stored is not None:
            parser.error("--keep-stored and --no-keep-stored are for a MODEL you name (the starter is small)")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    spec = args.checkpoint if args.checkpoint is not None else args.model
    if spec is None:
        return WindowRequest()
    try:
        return replace(_local_model(spec), stored=args.keep_stored)
    except AttentionLabError as exc:
        print(f"attention-lab: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["WindowRequest", "window_request"]
