"""The one check of every path a command reads (:func:`check_input`) and the one reader of the JSON
files that come with a model (:func:`read_json`).

:func:`check_input` refuses, in one line and without opening it, a path that is there but is not what
is read: a FIFO (whose reader waits for a writer forever), a device (``/dev/zero`` never ends), a socket,
or a folder where a file is wanted. Every input goes through it: ``--config`` of every command, the
``--corpus`` file, ``--checkpoint``/``--resume``/MODEL (a folder or a file), and each JSON file read
here.

A checkpoint's ``config.json``, ``meta.json``, ``train_state.json`` and ``tokenizer.json``, a Hugging
Face folder's ``config.json``, tokenizer files and shard index, all go through it, so every unreadable,
non-UTF-8, malformed or absurdly nested file is one line of the same kind, raised as the caller's own
error (a :class:`~model.io.checkpoint.saved.CheckpointError`, a :class:`~model.text.tokens.TokenizerError`).
Our own config JSON, read from a file or from text, is parsed by the same :func:`parse_json`.

What ``json.loads`` lets through silently is refused here too: a key written twice in one object (the
last copy would win unseen; the line names the key) and a whole number too long for Python to convert
(over 4,300 digits; the line names the key that holds it).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from model.errors import first_line

#: The longest whole number parsed: Python refuses to convert longer digit strings (4,300 digits).
MAX_DIGITS = 4300


class _Refused(Exception):
    """Raised inside ``json.loads`` by the hooks below; :func:`parse_json` makes it the caller's error."""


class _LongNumber:
    """A whole number of ``digits`` digits, too long to convert: named by the object that holds it."""

    def __init__(self, digits: int):
        self.digits = digits


def _int(text: str) -> int | _LongNumber:
    return int(text) if len(text.lstrip("-")) <= MAX_DIGITS else _LongNumber(len(text.lstrip("-")))


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _Refused(f"repeats the key {key!r} (which value is meant?)")
    for key, value in pairs:
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, _LongNumber)), value)
        if isinstance(value, _LongNumber):
            raise _Refused(f"has a number of {value.digits} digits at {key!r}")
    return out


def parse_json(text: str, *, error: Callable[[str], Exception], what: str) -> Any:
    """The JSON value of ``text``, or ``error`` with one line naming ``what`` and what is wrong: not
    valid JSON (message and line), nested too deeply, a key repeated in one object, a whole number
    too long to convert."""
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise error(f"{what} is corrupt: its JSON is nested too deeply") from None
    except _Refused as exc:
        raise error(f"{what} {exc}") from None
    if isinstance(value, _LongNumber) or (
        isinstance(value, list) and any(isinstance(v, _LongNumber) for v in value)
    ):
        raise error(f"{what} has a number too long to read (over {MAX_DIGITS} digits)")
    return value


def check_input(
    path: str | Path, *, error: Callable[[str], Exception], what: str | None = None, kind: str = "file"
) -> Path:
    """Raise ``error`` with one line naming ``what`` (default: the path, quoted) unless ``path``, when
    it is there, may be read as ``kind``: ``"file"`` (a regular file), ``"folder"`` or ``"any"`` (either,
    as a model is). Nothing is opened: a FIFO, device or socket is refused by its ``stat`` alone (links
    followed). A missing path is the caller's to name (it may have somewhere else to look); returns
    ``path``."""
    path = Path(path)
    what = repr(str(path)) if what is None else what
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a name too long, a NUL byte: the caller's reading says so
        return path
    if stat.S_ISREG(mode):
        if kind == "folder":
            raise error(f"{what} is a file, not a folder")
    elif stat.S_ISDIR(mode):
        if kind == "file":
            raise error(f"{what} is a directory, not a regular file: name the file in it")
    else:
        wanted = "a regular file" if kind == "file" else "a regular file or folder"
        raise error(
            f"{what} is not {wanted} but a device, pipe or socket: it is not opened (reading it would "
            "wait or never end)"
        )
    return path


def read_json(path: str | Path, *, error: Callable[[str], Exception], what: str | None = None) -> Any:
    """The JSON value in ``path``, or ``error`` with one line naming the file (``what``, default its
    name) and what is wrong: it cannot be read, is not UTF-8, or anything :func:`parse_json` refuses."""
    path = Path(path)
    what = path.name if what is None else what
    check_input(path, error=error, what=what)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{what} is not UTF-8 text (corrupt file?)") from None
    except OSError as exc:
        raise error(f"{what} cannot be read: {exc.strerror or first_line(exc)}") from None
    return parse_json(text, error=error, what=what)


def cache_root() -> Path:
    """Where Attention Lab caches what it computed (each user of it a folder of its own below):
    ``$ATTENTION_LAB_CACHE``, else ``$XDG_CACHE_HOME/attention-lab`` (``XDG_CACHE_HOME`` defaults to
    ``~/.cache``)."""
    if os.environ.get("ATTENTION_LAB_CACHE"):
        return Path(os.environ["ATTENTION_LAB_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "attention-lab"


__all__ = ["MAX_DIGITS", "cache_root", "check_input", "parse_json", "read_json"]
