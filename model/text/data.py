"""Where training tokens come from: text corpora and synthetic tasks, behind one interface.

Every source is a :class:`DataSource` addressable by a string (:func:`resolve_source`):

* ``"builtin:NAME"`` -- text that needs no network (:func:`list_builtins`):
  ``builtin:stdlib`` (the default) is the installed Python's own standard-library source, read at run
  time; ``builtin:primer`` is a primer on attention that ships with the project; ``builtin:tales`` is
  an endless supply of small stories made by a grammar in code.
* ``"task:NAME"`` -- synthetic tasks known to grow readable heads (:func:`list_tasks`): ``induction``
  (repeated random segments), ``copy``, ``reverse``, ``sort`` and ``prev_token``. Parameters other than
  the defaults are part of the name: ``"task:induction:n_symbols=10,max_len=16"``.
* anything else is a path to a UTF-8 text file (:func:`load_text_file`).

``source.get_batch(split, batch_size, seq_len, generator)`` returns ``(x, y)``, two ``int64`` tensors of
shape ``[B, T]``. For language modelling (``source.next_token``) ``y[b, t] = x[b, t+1]``: both are cut
from one window of ``T + 1`` tokens. ``get_masked_batch`` adds ``mask`` ``[B, T]`` (bool): True where the
target is determined by the task's rule (the copied half of a copy task, ...); text corpora mask nothing.
``masked_targets(y, mask)`` turns it into targets that ``F.cross_entropy`` ignores.

All randomness comes from the ``torch.Generator`` passed in, so a seed fixes every batch.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import random
import re
import sys
import sysconfig
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from model.errors import AttentionLabError
from model.text.tokens import ByteTokenizer, CharTokenizer, Tokenizer, UnknownCharactersError

__all__ = [
    "ALPHABET",
    "DEFAULT_SOURCE",
    "IGNORE_INDEX",
    "CopyTask",
    "DataError",
    "DataSource",
    "InductionSpec",
    "InductionTask",
    "PrevTokenSpec",
    "PrevTokenTask",
    "ReverseTask",
    "SequenceSpec",
    "SortTask",
    "SyntheticTask",
    "TASKS",
    "TextCorpus",
    "builtin_corpus",
    "data_for_model",
    "generate_tales",
    "list_builtins",
    "list_tasks",
    "load_text_file",
    "make_task",
    "masked_targets",
    "min_tokens",
    "prompt_for",
    "resolve_source",
    "source_help",
]

DEFAULT_SOURCE = "builtin:stdlib"
SPLITS = ("train", "val")
#: The target value ``F.cross_entropy`` skips by default.
IGNORE_INDEX = -100


class DataError(AttentionLabError, ValueError):
    """A data source cannot be built or sampled; the message is one line a user can act on."""


def masked_targets(y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``y`` with every position where ``mask`` is False set to :data:`IGNORE_INDEX` (-100)."""
    return y.masked_fill(~mask, IGNORE_INDEX)


def _check_batch_args(split: str, batch_size: int, seq_len: int, generator: torch.Generator) -> None:
    if split not in SPLITS:
        raise DataError(f"split={split!r}: use 'train' or 'val'")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise DataError(f"batch_size={batch_size!r}: must be a positive integer")
    if not isinstance(seq_len, int) or seq_len < 1:
        raise DataError(f"seq_len={seq_len!r}: must be a positive integer")
    if not isinstance(generator, torch.Generator):
        raise DataError("generator: pass a torch.Generator seeded by manual_seed")


class DataSource(ABC):
    """What the trainer and the views need from a corpus or a task.

    Attributes: ``name`` (the string :func:`resolve_source` accepts to rebuild it), ``tokenizer``,
    ``default_prompt`` (a probe prompt worth watching in the attention view; it encodes with
    ``tokenizer``), ``next_token`` (True when ``y`` is ``x`` shifted by one, i.e. language modelling).
    """

    name: str
    tokenizer: Tokenizer
    default_prompt: str
    next_token: bool = True

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @abstractmethod
    def get_masked_batch(
        self, split: str, batch_size: int, seq_len: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(x, y, mask)``: int64 ``[B, T]``, int64 ``[B, T]``, bool ``[B, T]`` (True = scored target)."""

    def get_batch(
        self, split: str, batch_size: int, seq_len: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)``, int64 ``[B, T]``; consumes the generator exactly as :meth:`get_masked_batch`."""
        x, y, _ = self.get_masked_batch(split, batch_size, seq_len, generator)
        return x, y

    def max_seq_len(self, split: str = "train") -> int | None:
        """The longest ``seq_len`` this split can serve, or None when there is no limit."""
        return None

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What a checkpoint records to know which data it trained on: ``name``, ``kind``, ``size``,
        ``sha256`` (of the text, or of a task's parameters), and kind-specific details. JSON-safe."""

    @abstractmethod
    def describe(self) -> str:
        """One line for a status bar or a log."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


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
    ``min_seq_len`` (see :func:`min_tokens`).
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
        need = min_tokens(min_seq_len, val_fraction)
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
        _check_batch_args(split, batch_size, seq_len, generator)
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

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "text",
            "size": int(len(self.tokens)),
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


def load_text_file(path: str | os.PathLike, *, tokenizer: Tokenizer | None = None, val_fraction: float = 0.1):
    """A UTF-8 text file as a :class:`TextCorpus` named by its path.

    ``\\r\\n`` line ends become ``\\n``; a UTF-8 byte-order mark is dropped. :class:`DataError` says
    what is wrong for a missing file, a directory, an unreadable, empty, binary, non-UTF-8 (with the
    line, column and byte), too large or too short file.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{p}: no such file")
    if p.is_dir():
        raise DataError(f"{p} is a directory; give a text file")
    if not p.is_file():  # a device (/dev/zero reports size 0) or a FIFO would be read without end
        raise DataError(f"{p} is not a regular file (a device, pipe or socket); give a text file")
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
    return TextCorpus(text, name=str(p), tokenizer=tokenizer, val_fraction=val_fraction)


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


#: Size of ``builtin:tales`` (characters) and the seed of its grammar.
TALES_CHARS = 600_000
TALES_SEED = 2024
_SLOT = re.compile(r"\{(?:(a|A|cap):)?(\w+)\}")
_TALES_PROMPT = "Once upon a time, a little fox named Pip lived near the old mill. Every morning, Pip walked"


def generate_tales(n_chars: int = TALES_CHARS, seed: int = TALES_SEED) -> str:
    """Short stories from the grammar in ``assets/corpora/tales.json``, until ``n_chars`` are written.

    Each story binds a cast once (a hero with a name, kind and pronouns, a friend, a place, a thing) and
    expands ``{rule}`` slots at random; ``{a:x}``/``{A:x}`` add an article, ``{cap:x}`` a capital. The
    repeated names make it a natural-text corpus for induction-like copying. Deterministic for a seed.
    """
    grammar = json.loads((_CORPORA_DIR / "tales.json").read_text(encoding="utf-8"))
    rules: dict[str, list[str]] = grammar["rules"]
    cast: list[list[str]] = grammar["cast"]
    pronouns: dict[str, dict[str, str]] = grammar["pronouns"]
    rng = random.Random(seed)

    def pick(options: list[Any]) -> Any:
        return options[int(rng.random() * len(options))]

    def expand(template: str, env: dict[str, str], depth: int = 0) -> str:
        if depth > 20:
            raise RuntimeError("tales grammar recurses too deeply")

        def slot(m: re.Match) -> str:
            mod, key = m.group(1), m.group(2)
            value = env[key] if key in env else expand(pick(rules[key]), env, depth + 1)
            if mod in ("a", "A"):
                art = "an" if value[:1].lower() in "aeiou" else "a"
                value = f"{art.capitalize() if mod == 'A' else art} {value}"
            elif mod == "cap":
                value = value[:1].upper() + value[1:]
            return value

        return _SLOT.sub(slot, template)

    stories: list[str] = []
    total = 0
    while total < n_chars:
        hero = pick(cast)
        friend = pick([c for c in cast if c[1] != hero[1]])
        env = {"hero": hero[0], "kind": hero[1], "friend": friend[0], "fkind": friend[1]}
        env.update(pronouns[hero[2]])
        env.update({"f" + k: v for k, v in pronouns[friend[2]].items()})
        for key in grammar["bind"]:
            env[key] = expand(pick(rules[key]), env)
        story = expand(pick(rules["story"]), env)
        stories.append(story)
        total += len(story) + 2
    return "\n\n".join(stories) + "\n"


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


# ----------------------------------------------------------------------------------------------------
# Synthetic tasks

#: The symbols tasks draw from, in id order: task token ``i < n_symbols`` is ``ALPHABET[i]``.
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
SEP = "="
EOS = "\n"
_PROMPT_SEED = 7


@dataclass(frozen=True)
class InductionSpec:
    """The repeated-random-sequence task's knobs (the induction-head task).

    Each episode is ``S G S``: a segment ``S`` of ``len ~ U{min_len, max_len}`` uniform random symbols
    (out of ``n_symbols``), a gap ``G`` of ``gap ~ U{min_gap, max_gap}`` random symbols, then ``S`` again,
    so the repeat sits at offset ``len + gap`` from the original. Episodes are packed back to back.
    Scored targets (the mask): tokens 2.. of the repeat, the ones an induction head can predict
    ("after A came B last time, so predict B").
    """

    n_symbols: int = 26
    min_len: int = 8
    max_len: int = 24
    min_gap: int = 0
    max_gap: int = 16

    def problems(self) -> list[str]:
        out = _symbol_problems(self.n_symbols)
        if not 1 <= self.min_len <= self.max_len:
            out.append(f"min_len={self.min_len}, max_len={self.max_len}: need 1 <= min_len <= max_len")
        elif self.max_len < 2:
            out.append(
                f"max_len={self.max_len}: a repeat needs at least 2 symbols, since only what follows "
                f"its first symbol can be predicted from the earlier copy"
            )
        if not 0 <= self.min_gap <= self.max_gap:
            out.append(f"min_gap={self.min_gap}, max_gap={self.max_gap}: need 0 <= min_gap <= max_gap")
        return out


@dataclass(frozen=True)
class SequenceSpec:
    """Knobs of the copy, reverse and sort tasks: episodes ``input = output ⏎`` with an input of
    ``len ~ U{min_len, max_len}`` random symbols out of ``n_symbols``."""

    n_symbols: int = 10
    min_len: int = 3
    max_len: int = 8

    def problems(self) -> list[str]:
        out = _symbol_problems(self.n_symbols)
        if not 1 <= self.min_len <= self.max_len:
            out.append(f"min_len={self.min_len}, max_len={self.max_len}: need 1 <= min_len <= max_len")
        elif self.max_len < 2:
            out.append(
                f"max_len={self.max_len}: a repeat needs at least 2 symbols, since only what follows "
                f"its first symbol can be predicted from the earlier copy"
            )
        return out


@dataclass(frozen=True)
class PrevTokenSpec:
    """The previous-token task: uniform random symbols out of ``n_symbols``; target ``y[t] = x[t-1]``."""

    n_symbols: int = 26

    def problems(self) -> list[str]:
        return _symbol_problems(self.n_symbols)


def _symbol_problems(n: int) -> list[str]:
    if not 2 <= n <= len(ALPHABET):
        return [f"n_symbols={n}: must be between 2 and {len(ALPHABET)}"]
    return []


Pieces = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def _fill(make: Callable[[int], Pieces], n: int, mean_len: float, batch_size: int):
    """Draw chunks of episodes with ``make(E)`` until every row holds ``n`` tokens, then :func:`_pack`."""
    chunks: list[Pieces] = []
    total = torch.zeros(batch_size, dtype=torch.long)
    e = math.ceil(n / mean_len) + 1
    while True:
        pieces = make(e)
        chunks.append(pieces)
        total += sum(length.sum(1) for _, length, _ in pieces)
        if int(total.min()) >= n:
            break
    merged = [tuple(torch.cat([c[k][i] for c in chunks], 1) for i in range(3)) for k in range(len(chunks[0]))]
    return _pack(merged, n)


def _no(t: torch.Tensor) -> torch.Tensor:
    """All-False ``scored`` for a piece shaped like ``t``."""
    return torch.zeros(t.shape, dtype=torch.bool)


def _pack(pieces: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], n: int):
    """Concatenate episodes made of variable-length pieces and keep the first ``n`` tokens of each row.

    ``pieces``: ``(tokens [B, E, Lmax], lengths [B, E], scored [B, E, Lmax])`` per kind of piece; in row
    ``b``, episode ``e`` is the concatenation over pieces of ``tokens[b, e, :lengths[b, e]]``. Returns
    tokens ``[B, n]`` and scored ``[B, n]``. Every row must hold at least ``n`` tokens in all.
    """
    toks, valid, scored = [], [], []
    for t, length, s in pieces:
        toks.append(t)
        valid.append(torch.arange(t.shape[-1]) < length[..., None])
        scored.append(s)
    tok = torch.cat(toks, -1).flatten(1)
    ok = torch.cat(valid, -1).flatten(1)
    sc = torch.cat(scored, -1).flatten(1)
    pos = ok.long().cumsum(1) - 1
    keep = ok & (pos < n)
    b = torch.arange(tok.shape[0])[:, None].expand_as(tok)
    out = torch.empty(tok.shape[0], n, dtype=torch.long)
    out_sc = torch.empty(tok.shape[0], n, dtype=torch.bool)
    out[b[keep], pos[keep]] = tok[keep]
    out_sc[b[keep], pos[keep]] = sc[keep]
    return out, out_sc


def _prompt_symbols(n_symbols: int, k: int, seed: int = _PROMPT_SEED) -> str:
    """``k`` symbols, distinct while the alphabet allows, from a version-stable RNG."""
    rng = random.Random(seed)
    pool = list(ALPHABET[:n_symbols])
    out: list[str] = []
    while len(out) < k:
        bag = pool[:]
        for i in range(len(bag) - 1, 0, -1):  # Fisher-Yates with random(), stable across Python versions
            j = int(rng.random() * (i + 1))
            bag[i], bag[j] = bag[j], bag[i]
        out.extend(bag)
    return "".join(out[:k])


class SyntheticTask(DataSource):
    """A task whose batches are generated on the fly from the caller's generator.

    ``split`` does not change the distribution (both are fresh samples); pass a differently seeded
    generator for validation. Subclasses set ``task`` (the NAME in ``task:NAME``), ``Spec`` (a frozen
    dataclass of integer knobs with defaults), ``specials`` and implement ``_sample``.
    """

    task: ClassVar[str]
    Spec: ClassVar[type]
    specials: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def __init__(self, spec: Any = None, **overrides: int):
        spec = spec if spec is not None else self.Spec()
        if overrides:
            spec = _replace_spec(self.task, spec, overrides)
        problems = spec.problems()
        if problems:
            raise DataError(f"task:{self.task}: " + "; ".join(problems))
        self.spec = spec
        self.symbols = ALPHABET[: spec.n_symbols]
        self.tokenizer = CharTokenizer(self.symbols + self.specials)
        changed = {
            f.name: getattr(spec, f.name)
            for f in dataclasses.fields(spec)
            if getattr(spec, f.name) != f.default
        }
        self.name = f"task:{self.task}" + (
            ":" + ",".join(f"{k}={v}" for k, v in changed.items()) if changed else ""
        )
        self.default_prompt = self._default_prompt()

    @abstractmethod
    def _sample(self, batch_size: int, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Token sequences ``[B, n]`` and which tokens are scored ``[B, n]``."""

    @abstractmethod
    def _default_prompt(self) -> str: ...

    #: How many times a batch with no scored target is drawn again before giving up.
    MAX_REDRAWS = 20

    def get_masked_batch(self, split, batch_size, seq_len, generator):
        """Windows of episodes; a batch in which no target is scored (possible when ``seq_len`` is
        shorter than an episode) is drawn again, since its loss would be 0/0."""
        _check_batch_args(split, batch_size, seq_len, generator)
        for _ in range(self.MAX_REDRAWS):
            seq, scored = self._sample(batch_size, seq_len + 1, generator)
            if scored[:, 1:].any():
                return seq[:, :-1].contiguous(), seq[:, 1:].contiguous(), scored[:, 1:].contiguous()
        raise DataError(
            f"{self.name}: no target to score in {self.MAX_REDRAWS} batches of seq_len={seq_len}: "
            f"use a longer sequence"
        )

    def identity(self) -> dict[str, Any]:
        params = dataclasses.asdict(self.spec)
        blob = json.dumps({"task": self.task, "params": params, "format": 1}, sort_keys=True)
        return {
            "name": self.name,
            "kind": "task",
            "task": self.task,
            "params": params,
            "size": None,
            "sha256": hashlib.sha256(blob.encode()).hexdigest(),
        }

    def describe(self) -> str:
        summary = self.summary.format(**dataclasses.asdict(self.spec))
        return f"{self.name}: {summary}; vocabulary {self.vocab_size}"


class InductionTask(SyntheticTask):
    task = "induction"
    Spec = InductionSpec
    summary = (
        "random segments of {min_len}-{max_len} symbols (of {n_symbols}) repeated after a gap of "
        "{min_gap}-{max_gap}: the task that grows induction heads"
    )

    def _sample(self, batch_size, n, g):
        s: InductionSpec = self.spec
        b = batch_size

        def episodes(e: int) -> Pieces:
            lens = torch.randint(s.min_len, s.max_len + 1, (b, e), generator=g)
            gaps = torch.randint(s.min_gap, s.max_gap + 1, (b, e), generator=g)
            seg = torch.randint(s.n_symbols, (b, e, s.max_len), generator=g)
            gap = torch.randint(s.n_symbols, (b, e, max(s.max_gap, 1)), generator=g)
            repeat_scored = (torch.arange(s.max_len) >= 1).expand(b, e, -1)
            return [(seg, lens, _no(seg)), (gap, gaps, _no(gap)), (seg, lens, repeat_scored)]

        mean = s.min_len + s.max_len + (s.min_gap + s.max_gap) / 2
        return _fill(episodes, n, mean, b)

    def _default_prompt(self):
        s: InductionSpec = self.spec
        k = max(s.min_len, min(12, s.max_len))
        seg = _prompt_symbols(s.n_symbols, k)
        gap = _prompt_symbols(s.n_symbols, s.min_gap, seed=_PROMPT_SEED + 1)
        return seg + gap + seg


class _SequenceTask(SyntheticTask):
    """``input = output ⏎`` episodes; the output and the closing newline are scored."""

    Spec = SequenceSpec
    specials = SEP + EOS

    @staticmethod
    @abstractmethod
    def _transform(inp: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        """Outputs ``[B, E, Lmax]`` from inputs ``[B, E, Lmax]`` whose first ``lens`` entries count."""

    @classmethod
    def transform_text(cls, text: str) -> str:
        """The task's rule on a string of symbols (what the output half should be)."""
        ids = torch.tensor([[[ALPHABET.index(c) for c in text]]])
        out = cls._transform(ids, torch.tensor([[len(text)]]))
        return "".join(ALPHABET[i] for i in out[0, 0, : len(text)].tolist())

    def _sample(self, batch_size, n, g):
        s: SequenceSpec = self.spec
        b = batch_size
        sep_id, eos_id = s.n_symbols, s.n_symbols + 1

        def episodes(e: int) -> Pieces:
            lens = torch.randint(s.min_len, s.max_len + 1, (b, e), generator=g)
            inp = torch.randint(s.n_symbols, (b, e, s.max_len), generator=g)
            out = self._transform(inp, lens)
            one = torch.ones(b, e, dtype=torch.long)
            sep, eos = torch.full((b, e, 1), sep_id), torch.full((b, e, 1), eos_id)
            scored = [_no(inp), _no(sep), ~_no(out), ~_no(eos)]
            return list(zip([inp, sep, out, eos], [lens, one, lens, one], scored))

        return _fill(episodes, n, s.min_len + s.max_len + 2, b)

    def _default_prompt(self):
        inp = _prompt_symbols(self.spec.n_symbols, self.spec.max_len)
        return inp + SEP + self.transform_text(inp) + EOS


class CopyTask(_SequenceTask):
    task = "copy"
    summary = "copy {min_len}-{max_len} symbols (of {n_symbols}) after '='"

    @staticmethod
    def _transform(inp, lens):
        return inp


class ReverseTask(_SequenceTask):
    task = "reverse"
    summary = "reverse {min_len}-{max_len} symbols (of {n_symbols}) after '='"

    @staticmethod
    def _transform(inp, lens):
        idx = (lens[..., None] - 1 - torch.arange(inp.shape[-1])).clamp_min(0)
        return inp.gather(-1, idx)


class SortTask(_SequenceTask):
    task = "sort"
    summary = "sort {min_len}-{max_len} symbols (of {n_symbols}) after '='"

    @staticmethod
    def _transform(inp, lens):
        pad = torch.arange(inp.shape[-1]) >= lens[..., None]
        return inp.masked_fill(pad, torch.iinfo(torch.long).max).sort(-1).values.masked_fill(pad, 0)


class PrevTokenTask(SyntheticTask):
    """``x`` uniform random symbols, ``y[t] = x[t-1]`` (``y[0] = x[0]``, not scored)."""

    task = "prev_token"
    Spec = PrevTokenSpec
    summary = "name the previous symbol (of {n_symbols}): the task that grows previous-token heads"
    next_token = False

    def _sample(self, batch_size, n, g):  # pragma: no cover - get_masked_batch is overridden
        raise NotImplementedError

    def get_masked_batch(self, split, batch_size, seq_len, generator):
        _check_batch_args(split, batch_size, seq_len, generator)
        x = torch.randint(self.spec.n_symbols, (batch_size, seq_len), generator=generator)
        y = torch.cat([x[:, :1], x[:, :-1]], dim=1)
        mask = torch.ones_like(x, dtype=torch.bool)
        mask[:, 0] = False
        return x, y, mask

    def _default_prompt(self):
        return _prompt_symbols(self.spec.n_symbols, 24)


TASKS: dict[str, type[SyntheticTask]] = {
    t.task: t for t in (InductionTask, CopyTask, ReverseTask, SortTask, PrevTokenTask)
}


def list_tasks() -> list[str]:
    """The synthetic tasks as ``resolve_source`` names."""
    return [f"task:{k}" for k in TASKS]


def _replace_spec(task: str, spec: Any, overrides: dict[str, Any]) -> Any:
    fields = {f.name: f.default for f in dataclasses.fields(spec)}
    unknown = [k for k in overrides if k not in fields]
    if unknown:
        valid = ", ".join(f"{k} (default {v})" for k, v in fields.items())
        names = ", ".join(map(repr, unknown))
        raise DataError(f"task:{task} has no parameter {names}; its parameters: {valid}")
    bad = [k for k, v in overrides.items() if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        raise DataError(f"task:{task}: {', '.join(f'{k}={overrides[k]!r}' for k in bad)} must be integers")
    return dataclasses.replace(spec, **overrides)


def make_task(spec: str) -> SyntheticTask:
    """``make_task("induction")``, ``make_task("task:copy:max_len=12,n_symbols=6")``."""
    body = spec.removeprefix("task:")
    name, _, params = body.partition(":")
    if name not in TASKS:
        raise DataError(f"unknown task {name!r}; choose one of: {', '.join(list_tasks())}")
    overrides: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in params.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise DataError(f"task:{name}: write parameters as key=value, got {item!r}")
        try:
            overrides[key.strip()] = int(value)
        except ValueError:
            overrides[key.strip()] = value.strip()
    return TASKS[name](**overrides)


# ----------------------------------------------------------------------------------------------------
# One entry point


def source_help() -> dict[str, str]:
    """Every named source with one line about it (for menus, tooltips and ``--help``)."""
    out = {f"builtin:{k}": v[0] for k, v in _BUILTINS.items()}
    for name, cls in TASKS.items():
        out[f"task:{name}"] = cls.summary.format(**dataclasses.asdict(cls.Spec()))
    return out


def resolve_source(spec: str, *, tokenizer: Tokenizer | None = None) -> DataSource:
    """``"builtin:NAME"`` | ``"task:NAME[:key=value,...]"`` | a path to a UTF-8 text file.

    ``tokenizer``: encode a corpus with this tokenizer instead of building one from its text (resuming a
    checkpoint); a task accepts only its own. Raises :class:`DataError` naming the valid choices.
    """
    spec = str(spec).strip()
    if not spec:
        raise DataError(
            f"no data source given; use one of {', '.join(list_builtins() + list_tasks())} or a text file"
        )
    if spec.startswith("builtin:"):
        return builtin_corpus(spec, tokenizer)
    if spec.startswith("task:"):
        task = make_task(spec)
        if tokenizer is not None and tokenizer != task.tokenizer:
            raise DataError(
                f"{task.name} uses its own vocabulary of {task.vocab_size} symbols, which differs from the "
                "tokenizer given"
            )
        return task
    return load_text_file(spec, tokenizer=tokenizer)


def data_for_model(
    tokenizer: Tokenizer, current: DataSource | None = None, current_spec: str = ""
) -> tuple[DataSource | None, str, str]:
    """Which data fits a model loaded with ``tokenizer``: ``(source, spec, note)``.

    The ``current`` source when its tokenizer is the model's (keep it); else the current data named by
    ``current_spec`` re-encoded with the model's tokenizer (fine-tuning on it); else none, and ``note``
    says why (e.g. a synthetic task's own symbols, or characters the vocabulary lacks).
    """
    if current is not None and current.tokenizer == tokenizer:
        return current, current_spec, ""
    if not current_spec:
        return None, "", ""
    try:
        return resolve_source(current_spec, tokenizer=tokenizer), current_spec, ""
    except Exception:  # noqa: BLE001 - any reason the data cannot be encoded: say so, open the model
        why = f"{current_spec} cannot be encoded with this model's tokenizer: choose other data to fine-tune"
        return None, "", why


#: Prompts tried, in order, when a model arrives without data that knows a prompt for it.
FALLBACK_PROMPTS = ("The quick brown fox jumps over the lazy dog. ", "the cat sat on the mat", "abcabcabc")


def prompt_for(tokenizer: Tokenizer, *candidates: str) -> str:
    """The first of ``candidates`` (then :data:`FALLBACK_PROMPTS`) that ``tokenizer`` encodes whole;
    failing all, the text of its first 16 tokens."""
    for text in (*candidates, *FALLBACK_PROMPTS):
        if not text:
            continue
        try:
            tokenizer.encode(text)
            return text
        except Exception:  # noqa: BLE001 - a tokenizer's own error for text it cannot encode
            continue
    return tokenizer.decode(list(range(min(16, tokenizer.vocab_size))))
