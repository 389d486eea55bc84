"""Where training tokens come from: text corpora and synthetic tasks, behind one interface.

Every source is a :class:`DataSource` addressable by a string (:func:`resolve_source`):

* ``"builtin:NAME"`` -- text that needs no network (:mod:`model.text.corpora`, :func:`list_builtins`):
  ``builtin:stdlib`` (the default) is the installed Python's own standard-library source, read at run
  time; ``builtin:primer`` is a primer on attention that ships with the project; ``builtin:tales`` is
  an endless supply of small stories made by a grammar in code.
* ``"task:NAME"`` -- synthetic tasks known to grow readable heads (:mod:`model.text.tasks`,
  :func:`list_tasks`): ``induction`` (repeated random segments), ``copy``, ``reverse``, ``sort`` and
  ``prev_token``. Parameters other than the defaults are part of the name:
  ``"task:induction:n_symbols=10,max_len=16"``.
* anything else is a path to a UTF-8 text file (:func:`load_text_file`), or to a folder whose text
  files are read as one text (:func:`load_text_folder`: every file in path order, the binary ones and
  hidden folders left out).

``source.get_batch(split, batch_size, seq_len, generator)`` returns ``(x, y)``, two ``int64`` tensors of
shape ``[B, T]``. For language modelling (``source.next_token``) ``y[b, t] = x[b, t+1]``: both are cut
from one window of ``T + 1`` tokens. ``get_masked_batch`` adds ``mask`` ``[B, T]`` (bool): True where the
target is determined by the task's rule (the copied half of a copy task, ...); text corpora mask nothing.
``masked_targets(y, mask)`` turns it into targets that ``F.cross_entropy`` ignores.

All randomness comes from the ``torch.Generator`` passed in, so a seed fixes every batch. The
interface: :mod:`model.text.datasource`. Here: the one entry point, :func:`resolve_source`, and which
data and prompt fit a loaded model (:func:`data_for_model`, :func:`prompt_for`).
"""

from __future__ import annotations

from pathlib import Path

from model.text.corpora import (
    TextCorpus,
    builtin_corpus,
    builtin_help,
    list_builtins,
    load_text_file,
    load_text_folder,
    read_text_file,
    read_text_folder,
)
from model.text.datasource import DataError, DataSource
from model.text.tasks import list_tasks, make_task, task_help
from model.text.tokens import Tokenizer

DEFAULT_SOURCE = "builtin:stdlib"
#: The data an opened model trains on when its tokenizer cannot read the current data (a short text
#: every tokenizer of real text reads in milliseconds; the default corpus takes seconds to encode).
FALLBACK_SOURCE = "builtin:primer"


def source_help() -> dict[str, str]:
    """Every named source with one line about it (for menus, tooltips and ``--help``)."""
    return {**builtin_help(), **task_help()}


def resolve_source(spec: str, *, tokenizer: Tokenizer | None = None, reading: bool = False) -> DataSource:
    """``"builtin:NAME"`` | ``"task:NAME[:key=value,...]"`` | a path to a UTF-8 text file or a folder.

    ``tokenizer``: encode a corpus with this tokenizer instead of building one from its text (resuming a
    checkpoint); a task accepts only its own. ``reading``: the source is read, not trained on (a corpus
    run over heads), so a text file need not hold training windows, only the prompts asked of
    :meth:`~model.text.datasource.DataSource.sample_windows`. Raises :class:`DataError` naming the
    valid choices.
    """
    spec = str(spec).strip()
    if not spec:
        raise DataError(
            f"no data source given; use one of {', '.join(list_builtins() + list_tasks())} or a text file"
        )
    if spec.startswith("builtin:"):
        return builtin_corpus(spec, tokenizer)
    if spec.startswith("task:"):
        task = make_task(spec)
        if tokenizer is not None and tokenizer != task.tokenizer:
            raise DataError(
                f"{task.name} uses its own vocabulary of {task.vocab_size} symbols, which differs from the "
                "tokenizer given"
            )
        return task
    min_seq_len = 0 if reading else TextCorpus.MIN_SEQ_LEN
    if Path(spec).expanduser().is_dir():
        return load_text_folder(spec, tokenizer=tokenizer, min_seq_len=min_seq_len)
    return load_text_file(spec, tokenizer=tokenizer, min_seq_len=min_seq_len)


def check_source(spec: str) -> None:
    """Refuse, in one line (:class:`DataError`), a source no model could read, before any model is
    opened: an unknown built-in or task, or a text file that is missing, empty, binary or not UTF-8
    (:func:`~model.text.corpora.read_text_file`). What depends on the model's tokenizer (characters it
    lacks, a text shorter than a prompt) is found by :func:`resolve_source` with it."""
    spec = str(spec).strip()
    if not spec or spec.startswith(("builtin:", "task:")):
        if spec.startswith("builtin:") and spec.removeprefix("builtin:") not in builtin_help():
            builtin_corpus(spec)  # raises, naming the built-in corpora
        if not spec or spec.startswith("task:"):
            resolve_source(spec)  # a task's parameters are checked as it is made (cheap)
        return
    if Path(spec).expanduser().is_dir():
        read_text_folder(spec)
    else:
        read_text_file(spec)


def data_for_model(
    tokenizer: Tokenizer, current: DataSource | None = None, current_spec: str = ""
) -> tuple[DataSource | None, str, str]:
    """Which data fits a model loaded with ``tokenizer``: ``(source, spec, note)``.

    The ``current`` source when its tokenizer is the model's (keep it); else the current data named by
    ``current_spec`` re-encoded with the model's tokenizer (fine-tuning on it); else
    :data:`FALLBACK_SOURCE` when the tokenizer reads it, so that Start fine-tunes the model rather
    than train a new one in the old data's vocabulary; else none. ``note`` says what was not kept and
    why (e.g. a synthetic task's own symbols, or characters the vocabulary lacks).
    """
    if current is not None and current.tokenizer == tokenizer:
        return current, current_spec, ""
    if not current_spec:
        return None, "", ""
    try:
        return resolve_source(current_spec, tokenizer=tokenizer), current_spec, ""
    except Exception:  # any reason the data cannot be encoded: say so, open the model
        why = f"{current_spec} cannot be encoded with this model's tokenizer"
    if current_spec != FALLBACK_SOURCE:
        try:
            fallback = resolve_source(FALLBACK_SOURCE, tokenizer=tokenizer)
        except Exception:  # the fallback is not in its vocabulary either
            pass
        else:
            return (
                fallback,
                FALLBACK_SOURCE,
                f"{why}: its data is now {FALLBACK_SOURCE} (the Data panel has others)",
            )
    return None, "", f"{why}: choose other data to fine-tune"


#: Prompts tried, in order, when a model arrives without data that knows a prompt for it.
FALLBACK_PROMPTS = ("The quick brown fox jumps over the lazy dog. ", "the cat sat on the mat", "abcabcabc")


def prompt_for(tokenizer: Tokenizer, *candidates: str) -> str:
    """The first of ``candidates`` (then :data:`FALLBACK_PROMPTS`) that ``tokenizer`` encodes whole;
    failing all, the text of its first 16 tokens."""
    for text in (*candidates, *FALLBACK_PROMPTS):
        if not text:
            continue
        try:
            tokenizer.encode(text)
            return text
        except Exception:  # a tokenizer's own error for text it cannot encode
            continue
    return tokenizer.decode(list(range(min(16, tokenizer.vocab_size))))


__all__ = [
    "DEFAULT_SOURCE",
    "FALLBACK_PROMPTS",
    "FALLBACK_SOURCE",
    "check_source",
    "data_for_model",
    "prompt_for",
    "resolve_source",
    "source_help",
]
