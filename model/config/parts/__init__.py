"""The parts a :class:`~model.config.GPTConfig` is composed of, after the Transformer literature: the
model's core, the attention sublayer, the feed-forward sublayer, the norms and the positional encoding.

Every config field is declared in exactly one part, with its type and default, and nowhere else
(:meth:`Part.owns <model.config.parts.base.Part.owns>`); a config holds one part of each kind and is
read through them (``cfg.attention.n_kv_heads``). A part checks its own fields (``problems``: alone,
and where they must agree with another part's) and counts the parameters they create
(``parameters``: rows of the budget's parameter table, as :class:`~model.config.parts.base.Term`).
``cfg.core``, ``cfg.attention``, ``cfg.feed_forward``, ``cfg.normalization`` and ``cfg.positional``
are a config's parts (each kind's :attr:`~model.config.parts.base.Part.key`), ``cfg.parts`` all of them
in :data:`PARTS` order; the config's problems are its parts' in that order, and its parameter count
their sum (:func:`model.budget.parameters.parameters`).
"""

from __future__ import annotations

from model.config.parts.attention import AttentionPart
from model.config.parts.base import Part, Term
from model.config.parts.core import CorePart
from model.config.parts.feed_forward import FeedForwardPart
from model.config.parts.norms import NormPart
from model.config.parts.positions import PositionPart

#: Every kind of part, in the order a config's problems and parameter rows are gathered.
PARTS: tuple[type[Part], ...] = (CorePart, AttentionPart, FeedForwardPart, NormPart, PositionPart)

__all__ = [
    "PARTS",
    "AttentionPart",
    "CorePart",
    "FeedForwardPart",
    "NormPart",
    "Part",
    "PositionPart",
    "Term",
]
