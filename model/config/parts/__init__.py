"""The parts a :class:`~model.config.GPTConfig` is composed of, after the Transformer literature: the
model's core, the attention sublayer, the feed-forward sublayer, the norms and the positional encoding.

Every config field is declared in exactly one part, with its type, default, help and the choices or the
range it takes (:func:`~model.config.parts.base.declare`), and nowhere else (:meth:`Part.owns
<model.config.parts.base.Part.owns>`); :data:`FIELD_HELP`, :data:`CHOICES` and :data:`FLOAT_RANGES` are
read from those declarations, by the fields' file names; a config holds one part of each kind and is read
through them (``cfg.attention.n_kv_heads``). A part checks its own fields (``problems``: alone, and where
they must agree with another part's) and counts the parameters they create (``parameters``: rows of the
budget's parameter table, as :class:`~model.config.parts.base.Term`). ``cfg.core``, ``cfg.attention``,
``cfg.feed_forward``, ``cfg.normalization`` and ``cfg.positional`` are a config's parts (each kind's
:attr:`~model.config.parts.base.Part.key`), ``cfg.parts`` all of them in :data:`PARTS` order; the config's
problems are its parts' in that order, and its parameter count their sum
(:func:`model.budget.parameters.parameters`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from model.config.parts.attention import AttentionPart
from model.config.parts.base import Part, Term, declare
from model.config.parts.core import CorePart
from model.config.parts.feed_forward import FeedForwardPart
from model.config.parts.norms import NormPart
from model.config.parts.positions import PositionPart

#: Every kind of part, in the order a config's problems and parameter rows are gathered.
PARTS: tuple[type[Part], ...] = (CorePart, AttentionPart, FeedForwardPart, NormPart, PositionPart)


def declared(key: str) -> Mapping[str, Any]:
    """What the fields' declarations say under ``key`` (``"help"``, ``"choices"``, ``"bounds"``), by
    the fields' file names, part by part, for each field whose declaration says it (read-only)."""
    return MappingProxyType(
        {f.name: f.metadata[key] for kind in PARTS for f in dataclasses.fields(kind) if key in f.metadata}
    )


#: One line per field, shown as tooltips in the app and as ``--help`` text (each field's ``help``).
FIELD_HELP: Mapping[str, str] = declared("help")
#: The values each string field takes (each such field's ``choices``).
CHOICES: Mapping[str, tuple[str, ...]] = declared("choices")
#: Where each real-number field must lie, both ends included (each such field's ``bounds``): finite,
#: and far enough from 0 and from float32's limits that no infinity or NaN can come of it (a RoPE
#: factor of 1e-300 turns the frequencies into infinities, whose sine is NaN), yet wide around every
#: real model's value (noted beside each declaration).
FLOAT_RANGES: Mapping[str, tuple[float, float]] = declared("bounds")

__all__ = [
    "CHOICES",
    "FIELD_HELP",
    "FLOAT_RANGES",
    "PARTS",
    "AttentionPart",
    "CorePart",
    "FeedForwardPart",
    "NormPart",
    "Part",
    "PositionPart",
    "Term",
    "declare",
    "declared",
]
