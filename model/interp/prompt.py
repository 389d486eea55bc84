"""A prompt as a model reads it: :class:`Prompt`, made by one rule that every caller uses.

:func:`encode_prompt` turns text into at most ``limit`` token ids. The rule: **keep the last tokens
that fit**, and keep the tokenizer's prefix (``prefix_ids``: Llama's BOS ``<s>``) in front, since the
model was trained to see it first. A caller that needs the *start* of a prompt (a lab that reads the
first ``n`` tokens) asks for it by name, ``keep="first"``, and the prompt says so (``dropped_from``).
:meth:`Prompt.cut` applies the same rule again to fit a smaller limit (memory).

The Attention tab, the probe of a training run, patching, the History tab, the comparison file and
the command line all make their prompts here, so a long Llama prompt keeps its ``<s>`` on every path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from model.errors import AttentionLabError
from model.text.tokens import visible

Keep = Literal["last", "first"]


class PromptError(AttentionLabError, ValueError):
    """The prompt cannot be read (empty, or characters the vocabulary lacks): one clear line."""


class Tokenizer(Protocol):
    """What a prompt needs of a tokenizer (every tokenizer of ``model.text`` has it)."""

    def encode(self, text: str, errors: str = "strict") -> list[int]: ...

    def token_strings(self, ids: list[int]) -> list[str]: ...


@dataclass(frozen=True)
class Prompt:
    """Token ids of a text as the model reads them.

    ``ids`` [T]; ``texts`` [T] each token's raw text and ``labels`` [T] its visible label (␣ ⏎ ⇥ and
    escapes: what axes and tables show); ``dropped`` how many tokens of the text were left out, and
    ``dropped_from`` where: ``"start"`` (the rule: the last tokens kept) or ``"end"`` (``keep="first"``).
    """

    text: str
    ids: tuple[int, ...]
    texts: tuple[str, ...]
    labels: tuple[str, ...]
    dropped: int = 0
    dropped_from: Literal["start", "end"] = "start"
    prefix: int = 0  # how many leading ids are the tokenizer's prefix (kept by every cut)

    @property
    def T(self) -> int:  # the literature's name
        return len(self.ids)

    @property
    def positions(self) -> list[int]:
        """Each kept token's place in the whole encoded text (from 0): all of them in order when nothing
        was left out or the end was; else the prefix, then the tokens after the ``dropped`` ones."""
        if not self.dropped or self.dropped_from == "end":
            return list(range(self.T))
        p = self.prefix if 0 < self.prefix < self.T else 0
        return [*range(p), *range(p + self.dropped, self.dropped + self.T)]

    def cut(self, n: int) -> Prompt:
        """This prompt at most ``n`` tokens long, by its own rule (the last ones, prefix kept; or the
        first ones when it was made with ``keep="first"``)."""
        if n >= self.T:
            return self
        keep = self.dropped_from == "end"
        index = _first(self.T, n) if keep else _last(self.T, n, self.prefix)
        return replace(
            self,
            ids=tuple(self.ids[i] for i in index),
            texts=tuple(self.texts[i] for i in index),
            labels=tuple(self.labels[i] for i in index),
            dropped=self.dropped + self.T - len(index),
        )


def _last(T: int, n: int, prefix: int) -> list[int]:
    """Positions kept of ``T`` to have ``n``: the last ones, the first ``prefix`` kept in front."""
    if 0 < prefix < n:
        return list(range(prefix)) + list(range(T - (n - prefix), T))
    return list(range(T - n, T))


def _first(T: int, n: int) -> list[int]:
    return list(range(min(T, n)))


def encode_prompt(
    tokenizer: Tokenizer,
    text: str,
    limit: int,
    *,
    keep: Keep = "last",
    errors: str = "strict",
) -> Prompt:
    """``text`` as a :class:`Prompt` of at most ``limit`` tokens (see the module docstring for the rule).

    ``errors="replace"`` reads characters the vocabulary lacks as its replacement token (a training
    probe never fails on its prompt); ``"strict"`` refuses them with :class:`PromptError`, as an empty
    prompt or one that encodes to nothing is refused.
    """
    if not text:
        raise PromptError("the prompt is empty: type some text")
    try:
        ids = [int(i) for i in tokenizer.encode(text, errors=errors)]
    except ValueError as exc:
        raise PromptError(str(exc)) from None
    return prompt_of_ids(tokenizer, ids, limit, keep=keep, text=text)


def prompt_of_ids(
    tokenizer: Tokenizer, ids: Sequence[int], limit: int | None = None, *, keep: Keep = "last", text: str = ""
) -> Prompt:
    """A :class:`Prompt` of token ``ids`` already encoded (cut to ``limit`` by the same rule)."""
    ids = [int(i) for i in ids]
    if not ids:
        raise PromptError("the prompt encodes to no tokens")
    texts = tokenizer.token_strings(ids)
    prefix_ids = list(getattr(tokenizer, "prefix_ids", None) or [])
    prefix = len(prefix_ids) if prefix_ids and ids[: len(prefix_ids)] == prefix_ids else 0
    prompt = Prompt(
        text=text or "".join(texts),
        ids=tuple(ids),
        texts=tuple(texts),
        labels=tuple(visible(s) for s in texts),
        dropped_from="end" if keep == "first" else "start",
        prefix=prefix,
    )
    return prompt if limit is None else prompt.cut(max(1, int(limit)))


__all__ = ["Keep", "Prompt", "PromptError", "encode_prompt", "prompt_of_ids"]
