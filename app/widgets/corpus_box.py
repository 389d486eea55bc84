"""The corpus chooser of the pages that read a corpus (Q–K map, Heads over a corpus, the Features
tab): one editable list of the built-in texts and synthetic tasks, where a text file or a folder may
be typed, and "" (the data of the Train tab); :func:`corpus_spec` says which corpus "" is for a
session."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from model.text.sources import source_help

#: The corpus when the session has no data its model's tokenizer reads (every tokenizer of real text
#: reads it).
FALLBACK_CORPUS = "builtin:primer"


def corpus_box() -> QComboBox:
    """An editable chooser: "" (the session's data) then every ``builtin:`` and ``task:`` source."""
    box = QComboBox()
    box.setEditable(True)
    box.addItem("")  # the session's data
    box.addItems(list(source_help()))
    box.setToolTip(
        "builtin:NAME, task:NAME, a text file or a folder of them; empty: the data of the Train tab"
    )
    box.setMinimumContentsLength(24)
    return box


def corpus_spec(session, chosen: str) -> str:
    """The corpus ``chosen`` names; "" is the session's data when it reads the model's tokens, else
    :data:`FALLBACK_CORPUS`."""
    if chosen:
        return chosen
    s = session
    usable = s.source is not None and s.source.tokenizer == s.tokenizer and s.source_spec
    return s.source_spec if usable else FALLBACK_CORPUS


__all__ = ["FALLBACK_CORPUS", "corpus_box", "corpus_spec"]
