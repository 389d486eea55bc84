"""A model's chat template, applied as the model's own files say: ``tokenizer.chat_template`` of a GGUF
file (or ``chat_template`` of a Hugging Face ``tokenizer_config.json`` or ``chat_template.jinja``).

A chat template is a Jinja2 program that turns ``messages`` (a list of ``{"role", "content"}``) into
the one string the model was trained on, e.g. SmolLM2's::

    <|im_start|>system\\nYou are a helpful AI assistant named SmolLM, ...<|im_end|>\\n
    <|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n

A template comes from a downloaded file, and template injection through model files is a known attack
on model readers (CVE-2024-34359, llama-cpp-python). Every template is therefore rendered in Jinja2's
immutable sandbox, as ``transformers`` runs it (``trim_blocks``, ``lstrip_blocks``,
``raise_exception``, ``tojson``), inside a child process with a time limit and a memory limit
(:mod:`model.text.template_process`): it cannot reach Python objects, loop forever, or build
gigabytes; its output is capped at :data:`MAX_CHARS`. Whatever goes wrong is one
:class:`ChatTemplateError` line naming where the template came from and why.

The loaders attach a :class:`ChatTemplate` to the tokenizer of a model whose files carry one
(``tokenizer.chat_template``, None otherwise); :meth:`ChatTemplate.prompt` builds the text of a
conversation (system prompt, earlier user/assistant turns, the new user message).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from model.errors import AttentionLabError
from model.text import template_process

__all__ = [
    "MAX_CHARS",
    "TURN_ROLES",
    "ChatTemplate",
    "ChatTemplateError",
    "apply_chat_template",
    "chat_messages",
    "chat_template_for",
]

#: The longest text a template may produce
MAX_CHARS = 1_000_000
#: How an error names a template whose file is not known
UNNAMED = "chat template"


class ChatTemplateError(AttentionLabError, ValueError):
    """The template cannot be compiled or fails on these messages; the message is one line naming the
    template's file and the reason."""


def apply_chat_template(
    template: str,
    messages: Sequence[dict[str, Any]],
    *,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    source: str = UNNAMED,
    time_limit: float | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> str:
    """``template`` rendered for ``messages`` (each a dict with ``role`` and ``content``), ending with
    the assistant's turn opened when ``add_generation_prompt``, in the bounded sandbox
    (``time_limit`` seconds, :data:`~model.text.template_process.TIME_LIMIT_S` when None; stopped
    within 50 ms once ``cancelled()`` is True).

    Raises :class:`ChatTemplateError` ``"{source}: {reason}"`` (``source`` names the file the
    template came from); a template that writes nothing is one too (the model would read nothing)."""
    bad = [m for m in messages if not isinstance(m, dict) or not isinstance(m.get("role"), str)]
    if bad:
        raise ChatTemplateError(f"{source}: each message must be a dict with a 'role' and a 'content'")
    request = {
        "template": str(template),
        "messages": [dict(m) for m in messages],
        "add_generation_prompt": bool(add_generation_prompt),
        "bos_token": bos_token,
        "eos_token": eos_token,
        "max_chars": MAX_CHARS,
    }
    try:
        text, reason = template_process.render(
            request, template_process.TIME_LIMIT_S if time_limit is None else time_limit, cancelled
        )
    except TypeError as exc:  # a message's content that JSON cannot carry
        raise ChatTemplateError(f"{source}: the messages cannot be given to it: {exc}") from None
    if text is None:
        raise ChatTemplateError(f"{source}: {reason}")
    if not text:
        raise ChatTemplateError(
            f"{source}: wrote nothing for these messages, so the model would read nothing"
        )
    return text


#: The roles a conversation's earlier turns may have (the system prompt is given on its own).
TURN_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class ChatTemplate:
    """A model's chat template with the special tokens it may write (``bos_token``, ``eos_token``)
    and ``source``, where it was read (``"chat template in model.gguf (tokenizer.chat_template)"``):
    each of its errors begins with it.

    ``bos_token`` is empty when the tokenizer puts BOS before every text itself: a template that
    writes ``{{ bos_token }}`` would otherwise give the model two. :meth:`prompt` is the text the
    model reads for a conversation; the tokenizer's ``stop_ids`` end its reply.
    """

    text: str
    bos_token: str = ""
    eos_token: str = ""
    source: str = UNNAMED

    def prompt(
        self,
        system: str,
        history: Sequence[tuple[str, str]],
        message: str,
        *,
        time_limit: float | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> str:
        """The templated text of a conversation, the assistant's turn opened: ``system`` (none when
        empty: the template may then write its own default), the earlier ``history`` turns as
        ``(role, text)`` with role ``"user"`` or ``"assistant"``, then the new user ``message``.
        Rendered within the limits of :func:`apply_chat_template` (``time_limit``, ``cancelled``
        as there); raises :class:`ChatTemplateError`
        (one line naming :attr:`source` and the reason)."""
        return apply_chat_template(
            self.text,
            chat_messages(system, history, message),
            add_generation_prompt=True,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            source=self.source,
            time_limit=time_limit,
            cancelled=cancelled,
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
    text: object,
    tokenizer: Any,
    *,
    bos_token: str | None = None,
    eos_token: str | None = None,
    source: str | None = None,
) -> ChatTemplate | None:
    """The :class:`ChatTemplate` of a model whose files give ``text`` (None unless a non-empty string)
    and name these special tokens (strings; None when unknown), read with ``tokenizer`` (a
    :class:`~model.text.tokens.Tokenizer`; those with ``prefix_ids`` put BOS in front themselves).
    ``source`` says where it was read (``"model.gguf (tokenizer.chat_template)"``)."""
    if not isinstance(text, str) or not text.strip():
        return None
    adds_bos = bool(getattr(tokenizer, "prefix_ids", None))
    where = f"chat template in {source}" if source else UNNAMED
    return ChatTemplate(text, "" if adds_bos else (bos_token or ""), eos_token or "", where)
