"""A model's config from anything the app opens, without reading a weight: the Budget tab's
Open config… and ``attention-lab budget --config``.

Our own config files and checkpoint folders are read by :func:`model.budget.presets.load_config`
(no torch: the budget command answers before torch is imported); anything else the app opens (a
Hugging Face folder or its ``config.json``, a GGUF file, a nanoGPT checkpoint) by
:func:`model.io.pretrained.config_of`, imported only then.
"""

from __future__ import annotations

import json
from pathlib import Path

from model.budget import presets
from model.config import ConfigError, GPTConfig
from model.files import check_input


def _ours(path: Path) -> bool:
    """Whether ``path`` is one of our config files or a folder holding one (no ``model_type``)."""
    cfg = path / "config.json" if path.is_dir() else path
    if path.is_dir() and not cfg.is_file():
        return False
    if cfg.suffix.lower() != ".json":
        return False
    try:
        with open(cfg, encoding="utf-8-sig") as fh:
            head = fh.read(1 << 20)
        data = json.loads(head)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return True  # let our reader name what is wrong with it
    return not (isinstance(data, dict) and "model_type" in data)


def read_config(path: str | Path) -> GPTConfig:
    """The config of ``path`` (see the module docstring); ours is not validated (the caller lists its
    problems). Raises :class:`ConfigError` in one line."""
    path = check_input(path, error=lambda line: ConfigError([line]), kind="any")  # a FIFO would block
    if _ours(path):
        return presets.load_config(path)
    from model.io.pretrained import config_of  # torch: only for a model of another kind

    try:
        return config_of(path)
    except (ValueError, OSError) as exc:  # CheckpointError, a GGUF header's problem
        raise ConfigError([str(exc)]) from None


__all__ = ["read_config"]
