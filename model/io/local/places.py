"""Where a look at the machine's models goes (:mod:`model.io.local.models`): the sources' names, in
the order they are scanned and listed, the folders each is looked in by default (from the environment
and the home folder: :func:`default_locations`) and the Python packages that ship a GGUF file."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from model.io.gguf.load import PACKAGED, packaged_gguf

__all__ = [
    "HF_CACHE",
    "LMSTUDIO_ENV",
    "LM_STUDIO",
    "OLLAMA",
    "OLLAMA_ENV",
    "OLLAMA_SERVICE_ROOT",
    "PACKAGE",
    "SOURCES",
    "default_locations",
]

OLLAMA, LM_STUDIO, HF_CACHE, PACKAGE = "Ollama", "LM Studio", "Hugging Face cache", "Python package"
#: The sources, in the order they are scanned and listed.
SOURCES = (OLLAMA, LM_STUDIO, HF_CACHE, PACKAGE)

#: Folders holding LM Studio's models, separated by ``os.pathsep``: when set, instead of the defaults.
LMSTUDIO_ENV = "ATTENTION_LAB_LMSTUDIO_MODELS"
OLLAMA_ENV = "OLLAMA_MODELS"
#: Where Ollama's Linux installer keeps the models of the ``ollama`` service user.
OLLAMA_SERVICE_ROOT = Path("/usr/share/ollama/.ollama/models")


def _paths(value: str) -> list[Path]:
    return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]


def default_locations(
    env: Mapping[str, str] | None = None, home: Path | None = None
) -> dict[str, list[Path]]:
    """The folders each source is looked for in, from ``env`` (default ``os.environ``) and ``home``
    (default the user's). The machine's own places (Ollama's service folder, ``huggingface_hub``'s
    configured cache) are added only when neither is given."""
    system = env is None and home is None
    env = os.environ if env is None else env
    home = Path.home() if home is None else Path(home)
    if env.get(OLLAMA_ENV, "").strip():
        ollama = _paths(env[OLLAMA_ENV])
    else:
        ollama = [home / ".ollama" / "models"]
        if system and sys.platform.startswith("linux"):
            ollama.append(OLLAMA_SERVICE_ROOT)
    if env.get(LMSTUDIO_ENV, "").strip():
        lmstudio = _paths(env[LMSTUDIO_ENV])
    else:
        lmstudio = [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    if system:
        from model.io.hub import cache_dir

        hf = cache_dir()
    elif env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE"):
        hf = Path(env.get("HF_HUB_CACHE") or env["HUGGINGFACE_HUB_CACHE"]).expanduser()
    elif env.get("HF_HOME"):
        hf = Path(env["HF_HOME"]).expanduser() / "hub"
    else:
        hf = Path(env.get("XDG_CACHE_HOME") or home / ".cache").expanduser() / "huggingface" / "hub"
    return {OLLAMA: ollama, LM_STUDIO: lmstudio, HF_CACHE: [hf]}


def _packaged() -> list[tuple[str, Path | None]]:
    """``(name, GGUF file or None)`` of each of :data:`model.io.gguf.load.PACKAGED` (None: not installed)."""
    return [(name, packaged_gguf(name)) for name in PACKAGED]
