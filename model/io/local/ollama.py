"""Ollama's store, as a look at the machine's models reads it (:mod:`model.io.local.models`): each
manifest ``manifests/<registry>/<namespace>/<model>/<tag>`` names its model layer's blob by digest,
``blobs/sha256-<hex>``, a GGUF file; the model is named as ``ollama list`` names it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from model.io.loaded import CheckpointError
from model.io.local.found import LocalModel
from model.io.local.look import Look
from model.io.local.places import OLLAMA
from model.io.local.reading import _one_line, _small_json

__all__ = ["OLLAMA_MODEL_LAYER", "OLLAMA_REGISTRY", "ollama_models"]

OLLAMA_REGISTRY = "registry.ollama.ai"
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"

_DIGEST = re.compile(r"sha256[:-]([0-9a-f]{64})")


def ollama_models(look: Look, roots: Sequence[Path]) -> Iterator[LocalModel]:
    """The model of every manifest in each of ``roots`` (Ollama's models folders)."""
    for root in roots:
        loc = look.location(OLLAMA, root)
        manifests = root / "manifests"
        if not manifests.is_dir():
            loc.note = "not there" if not root.exists() else "no manifests folder"
            continue
        for path, parts in look.walk(manifests, 3, loc):
            if len(parts) != 4:  # registry/namespace/model/tag
                continue
            loc.found += 1
            yield _ollama_model(look, root, path, parts)


def _ollama_model(look: Look, root: Path, manifest: Path, parts: tuple[str, ...]) -> LocalModel:
    registry, namespace, model, tag = parts
    base = model if namespace == "library" else f"{namespace}/{model}"
    name = f"{base if registry == OLLAMA_REGISTRY else f'{registry}/{namespace}/{model}'}:{tag}"

    def refused(problem: str) -> LocalModel:
        return LocalModel(name, manifest, OLLAMA, opens=False, problem=problem, detail="manifest")

    try:
        data = _small_json(manifest)
    except CheckpointError as exc:
        return refused(f"its manifest {_one_line(exc).replace(manifest.name + ' ', '', 1)}")
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        return refused("its manifest has no list of layers (not an Ollama manifest?)")
    layer = next(
        (x for x in layers if isinstance(x, dict) and x.get("mediaType") == OLLAMA_MODEL_LAYER), None
    )
    if layer is None:
        return refused(f"its manifest has no model layer ({OLLAMA_MODEL_LAYER})")
    digest = _DIGEST.fullmatch(str(layer.get("digest", "")))
    if digest is None:
        return refused(f"its model layer's digest {str(layer.get('digest'))[:80]!r} is not sha256:<hex>")
    blob = root / "blobs" / f"sha256-{digest.group(1)}"
    if not blob.is_file():
        return refused(f"its model blob sha256-{digest.group(1)[:12]}… is missing (a pull not finished?)")
    return look.gguf(blob, name=name, source=OLLAMA)
