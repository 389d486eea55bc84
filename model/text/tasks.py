"""Synthetic tasks known to grow readable heads, generated on the fly from the caller's generator:
``induction`` (repeated random segments), ``copy``, ``reverse``, ``sort`` and ``prev_token``
(:data:`TASKS`; :func:`make_task` builds one from ``"task:NAME[:key=value,...]"``).

Every parameter is a whole number in a documented range, checked when the spec is parsed (before any
episode is drawn): ``n_symbols`` 2 to 62, ``min_len``/``max_len`` 1 to :data:`MAX_LEN`,
``min_gap``/``max_gap`` 0 to :data:`MAX_GAP`. A batch holds about ``seq_len`` / (episode length)
episodes of ``max_len`` (and ``max_gap``) slots each, so these bounds also bound its memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from model.text.datasource import DataError, DataSource, check_batch_args, check_scored_window
from model.text.tokens import CharTokenizer

#: The symbols tasks draw from, in id order: task token ``i < n_symbols`` is ``ALPHABET[i]``.
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
SEP = "="
EOS = "\n"
_PROMPT_SEED = 7
#: The longest segment (``max_len``) and gap (``max_gap``) a task takes: an episode of the longest
#: is about 12k tokens, longer than any context a task model here trains with.
MAX_LEN = 4096
MAX_GAP = 4096


def _range_problems(spec: Any, bounds: dict[str, tuple[int, int]]) -> list[str]:
    """One line per parameter of ``spec`` outside its ``bounds`` (name → (least, most))."""
    out = []
    for name, (lo, hi) in bounds.items():
        v = getattr(spec, name)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            out.append(f"{name}={_short(v)}: must be a whole number between {lo} and {hi:,}")
    return out


def _short(v: Any) -> str:
    """``repr(v)``, cut to 40 characters (a parameter value comes from the user's text)."""
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


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

    BOUNDS: ClassVar[dict[str, tuple[int, int]]] = {
        "n_symbols": (2, len(ALPHABET)),
        "min_len": (1, MAX_LEN),
        "max_len": (1, MAX_LEN),
        "min_gap": (0, MAX_GAP),
        "max_gap": (0, MAX_GAP),
    }

    def problems(self) -> list[str]:
        out = _range_problems(self, self.BOUNDS)
        if out:
            return out
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

    BOUNDS: ClassVar[dict[str, tuple[int, int]]] = {
        "n_symbols": (2, len(ALPHABET)),
        "min_len": (1, MAX_LEN),
        "max_len": (1, MAX_LEN),
    }

    def problems(self) -> list[str]:
        out = _range_problems(self, self.BOUNDS)
        if out:
            return out
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

    BOUNDS: ClassVar[dict[str, tuple[int, int]]] = {"n_symbols": (2, len(ALPHABET))}

    def problems(self) -> list[str]:
        return _range_problems(self, self.BOUNDS)


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
    merged: Pieces = []
    for k in range(len(chunks[0])):
        tokens, lengths, scored = (torch.cat([c[k][i] for c in chunks], 1) for i in range(3))
        merged.append((tokens, lengths, scored))
    return _pack(merged, n)


def _no(t: torch.Tensor) -> torch.Tensor:
    """All-False ``scored`` for a piece shaped like ``t``."""
    return torch.zeros(t.shape, dtype=torch.bool)


def _pack(pieces: Pieces, n: int):
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
        shorter than an episode) is drawn again, since its loss would be 0/0. A ``seq_len`` below
        :meth:`min_seq_len`, where no draw could score one, is refused at once."""
        check_batch_args(split, batch_size, seq_len, generator)
        check_scored_window(self, seq_len)
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

    def min_seq_len(self) -> int:
        s: InductionSpec = self.spec
        return max(s.min_len, 2) + s.min_gap + 1  # the repeat's second token, after segment and gap

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

    def min_seq_len(self) -> int:
        return self.spec.min_len + 1  # the output's first symbol, after the input and the separator

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

    def min_seq_len(self) -> int:
        return 2  # the first symbol has no previous one

    def get_masked_batch(self, split, batch_size, seq_len, generator):
        check_batch_args(split, batch_size, seq_len, generator)
        check_scored_window(self, seq_len)
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
        names = ", ".join(map(_short, unknown))
        raise DataError(f"task:{task} has no parameter {names}; its parameters: {valid}")
    bad = [k for k, v in overrides.items() if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        raise DataError(
            f"task:{task}: {', '.join(f'{k}={_short(overrides[k])}' for k in bad)} must be integers"
        )
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


def task_help() -> dict[str, str]:
    """Every synthetic task as a ``resolve_source`` name, with one line about it (its defaults)."""
    return {
        f"task:{name}": cls.summary.format(**dataclasses.asdict(cls.Spec())) for name, cls in TASKS.items()
    }


__all__ = [
    "ALPHABET",
    "EOS",
    "SEP",
    "TASKS",
    "CopyTask",
    "InductionSpec",
    "InductionTask",
    "PrevTokenSpec",
    "PrevTokenTask",
    "ReverseTask",
    "SequenceSpec",
    "SortTask",
    "SyntheticTask",
    "list_tasks",
    "make_task",
    "task_help",
]
