"""Command-line interface: `attention-lab SUBCOMMAND ...`, and `attention-lab [MODEL]`, the window.

Each subcommand lives in ``app/commands/<name>.py`` and exposes ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported lazily so that
`attention-lab budget` does not pay for torch or Qt start-up.

Without a subcommand the window opens (:mod:`app.commands.window` reads what it opens on): ``attention-lab
MODEL`` or ``attention-lab --checkpoint MODEL`` opens it on MODEL, as File → Open would; a MODEL that
is no file, folder or model name is one line and exit 2 before Qt is even imported.

User mistakes raise :class:`UserError` or any :class:`model.errors.AttentionLabError` (the one base of
``model/``'s errors); they become one line on stderr and exit code 2, never a traceback.

A reader that stops early (``attention-lab budget --json | head -c 100``) ends the command quietly,
as it ends a Unix tool: no traceback, nothing on stderr, exit status :data:`BROKEN_PIPE_STATUS`
(``--help`` is argparse's, which ignores the failed write itself: quiet too, exit status 0).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from typing import NoReturn

from model.budget.sizing import OVERRIDE_ENV
from model.errors import AttentionLabError

COMMANDS: dict[str, str] = {
    "train": "Train a model on a corpus or synthetic task and save a checkpoint.",
    "generate": "Generate text from a checkpoint.",
    "inspect": "Run a prompt through a model and export every head's attention as .npz.",
    "circuits": "How a model's heads compose (Q/K/V composition, copying), from its weights alone.",
    "qk-map": "One head's queries and keys over a corpus in one 2-D map (AttentionViz), your prompt in it.",
    "heads": "Every head's scores over a corpus (bootstrap intervals), top examples and clusters of heads.",
    "sae": "Sparse autoencoders on a site of a layer: train one (SAELens's format, resumable), evaluate "
    "one, read its features.",
    "download": "Download a model from the Hugging Face Hub into its cache (REPO[@REVISION]).",
    "budget": "Parameters, FLOPs, KV cache, memory and training cost of a config or preset.",
    "screenshot": "Render every tab of the app to PNG files, offscreen.",
}


#: The exit status when stdout's reader went away: 128 + SIGPIPE, what a shell reports for a Unix
#: tool that SIGPIPE ended (``yes | head``), so ``set -o pipefail`` sees the output was cut short,
#: and not 1, which ``train`` returns for a run that diverged.
BROKEN_PIPE_STATUS = 141

#: Subcommands that build a model, sized first (model.sizing); --no-size-check skips the refusal.
SIZED = ("train", "generate", "inspect", "circuits", "heads", "qk-map")


class UserError(AttentionLabError):
    """A mistake the user can fix (found by a command itself): printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's own convention)
        self.exit(2, f"{self.prog}: error: {message}\n")


#: What a MODEL can be, wherever a model is named (the window, --checkpoint of the commands).
MODEL_KINDS = (
    "a checkpoint folder (ours, Hugging Face, Pythia), a .gguf file, a nanoGPT ckpt.pt, "
    "hf:REPO[@REV] (fetched into the Hugging Face cache) or package:NAME"
)

WINDOW_USAGE = """\
attention-lab [MODEL | --checkpoint MODEL] [--keep-stored | --no-keep-stored]
       attention-lab COMMAND [OPTIONS]"""

WINDOW_EPILOG = f"""\
Without a COMMAND the window opens: on the starter model, or on MODEL when one is named
(attention-lab SmolLM2.gguf, attention-lab --checkpoint package:SmolLM2-135M-Instruct).
MODEL is {MODEL_KINDS}.
attention-lab COMMAND --help tells what a command takes."""


def add_size_check(p: argparse.ArgumentParser) -> None:
    """``--no-size-check``, for a command (or a command's action) that builds a model."""
    p.add_argument(
        "--no-size-check",
        action="store_true",
        help="build the model even when it looks too large for this machine's memory",
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only`` just that subcommand's module is imported (the others stay bare)."""
    parser = OneLineParser(
        prog="attention-lab",
        usage=WINDOW_USAGE,
        description="Attention Lab: watch every attention head work.",
        epilog=WINDOW_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=OneLineParser, prog="attention-lab"
    )
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            module = importlib.import_module(f"app.commands.{name.replace('-', '_')}")
            module.add_arguments(p)
            if name in SIZED:
                add_size_check(p)
            p.set_defaults(_module=module)
    return parser


def runs_a_command(argv: list[str]) -> bool:
    """Whether ``argv`` asks for a subcommand (or the top-level help) rather than the window."""
    return bool(argv) and (argv[0] in COMMANDS or argv[0] in ("-h", "--help"))


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv``; its exit status (see the module docstring)."""
    try:
        rc = _main(argv)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, so that output a closed pipe refuses is found inside the try
        return rc
    except BrokenPipeError:  # Python's recipe: stdout at /dev/null, so the flush at exit is quiet too
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return BROKEN_PIPE_STATUS


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse's usage errors (2) and --help (0), as a return code
        return exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help()
        return 0
    saved_override = os.environ.get(OVERRIDE_ENV)
    if getattr(args, "no_size_check", False):
        os.environ[OVERRIDE_ENV] = "1"
    try:
        return int(args._module.run(args) or 0)
    except AttentionLabError as exc:
        print(f"attention-lab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(
            f"attention-lab {args.command}: error: out of memory (the estimate was too low); "
            "use a smaller model, batch or prompt",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print(f"attention-lab {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        if saved_override is None:
            os.environ.pop(OVERRIDE_ENV, None)
        else:
            os.environ[OVERRIDE_ENV] = saved_override
