"""`attention-lab download REPO[@REVISION]`: fetch a model from the Hugging Face Hub into its cache.

Only what a model needs is fetched (config, tokenizer, safetensors weights), through
``huggingface_hub`` into its standard cache (``HF_HUB_CACHE``; ``HF_ENDPOINT`` and ``HF_TOKEN`` are
honoured). Afterwards ``--checkpoint hf:REPO[@REVISION]`` opens it in ``inspect`` / ``generate``
without the network, and so does ``HF_HUB_OFFLINE=1``::

    attention-lab download openai-community/gpt2
    attention-lab download EleutherAI/pythia-70m@step3000
    attention-lab download --list                      # the catalogue: names, families, sizes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli import UserError
from model.budget.arithmetic import human_bytes

# model.io.hub is imported inside the functions: it imports torch (a second and a half), which
# `download --help`, a usage error and `inspect --config` (which imports local_checkpoint) never pay

HELP = "Download a model from the Hugging Face Hub into its cache (REPO[@REVISION])."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "repo",
        nargs="?",
        metavar="REPO[@REVISION]",
        help="a Hub repo id, e.g. openai-community/gpt2 or EleutherAI/pythia-70m@step3000 "
        "(hf: prefix optional; a catalogue name such as gpt2 works too)",
    )
    p.add_argument("--list", action="store_true", help="list the catalogue of small models people study")
    p.add_argument("--quiet", action="store_true", help="no progress line")


class TerminalProgress:
    """Download progress on stderr: one redrawn line on a terminal, a line every 10% otherwise."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._width = 0
        self._decile = -1

    def __call__(self, event) -> None:
        line = event.line()
        if self.tty:
            pad = " " * max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write("\r" + line + pad + ("\n" if event.finished else ""))
        else:
            decile = int(event.fraction * 10)
            if decile == self._decile and not event.finished:
                return
            self._decile = decile
            self.stream.write(line + "\n")
        self.stream.flush()


def local_checkpoint(spec: str, *, quiet: bool = False) -> str | Path:
    """What ``--checkpoint`` names, as a local path: ``hf:REPO[@REV]`` is fetched (progress on stderr)
    into the cache first; anything else is returned unchanged. Raises :class:`~model.io.hub.HubError`."""
    from model.io.hub import resolve

    return resolve(spec, on_progress=None if quiet else TerminalProgress())


def run(args: argparse.Namespace) -> int:
    from model.io.hub import CATALOGUE, HubError, fetch, resolve_name

    if args.list:
        for e in CATALOGUE:
            print(f"{e.name:<16} {e.repo_id:<38} {e.family:<9} {e.n_params:>5}  ≈{human_bytes(e.size)}")
        return 0
    if not args.repo:
        raise UserError(
            "name a repo, e.g. attention-lab download openai-community/gpt2 (--list: the catalogue)"
        )
    try:
        ref = resolve_name(args.repo)
        folder = fetch(ref, on_progress=None if args.quiet else TerminalProgress())
    except HubError as exc:
        raise UserError(str(exc)) from None
    print(f"{ref}: in the cache at {folder}")
    print(
        f'next: attention-lab inspect --checkpoint {ref.spec} --prompt "The cat sat on the mat" --out att.npz'
    )
    return 0
