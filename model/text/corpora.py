"""Text corpora: a text tokenized once and split into training and validation windows
(:class:`TextCorpus`), a user's UTF-8 text file (:func:`load_text_file`) or folder of them
(:func:`load_text_folder`), and the built-in corpora
(:func:`builtin_corpus`): ``builtin:stdlib``, ``builtin:primer`` and ``builtin:tales``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.files import check_input
from model.text.datasource import DataError, DataSource, check_batch_args
from model.text.tales import TALES_SEED, generate_tales
from model.text.tokens import ByteTokenizer, CharTokenizer, Tokenizer, UnknownCharactersError

# ----------------------------------------------------------------------------------------------------
# Text corpora


def _unit(tokenizer: Tokenizer) -> str:
    if isinstance(tokenizer, CharTokenizer):
        return "characters"
    return "bytes" if isinstance(tokenizer, ByteTokenizer) else "tokens"


def _split_sizes(n: int, val_fraction: float) -> tuple[int, int]:
    n_val = int(n * val_fraction)
    return n - n_val, n_val


def min_tokens(min_seq_len: int, val_fraction: float) -> int:
    """The fewest tokens a text needs so that both splits hold one window of ``min_seq_len + 1``."""
    need = min_seq_len + 1
    n = max(2 * need, math.ceil(need / val_fraction) - 2)
    while min(_split_sizes(n, val_fraction)) < need:
        n += 1
    return n


class TextCorpus(DataSource):
    """A text, tokenized once, split into training text (the first ``1 - val_fraction``) and validation
    text (the rest, at the end), sampled as random windows.

    ``get_batch`` draws ``B`` start offsets ``i ~ U{0, N_split - T - 1}`` from ``generator`` and returns
    ``x = tokens[i : i+T]``, ``y = tokens[i+1 : i+T+1]``. Windows never cross from one split into the
    other. Tokens are kept as a numpy ``int32`` array (``self.tokens``).

    ``tokenizer=None`` builds a :class:`CharTokenizer` from the text itself. Raises :class:`DataError`
    when the text has characters the given tokenizer lacks, or is too short for two windows of
    ``min_seq_len`` (see :func:`min_tokens`; 0: a text that is read, not trained on, needs no window:
    :meth:`sample_windows` says when it is shorter than what is asked).
    """

    MIN_SEQ_LEN = 16

    def __init__(
        self,
        text: str,
        name: str = "text",
        tokenizer: Tokenizer | None = None,
        val_fraction: float = 0.1,
        *,
        default_prompt: str | None = None,
        description: str = "",
        min_seq_len: int = MIN_SEQ_LEN,
        details: dict[str, Any] | None = None,
    ):
        if not (0.0 < val_fraction < 1.0):
            raise DataError(f"val_fraction={val_fraction!r}: must be between 0 and 1 (e.g. 0.1)")
        if not text:
            raise DataError(f"{name} is empty")
        self.name = name
        self.val_fraction = float(val_fraction)
        self.description = description
        self.tokenizer = tokenizer if tokenizer is not None else CharTokenizer.from_text(text)
        try:
            self.tokens = self.tokenizer.encode_array(text)
        except UnknownCharactersError as e:
            raise DataError(f"{name}: {e}") from None
        n = len(self.tokens)
        need = min_tokens(min_seq_len, val_fraction) if min_seq_len else 1
        if n < need:
            unit = _unit(self.tokenizer)
            raise DataError(
                f"{name} is too short: {n} {unit}, but at least {need} are needed to cut training and "
                f"validation windows of {min_seq_len} tokens ({val_fraction:.0%} held out for validation)"
            )
        n_train, _ = _split_sizes(n, val_fraction)
        self.train_tokens = self.tokens[:n_train]
        self.val_tokens = self.tokens[n_train:]
        self.n_chars = len(text)
        self.sha256 = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        self._details = dict(details or {})
        if default_prompt is None:
            default_prompt = self._prompt_from(text)
        self.default_prompt = default_prompt

    def _prompt_from(self, text: str, width: int = 96) -> str:
        """A readable stretch from the validation end of the text (start of a line, cut at a space)."""
        start = min(int(len(text) * (1 - self.val_fraction)), max(0, len(text) - width))
        nl = text.find("\n", start, start + 4 * width)
        if nl >= 0:
            start = nl + 1
        chunk = text[start : start + width]
        cut = chunk.rfind(" ")
        if cut > width // 2:
            chunk = chunk[:cut]
        if not chunk.strip():
            chunk = text[:width]
        return chunk

    def _split(self, split: str) -> np.ndarray:
        return self.train_tokens if split == "train" else self.val_tokens

    def max_seq_len(self, split: str = "train") -> int:
        return len(self._split(split)) - 1

    def get_masked_batch(self, split, batch_size, seq_len, generator):
        x, y = self.get_batch(split, batch_size, seq_len, generator)
        return x, y, torch.ones_like(x, dtype=torch.bool)

    def get_batch(self, split, batch_size, seq_len, generator):
        check_batch_args(split, batch_size, seq_len, generator)
        data = self._split(split)
        if len(data) < seq_len + 1:
            what = "training" if split == "train" else "validation"
            raise DataError(
                f"seq_len={seq_len} is too long for {self.name}: its {what} text has {len(data)} tokens, "
                f"enough for seq_len <= {len(data) - 1}; lower seq_len or use a longer text"
            )
        starts = torch.randint(len(data) - seq_len, (batch_size,), generator=generator).numpy()
        window = data[starts[:, None] + np.arange(seq_len + 1)]
        w = torch.from_numpy(window.astype(np.int64))
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def sample_windows(self, n, seq_len, generator):
        """``n`` windows of ``seq_len`` tokens from anywhere in the text (both splits: nothing here is
        trained on), starts ``i ~ U{0, N − T}``; :class:`DataError` when the text is shorter than one."""
        if len(self.tokens) < seq_len:
            raise DataError(
                f"{self.name} is shorter than one prompt: {len(self.tokens)} {_unit(self.tokenizer)}, "
                f"a prompt of {seq_len} needs {seq_len}; lower the length or use a longer text"
            )
        starts = torch.randint(len(self.tokens) - seq_len + 1, (n,), generator=generator).numpy()
        window = self.tokens[starts[:, None] + np.arange(seq_len)]
        return torch.from_numpy(window.astype(np.int64))

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "text",
            "size": len(self.tokens),
            "sha256": self.sha256,
            "chars": self.n_chars,
            "val_fraction": self.val_fraction,
            "tokenizer": self.tokenizer.kind,
            **self._details,
        }

    def describe(self) -> str:
        head = f"{self.name} ({self.description})" if self.description else self.name
        return (
            f"{head}: {self.n_chars:,} characters, vocabulary {self.vocab_size}, "
            f"{len(self.train_tokens):,} training / {len(self.val_tokens):,} validation tokens"
        )


# ----------------------------------------------------------------------------------------------------
# User text files

MAX_FILE_BYTES = 256 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def load_text_file(
    path: str | os.PathLike,
    *,
    tokenizer: Tokenizer | None = None,
    val_fraction: float = 0.1,
    min_seq_len: int = TextCorpus.MIN_SEQ_LEN,
):
    """A UTF-8 text file (:func:`read_text_file`) as a :class:`TextCorpus` named by its path;
    :class:`DataError` also for a text too short for windows of ``min_seq_len``."""
    p = Path(path).expanduser()
    text = read_text_file(p)
    return TextCorpus(
        text, name=str(p), tokenizer=tokenizer, val_fraction=val_fraction, min_seq_len=min_seq_len
    )


def read_text_file(path: str | os.PathLike) -> str:
    """The text of a UTF-8 text file, checked: ``\\r\\n`` line ends become ``\\n``; a UTF-8 byte-order
    mark is dropped. :class:`DataError` says what is wrong for a missing file, a directory, an
    unreadable, empty, binary, non-UTF-8 (with the line, column and byte) or too large file.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{p}: no such file")
    check_input(p, error=DataError, what=str(p))  # a folder, FIFO or device (/dev/zero never ends)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise DataError(
                f"{p} is too large ({size / 2**20:.0f} MiB); the limit is {MAX_FILE_BYTES / 2**20:.0f} MiB, "
                "cut it down"
            )
        data = p.read_bytes()
    except OSError as e:
        raise DataError(f"{p}: cannot read it ({e.strerror or e})") from None
    if not data:
        raise DataError(f"{p} is empty")
    if b"\x00" in data[: 1 << 20]:
        raise DataError(f"{p} looks binary (it contains NUL bytes), not like a text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        head = data[:65536]
        controls = sum(1 for b in head if b < 32 and b not in b"\t\n\r\f")
        if controls > 0.1 * len(head):
            raise DataError(f"{p} looks binary (mostly non-printable bytes), not like a text file") from None
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(
            f"{p} is not UTF-8 text: byte 0x{data[e.start]:02x} at line {line}, column {col} "
            f"(byte offset {e.start}) cannot be decoded; save the file as UTF-8"
        ) from None
    sample = text[:65536]
    if len(_CONTROL.findall(sample)) > 0.1 * len(sample):
        raise DataError(f"{p} looks binary (mostly non-printable characters), not like a text file")
    text = text.replace("\r\n", "\n")
    if not text.strip():
        raise DataError(f"{p} is empty (only whitespace)")
    return text


def read_text_folder(path: str | os.PathLike) -> tuple[str, int]:
    """The text files of a folder and its subfolders (hidden ones left out), in the order of their paths,
    each read by :func:`read_text_file` and joined by a blank line; a file that is not UTF-8 text
    (binary, empty) is skipped. Returns ``(text, files read)``; :class:`DataError` when none is text or
    the whole passes :data:`MAX_FILE_BYTES`."""
    root = Path(path).expanduser()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    parts: list[str] = []
    total = 0
    for p in files:
        total += p.stat().st_size
        if total > MAX_FILE_BYTES:
            raise DataError(f"{root} holds more than {MAX_FILE_BYTES / 2**20:.0f} MiB of files; choose fewer")
        try:
            parts.append(read_text_file(p).rstrip("\n"))
        except DataError:
            continue
    if not parts:
        raise DataError(f"{root} holds no UTF-8 text file ({len(files)} files, none of them text)")
    return "\n\n".join(parts) + "\n", len(parts)


def load_text_folder(path: str | os.PathLike, *, tokenizer: Tokenizer | None = None, min_seq_len: int = 16):
    """A folder's text files (:func:`read_text_folder`) as one :class:`TextCorpus` named by its path."""
    text, n = read_text_folder(path)
    return TextCorpus(
        text, name=str(path), tokenizer=tokenizer, description=f"{n} text files", min_seq_len=min_seq_len
    )


# ----------------------------------------------------------------------------------------------------
# Built-in corpora

#: How much standard-library source ``builtin:stdlib`` reads (characters).
STDLIB_CAP_CHARS = 1_500_000
#: Below this much usable source the stdlib is taken as absent and the project's own text is used.
STDLIB_MIN_CHARS = 200_000
_STDLIB_SKIP_DIRS = frozenset(
    {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "turtledemo"}
)
_PLAIN_SOURCE = re.compile(r"[^\n\x20-\x7e]")
_CORPORA_DIR = Path(__file__).resolve().parents[2] / "assets" / "corpora"
_PROJECT_DIR = Path(__file__).resolve().parents[2]

_STDLIB_PROMPT = "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n"


def stdlib_dir() -> Path:
    """Where the running Python keeps its standard-library source."""
    return Path(sysconfig.get_paths()["stdlib"])


def _source_files(root: Path) -> list[Path]:
    """``.py`` files under ``root`` minus tests, in a fixed order: top-level modules, then packages,
    each sorted by relative path."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _STDLIB_SKIP_DIRS and not d.startswith("."))
        found.extend(Path(dirpath) / f for f in filenames if f.endswith(".py"))
    rel = {p: p.relative_to(root).as_posix() for p in found}
    return sorted(found, key=lambda p: ("/" in rel[p], rel[p]))


def _concat_sources(root: Path, files: list[Path], cap: int) -> tuple[str, int]:
    """Concatenate plain-ASCII source files (others skipped) under ``# ---- path ----`` headers,
    stopping at ``cap`` characters (cut at a line end). Returns (text, files used)."""
    parts: list[str] = []
    total = used = 0
    for p in files:
        try:
            src = p.read_text(encoding="utf-8").replace("\r\n", "\n")
        except (OSError, UnicodeDecodeError):
            continue
        if _PLAIN_SOURCE.search(src) or not src.strip():
            continue
        part = f"# ---- {p.relative_to(root).as_posix()} ----\n{src.rstrip()}\n\n"
        parts.append(part)
        total += len(part)
        used += 1
        if total >= cap:
            break
    text = "".join(parts)
    if len(text) > cap:
        text = text[: text.rfind("\n", 0, cap) + 1]
    return text, used


@functools.lru_cache(maxsize=2)
def _stdlib_text(root: str, cap: int) -> tuple[str, int]:
    r = Path(root)
    if not r.is_dir():
        return "", 0
    return _concat_sources(r, _source_files(r), cap)


@functools.lru_cache(maxsize=1)
def _project_text() -> str:
    """The project's own words: its primer and its Python source."""
    text, _ = _concat_sources(
        _PROJECT_DIR,
        [p for pkg in ("model", "app") for p in _source_files(_PROJECT_DIR / pkg)],
        STDLIB_CAP_CHARS,
    )
    return _primer_text() + "\n\n" + text


def _load_stdlib(tokenizer: Tokenizer | None = None) -> TextCorpus:
    root = stdlib_dir()
    text, n_files = _stdlib_text(str(root), STDLIB_CAP_CHARS)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if len(text) >= STDLIB_MIN_CHARS:
        return TextCorpus(
            text,
            name="builtin:stdlib",
            tokenizer=tokenizer,
            default_prompt=_STDLIB_PROMPT,
            description=f"Python {version} standard-library source, {n_files} files",
            details={"python": version, "files": n_files},
        )
    return TextCorpus(
        _project_text(),
        name="builtin:stdlib",
        tokenizer=tokenizer,
        default_prompt=_STDLIB_PROMPT,
        description="Python's standard-library source was not found: Attention Lab's own text instead",
        details={"fallback": "project"},
    )


@functools.lru_cache(maxsize=1)
def _primer_text() -> str:
    return (_CORPORA_DIR / "primer.txt").read_text(encoding="utf-8")


def _load_primer(tokenizer: Tokenizer | None = None) -> TextCorpus:
    return TextCorpus(
        _primer_text(),
        name="builtin:primer",
        tokenizer=tokenizer,
        default_prompt="The attention head of a query looks back at the keys of earlier tokens.",
        description="a primer on attention and Transformers written for Attention Lab",
    )


_TALES_PROMPT = "Once upon a time, a little fox named Pip lived near the old mill. Every morning, Pip walked"


@functools.lru_cache(maxsize=1)
def _tales_text() -> str:
    return generate_tales()


def _load_tales(tokenizer: Tokenizer | None = None) -> TextCorpus:
    return TextCorpus(
        _tales_text(),
        name="builtin:tales",
        tokenizer=tokenizer,
        default_prompt=_TALES_PROMPT,
        description="little stories from a grammar in Attention Lab's code",
        details={"seed": TALES_SEED},
    )


_BUILTINS: dict[str, tuple[str, Callable[[Tokenizer | None], TextCorpus]]] = {
    "stdlib": (
        "the installed Python's standard-library source, read at run time (about 1.5 MB of code)",
        _load_stdlib,
    ),
    "primer": (
        "a primer on attention and Transformers written for Attention Lab (small: overfits fast)",
        _load_primer,
    ),
    "tales": (
        "little stories generated by a grammar in code (600 KB, small vocabulary, repeated names)",
        _load_tales,
    ),
}


def list_builtins() -> list[str]:
    """The built-in corpora as ``resolve_source`` names, the default first."""
    return [f"builtin:{k}" for k in _BUILTINS]


def builtin_corpus(name: str, tokenizer: Tokenizer | None = None) -> TextCorpus:
    """``builtin_corpus("stdlib")`` (or ``"builtin:stdlib"``); ``tokenizer`` as in :class:`TextCorpus`."""
    key = name.removeprefix("builtin:")
    if key not in _BUILTINS:
        raise DataError(f"unknown built-in corpus {key!r}; choose one of: {', '.join(list_builtins())}")
    return _BUILTINS[key][1](tokenizer)


def builtin_help() -> dict[str, str]:
    """Every built-in corpus as a ``resolve_source`` name, with one line about it."""
    return {f"builtin:{k}": v[0] for k, v in _BUILTINS.items()}


__all__ = [
    "MAX_FILE_BYTES",
    "STDLIB_CAP_CHARS",
    "TextCorpus",
    "builtin_corpus",
    "builtin_help",
    "list_builtins",
    "load_text_file",
    "load_text_folder",
    "min_tokens",
    "read_text_file",
    "read_text_folder",
    "stdlib_dir",
]
