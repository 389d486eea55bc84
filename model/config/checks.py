"""Every problem with a :class:`~model.config.GPTConfig`, each a line naming the field and how to fix it.

:func:`config_problems` is what :meth:`GPTConfig.problems <model.config.GPTConfig.problems>` (and so
``validate``) returns: each part's problems (:mod:`model.config.parts`) in turn, the core's first. A part
checks its own fields' kinds and ranges (:mod:`model.config.fields`, worded by :mod:`model.config.rules`),
then the fields that must agree with each other: the heads and the width, RoPE and its scaling, the
sliding window and its pattern, soft-capping, sinks, the mixture of experts and its router, latent
attention.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from model.config import GPTConfig


def config_problems(cfg: GPTConfig) -> list[str]:
    """Every problem with this config, each naming the field and how to fix it (empty if valid)."""
    return [problem for part in cfg.parts for problem in part.problems(cfg)]


__all__ = ["config_problems"]
