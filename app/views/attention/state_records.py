"""The records the Attention tab's state keeps (:mod:`app.views.attention.state`): a head's
(layer, head), a causal tool's result with the run and inputs it was measured for, and why a tool could
not run. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: A head: (layer, head).
Head = tuple[int, int]
#: What the circuits of the weights depend on: (the model's ``id``, its training step, the RoPE offset).
CircuitsKey = tuple[int, int, int]
#: A composition of two heads: (kind "Q" | "K" | "V", writer, reader, score).
Edge = tuple[str, Head, Head, float]


@dataclass
class CausalFailure:
    """Why a causal tool could not run on these inputs (one line, shown on its page)."""

    message: str


@dataclass
class CausalEntry:
    request: int
    setup: dict
    result: Any


__all__ = ["CausalEntry", "CausalFailure", "CircuitsKey", "Edge", "Head"]
