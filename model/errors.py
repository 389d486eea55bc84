"""One base for every error a user's input can cause: :class:`AttentionLabError`.

Each kind below is raised where the problem is found, with one line a person can act on (what is
wrong, and the value or file to change). The command line and the window catch the base, so a new
kind needs no new ``except`` anywhere. Each kind also stays a subclass of the built-in it always was
(``ValueError`` for bad values and files, ``RuntimeError`` for runs that cannot go on), so callers
that catch those still do.

==========================  =======================================  =============================
kind                        raised by                                for
==========================  =======================================  =============================
``ConfigError``             ``model.config``                         a config's problems, listed
``TokenizerError``          ``model.text.tokens``                    text a tokenizer cannot encode
``ChatTemplateError``       ``model.text.chat``                      a model file's chat template
``DataError``               ``model.text.datasource``                a corpus or task spec
``DeviceError``             ``model.runtime``                        a device that is not there
``ModelTooLarge``           ``model.budget.sizing``                  memory: need, have, what to lower
``PromptError``             ``model.interp.prompt``                  a prompt that cannot be read
``CheckpointError``         ``model.io.checkpoint.saved``                  a model file or folder
``HubError``                ``model.io.hub``                         the Hub (and its kinds)
``HistoryError``            ``model.io.history.revisions``                   a training history
``RunFolderError``          ``model.io.runs.folder``                   a run folder
``ComparisonError``         ``model.compare.comparison``             a comparison file
``TrainingDiverged``        ``model.train.trainer``                  a loss that stopped being finite
``NonFiniteLogits``         ``model.nn.generate``                    logits that are NaN or ±∞
``DistributedError``        ``model.train.distributed``              a data-parallel run
==========================  =======================================  =============================
"""

from __future__ import annotations


class AttentionLabError(Exception):
    """Something about the user's input or machine: its message is one line for a person."""


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when it has none): how a library's
    error joins one of ours."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["AttentionLabError", "first_line"]
