"""What every data source is: :class:`DataSource` (``get_batch`` / ``get_masked_batch`` of ``[B, T]``
int64 tensors), its error :class:`DataError`, and masked targets for ``F.cross_entropy``.

The sources themselves: text corpora (:mod:`model.text.corpora`) and synthetic tasks
(:mod:`model.text.tasks`), addressed by name through :func:`model.text.sources.resolve_source`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch

from model.errors import AttentionLabError
from model.text.tokens import Tokenizer

SPLITS = ("train", "val")
#: The target value ``F.cross_entropy`` skips by default.
IGNORE_INDEX = -100


class DataError(AttentionLabError, ValueError):
    """A data source cannot be built or sampled; the message is one line a user can act on."""


def masked_targets(y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``y`` with every position where ``mask`` is False set to :data:`IGNORE_INDEX` (-100)."""
    return y.masked_fill(~mask, IGNORE_INDEX)


def check_batch_args(split: str, batch_size: int, seq_len: int, generator: torch.Generator) -> None:
    """Raise :class:`DataError` for a split, batch size, length or generator a batch cannot be cut with."""
    if split not in SPLITS:
        raise DataError(f"split={split!r}: use 'train' or 'val'")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise DataError(f"batch_size={batch_size!r}: must be a positive integer")
    if not isinstance(seq_len, int) or seq_len < 1:
        raise DataError(f"seq_len={seq_len!r}: must be a positive integer")
    if not isinstance(generator, torch.Generator):
        raise DataError("generator: pass a torch.Generator seeded by manual_seed")


def check_scored_window(source: DataSource, seq_len: int) -> None:
    """Raise :class:`DataError` when windows of ``seq_len`` tokens are shorter than
    ``source.min_seq_len()``: no batch of them could score a target (its loss would be 0/0)."""
    need = source.min_seq_len()
    if seq_len < need:
        raise DataError(
            f"{source.name}: no target to score in seq_len={seq_len}: the first scored target is token "
            f"{need}; use seq_len of at least {need}"
        )


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

    def sample_windows(self, n: int, seq_len: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` windows of ``seq_len`` tokens to read rather than train on (a corpus run over heads):
        int64 [n, seq_len], drawn with ``generator`` as :meth:`get_batch` draws its inputs. A text
        draws them from its whole text (:class:`~model.text.corpora.TextCorpus`); raises
        :class:`DataError` when the source is shorter than one window."""
        x, _ = self.get_batch("train", n, seq_len, generator)
        return x

    def max_seq_len(self, split: str = "train") -> int | None:
        """The longest ``seq_len`` this split can serve, or None when there is no limit."""
        return None

    def min_seq_len(self) -> int:
        """The shortest ``seq_len`` whose windows can hold a scored target (a synthetic task's first
        scored token comes after its shortest episode's input): 1 for text."""
        return 1

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What a checkpoint records to know which data it trained on: ``name``, ``kind``, ``size``,
        ``sha256`` (of the text, or of a task's parameters), and kind-specific details. JSON-safe."""

    @abstractmethod
    def describe(self) -> str:
        """One line for a status bar or a log."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


__all__ = [
    "IGNORE_INDEX",
    "SPLITS",
    "DataError",
    "DataSource",
    "check_batch_args",
    "check_scored_window",
    "masked_targets",
]
