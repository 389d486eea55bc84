"""The one reader of the JSON files that come with a model: :func:`read_json`.

A checkpoint's ``config.json``, ``meta.json``, ``train_state.json`` and ``tokenizer.json``, a Hugging
Face folder's ``config.json``, tokenizer files and shard index, all go through it, so every unreadable,
non-UTF-8, malformed or absurdly nested file is one line of the same kind, raised as the caller's own
error (a :class:`~model.io.checkpoint.CheckpointError`, a :class:`~model.text.tokens.TokenizerError`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def read_json(path: str | Path, *, error: type[Exception], what: str | None = None) -> Any:
    """The JSON value in ``path``, or ``error`` with one line naming the file (``what``, default its
    name) and what is wrong: it cannot be read, is not UTF-8, is not valid JSON (message and line),
    or is nested too deeply to parse."""
    path = Path(path)
    what = path.name if what is None else what
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{what} is not UTF-8 text (corrupt file?)") from None
    except OSError as exc:
        raise error(f"{what} cannot be read: {exc.strerror or _first_line(exc)}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise error(f"{what} is corrupt: its JSON is nested too deeply") from None


__all__ = ["read_json"]
