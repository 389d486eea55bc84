"""Entry point: no arguments opens the window; a subcommand runs the command line."""

from __future__ import annotations

import sys

from app.cli import main as cli_main
from model.machine import keep_freed_memory


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()  # before any thread starts: the heap every thread reuses (model/machine.py)
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        return cli_main(argv)
    from app.gui import launch  # Qt and the window: only without a subcommand (a command never pays for them)

    return launch()


if __name__ == "__main__":
    sys.exit(main())
