"""What every part of a :class:`~model.config.GPTConfig` is: the frozen declaration of the config fields it
owns (:class:`Part`), which checks them and counts the parameters they create as rows of the budget's
parameter table (:class:`Term`). Each field is declared with :func:`declare`: its type, its default, a line
of help, and the choices or the range its value must lie in, in one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from model.config import GPTConfig


@dataclass(frozen=True)
class Term:
    """One row of the parameter table (:data:`model.budget.breakdown.COMPONENTS` names them all), as
    the part that creates the parameters counts it.

    ``blocks`` says which blocks hold the row: ``"all"``, ``"dense"`` (the dense-MLP blocks), ``"moe"``
    (the mixture-of-experts blocks), and then ``count`` and ``formula`` are one such block's; or
    ``None``: a model-level row (embeddings, final norm, output head), counted once. ``zero_note`` says
    why a per-block row is 0 (it stands for the formula then); ``matmul``: the weights multiply the
    token vectors that reach them; ``active``: (count, formula) of what one token uses in one block,
    when that is not all of it (the routed experts).
    """

    name: str
    count: int
    formula: str
    matmul: bool = False
    blocks: str | None = "all"
    zero_note: str = ""
    active: tuple[int, str] | None = None


def declare(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    bounds: tuple[float, float] | None = None,
) -> Any:
    """A config field's one declaration, as a part's class body writes it
    (``n_heads: int = declare(4, "h, query heads per layer ...")``): its ``default`` and, in the field's
    ``metadata``, its ``help`` (one line: a tooltip in the app, ``--help`` on the command line), the
    ``choices`` a string field takes, and the ``bounds`` (lo, hi) a real-number field must lie in, both
    ends included. :meth:`Part.declared` reads them back."""
    meta: dict[str, Any] = {"help": help}
    if choices is not None:
        meta["choices"] = choices
    if bounds is not None:
        meta["bounds"] = bounds
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Part:
    """A part of the config: the one place its fields are declared, each with its type, default, help
    and the values it takes (:func:`declare`; every config field belongs to exactly one part). A
    :class:`~model.config.GPTConfig` holds one of each kind, as ``cfg.<key>``; a part is frozen
    (``cfg.replace(...)`` makes a changed config)."""

    #: The part's name in the literature (and in the budget's rows by part).
    title = "part"
    #: The part's attribute on a :class:`~model.config.GPTConfig` (``cfg.attention``).
    key = "part"

    @classmethod
    def owns(cls) -> tuple[str, ...]:
        """The names of the config fields this part owns, in declaration order (their file names)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def declared(cls, name: str) -> Mapping[str, Any]:
        """What field ``name``'s declaration says beside its type and default (:func:`declare`):
        ``help``, and ``choices`` or ``bounds`` when it has them."""
        return cls.__dataclass_fields__[name].metadata

    def problems(self, cfg: GPTConfig) -> list[str]:
        """Every problem with this part's fields, alone and with the rest of ``cfg`` (the config it is
        a part of), each naming the field and how to fix it."""
        raise NotImplementedError

    def parameters(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        """The rows of the parameter table that this part's fields create, from the values ``s`` of the
        budget's symbols (:func:`model.budget.checks.symbols`) of a valid ``cfg``."""
        raise NotImplementedError


__all__ = ["Part", "Term", "declare"]
