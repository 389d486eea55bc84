"""What every loader gives back (:class:`Checkpoint`) and the one error it raises (:class:`CheckpointError`).

Kept apart from any one format so that the loaders (:mod:`model.io.checkpoint.saved`,
:mod:`model.io.hf.folder`, :mod:`model.io.gguf.load`, :mod:`model.io.checkpoint.nanogpt`) and the pieces
they share (:mod:`model.io.weights`, :mod:`model.io.build`) name them without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.config import GPTConfig
from model.errors import AttentionLabError
from model.nn.gpt import GPT
from model.text.tokens import Tokenizer

__all__ = ["Checkpoint", "CheckpointError"]


class CheckpointError(AttentionLabError, ValueError):
    """A checkpoint cannot be written or read; the message names the file and what is wrong."""


@dataclass
class Checkpoint:
    """What :func:`~model.io.checkpoint.saved.load_checkpoint` (and every other loader) returns.

    ``train_state`` is the dict saved with it (None when the checkpoint has none); its ``"tensors"``
    entry holds the tensors of optimizer.safetensors (on the CPU).
    """

    path: Path
    config: GPTConfig
    model: GPT
    tokenizer: Tokenizer
    train_state: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
