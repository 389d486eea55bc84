"""A model's chat template, applied as the model's own files say: ``tokenizer.chat_template`` of a GGUF
file (or ``chat_template`` of a Hugging Face ``tokenizer_config.json``).

A chat template is a Jinja2 program that turns ``messages`` (a list of ``{"role", "content"}``) into
the one string the model was trained on, e.g. SmolLM2's::

    <|im_start|>system\\nYou are a helpful AI assistant named SmolLM, ...<|im_end|>\\n
    <|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n

It runs in Jinja2's immutable sandbox, as ``transformers`` runs it (``trim_blocks``, ``lstrip_blocks``,
``raise_exception``, ``tojson``), so a template found in a downloaded file cannot reach Python objects;
its output is capped at :data:`MAX_CHARS`. Jinja2 comes with PyTorch.

The loaders attach a :class:`ChatTemplate` to the tokenizer of a model whose files carry one
(``tokenizer.chat_template``, None otherwise); :meth:`ChatTemplate.prompt` builds the text of a
conversation (system prompt, earlier user/assistant turns, the new user message).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from model.errors import AttentionLabError

__all__ = [
    "MAX_CHARS",
    "TURN_ROLES",
    "ChatTemplate",
    "ChatTemplateError",
    "apply_chat_template",
    "chat_messages",
    "chat_template_for",
]

#: The longest text a template may produce (a template that loops forever is stopped by this).
MAX_CHARS = 1_000_000


class ChatTemplateError(AttentionLabError, ValueError):
    """The template cannot be compiled or fails on these messages; the message is one line."""


def apply_chat_template(
    template: str,
    messages: Sequence[dict[str, Any]],
    *,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    """``template`` rendered for ``messages`` (each a dict with ``role`` and ``content``), ending with
    the assistant's turn opened when ``add_generation_prompt``. Raises :class:`ChatTemplateError`."""
    # only when a chat is formatted: the first prompt of most sessions never needs Jinja2
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    bad = [m for m in messages if not isinstance(m, dict) or not isinstance(m.get("role"), str)]
    if bad:
        raise ChatTemplateError("each chat message must be a dict with a 'role' and a 'content'")

    def raise_exception(message: str) -> None:
        raise ChatTemplateError(f"the chat template refused these messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    try:
        compiled = env.from_string(template)
        pieces = []
        size = 0
        for piece in compiled.generate(
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
        ):
            size += len(piece)
            if size > MAX_CHARS:
                raise ChatTemplateError(f"the chat template wrote over {MAX_CHARS:,} characters: stopped")
            pieces.append(piece)
    except ChatTemplateError:
        raise
    except TemplateError as exc:
        raise ChatTemplateError(f"the chat template cannot be applied: {exc}") from None
    return "".join(pieces)


#: The roles a conversation's earlier turns may have (the system prompt is given on its own).
TURN_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class ChatTemplate:
    """A model's chat template with the special tokens it may write (``bos_token``, ``eos_token``).

    ``bos_token`` is empty when the tokenizer puts BOS before every text itself: a template that
    writes ``{{ bos_token }}`` would otherwise give the model two. :meth:`prompt` is the text the
    model reads for a conversation; the tokenizer's ``stop_ids`` end its reply.
    """

    text: str
    bos_token: str = ""
    eos_token: str = ""

    def prompt(self, system: str, history: Sequence[tuple[str, str]], message: str) -> str:
        """The templated text of a conversation, the assistant's turn opened: ``system`` (none when
        empty: the template may then write its own default), the earlier ``history`` turns as
        ``(role, text)`` with role ``"user"`` or ``"assistant"``, then the new user ``message``.
        Raises :class:`ChatTemplateError` (one line)."""
        return apply_chat_template(
            self.text,
            chat_messages(system, history, message),
            add_generation_prompt=True,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )


def chat_messages(system: str, history: Sequence[tuple[str, str]], message: str) -> list[dict[str, str]]:
    """The ``messages`` a template reads for :meth:`ChatTemplate.prompt`'s arguments."""
    out = [{"role": "system", "content": system}] if system else []
    for role, text in history:
        if role not in TURN_ROLES:
            raise ChatTemplateError(f"a conversation turn's role must be 'user' or 'assistant', not {role!r}")
        out.append({"role": role, "content": str(text)})
    out.append({"role": "user", "content": message})
    return out


def chat_template_for(
    text: object, tokenizer: Any, *, bos_token: str | None = None, eos_token: str | None = None
) -> ChatTemplate | None:
    """The :class:`ChatTemplate` of a model whose files give ``text`` (None unless a non-empty string)
    and name these special tokens (strings; None when unknown), read with ``tokenizer`` (a
    :class:`~model.text.tokens.Tokenizer`; those with ``prefix_ids`` put BOS in front themselves)."""
    if not isinstance(text, str) or not text.strip():
        return None
    adds_bos = bool(getattr(tokenizer, "prefix_ids", None))
    return ChatTemplate(text, "" if adds_bos else (bos_token or ""), eos_token or "")
