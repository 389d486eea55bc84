"""The sources of a look at the machine's models that are plain GGUF files (:mod:`model.io.local.models`):
LM Studio's model folders, walked for ``*.gguf`` (a gguf-split file listed once, as its first part),
and the GGUF files that Python packages ship."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from model.io.gguf.load import PACKAGED
from model.io.gguf.names import gguf_model_name
from model.io.local.found import LocalModel
from model.io.local.look import Look
from model.io.local.places import LM_STUDIO, PACKAGE
from model.io.local.reading import _SPLIT, _split_size

__all__ = ["lmstudio_models", "package_models"]


def lmstudio_models(look: Look, roots: Sequence[Path], max_depth: int) -> Iterator[LocalModel]:
    """Every ``*.gguf`` at most ``max_depth`` folders below each of ``roots`` (a file reached twice, by
    a link, listed once)."""
    seen: set[Path] = set()
    for root in roots:
        loc = look.location(LM_STUDIO, root)
        if not root.is_dir():
            loc.note = "not there"
            continue
        for path, parts in look.walk(root, max_depth, loc):
            if not path.name.lower().endswith(".gguf"):
                continue
            split = _SPLIT.search(path.name)
            if split and int(split.group(1)) != 1:
                continue  # listed once, as its first part
            try:
                real = path.resolve()
            except (OSError, RuntimeError):
                real = path
            if real in seen:  # the old and the new folder can be one (a link)
                continue
            seen.add(real)
            size = _split_size(path) if split else None
            loc.found += 1
            yield look.gguf(
                path,
                name=gguf_model_name(path.name),
                source=LM_STUDIO,
                detail="/".join(parts[:-1]),
                size=size,
            )


def package_models(look: Look, packages: Sequence[tuple[str, Path | None]]) -> Iterator[LocalModel]:
    """The GGUF file of each ``(name, file or None)`` pair (None: the package is not installed)."""
    for name, path in packages:
        package = PACKAGED.get(name, (name, ""))[0]
        if path is None:
            look.location(PACKAGE, package).note = "not installed"
            continue
        loc = look.location(PACKAGE, package)
        loc.found += 1
        yield look.gguf(Path(path), name=name, source=PACKAGE, detail=f"the package {package}")
