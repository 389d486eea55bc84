"""Entry point: a subcommand runs the command line; otherwise the window opens (on MODEL when
``attention-lab MODEL`` or ``attention-lab --checkpoint MODEL`` names one: app/cli.py)."""

from __future__ import annotations

import sys

from app.cli import main as cli_main
from app.cli import runs_a_command
from app.commands.window import window_request
from model.machine import keep_freed_memory


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()  # before any thread starts: the heap every thread reuses (model/machine.py)
    argv = sys.argv[1:] if argv is None else argv
    if runs_a_command(argv):
        return cli_main(argv)
    request = window_request(argv)  # a model named, checked before Qt is imported
    if isinstance(request, int):
        return request
    # Qt and the window: only without a subcommand (a command never pays for them)
    from app.shell.gui import launch

    return launch(model=request)


if __name__ == "__main__":
    sys.exit(main())
