"""What every source of a look at the machine's models shares (:class:`Look`, one per look of
:class:`model.io.local.models.LocalScan`): the record of the places looked in, the walk of a folder
tree (hidden names skipped, a link to a folder followed once, at most :data:`MAX_ENTRIES` entries) and
a GGUF file described from its header, refused when it would take more memory than the machine can
spare now (the size check every load makes)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

from model.budget.sizing import usable_bytes
from model.budget.units import human_bytes
from model.io.local.found import LocalModel, Location
from model.io.local.places import OLLAMA
from model.io.local.reading import _SPLIT, _one_line, _size, _summary

__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "Look"]

#: Folders below an LM Studio root that are walked (publisher/repo/file.gguf is 2).
MAX_DEPTH = 6
#: Directory entries looked at per folder tree before the walk stops (and says so).
MAX_ENTRIES = 20_000


class Look:
    """One look's shared parts: each place looked in is appended to ``locations`` (the scan's list);
    ``usable_memory``: the bytes a model may take (None: asked of the machine once, when first needed);
    ``max_entries``: a folder walk's budget."""

    def __init__(self, locations: list[Location], *, usable_memory: int | None, max_entries: int):
        self.locations = locations
        self.max_entries = max_entries
        self._usable = usable_memory

    def usable_bytes(self) -> int:
        if self._usable is None:
            try:
                self._usable = usable_bytes()
            except Exception:  # the machine cannot be asked: no size refusal
                self._usable = 1 << 62
        return self._usable

    def too_large(self, need: int) -> str:
        """Why a model needing ``need`` bytes to open does not (one line), or ``""`` when it fits."""
        usable = self.usable_bytes()
        if need <= usable:
            return ""
        return (
            f"needs about {human_bytes(need)} of memory to open (float32 weights and the copy being read), "
            f"more than the {human_bytes(usable)} this machine can spare now"
        )

    def location(self, source: str, where: Path | str) -> Location:
        loc = Location(source, str(where))
        self.locations.append(loc)
        return loc

    def walk(self, top: Path, max_depth: int, loc: Location) -> Iterator[tuple[Path, tuple[str, ...]]]:
        """``(file, parts below top)`` of the regular files at most ``max_depth`` folders below ``top``
        (hidden names skipped; a link to a folder followed once; at most ``max_entries`` entries)."""
        seen: set[tuple[int, int]] = set()
        budget = self.max_entries
        stack: list[tuple[Path, tuple[str, ...]]] = [(top, ())]
        while stack:
            folder, parts = stack.pop()
            try:
                st = folder.stat()
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                with os.scandir(folder) as it:  # never more than the budget read, even of one folder
                    entries = list(itertools.islice(it, budget + 1))
            except OSError as exc:
                if not parts:
                    loc.note = f"cannot be read: {exc.strerror or exc}"
                continue
            budget -= len(entries)
            exhausted = budget < 0
            if exhausted:
                loc.note = f"stopped after {self.max_entries:,} entries (a huge tree): not all listed"
                entries = entries[: len(entries) + budget]
            subfolders = []
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir():
                        if len(parts) < max_depth:
                            subfolders.append((Path(entry.path), (*parts, entry.name)))
                    elif entry.is_file():
                        yield Path(entry.path), (*parts, entry.name)
                except OSError:
                    continue
            if exhausted:
                return
            stack.extend(reversed(subfolders))

    def gguf(
        self, path: Path, *, name: str, source: str, detail: str = "", size: int | None = None
    ) -> LocalModel:
        """A GGUF file described from its header (a problem line when it cannot be read)."""
        try:
            s = _summary(path)
        except Exception as exc:  # a corrupt or unreadable header: listed, refused
            return LocalModel(
                name,
                path,
                source,
                size_bytes=_size(path) if size is None else size,
                opens=False,
                problem=_one_line(exc, path, "the blob" if source == OLLAMA else "the file"),
                detail=detail,
            )
        n_params = int(s["n_params"]) if s.get("n_params") else None
        opens, problem = bool(s["opens"]), str(s["problem"])
        split = _SPLIT.search(path.name)
        if split:
            opens = False
            problem = (
                f"split into {int(split.group(2))} files by gguf-split: Attention Lab opens one file "
                f"(join them with llama-gguf-split --merge)"
            )
        elif opens and n_params:
            problem = self.too_large(8 * n_params)
            opens = not problem
        return LocalModel(
            name=name,
            path=path,
            source=source,
            family=str(s.get("family") or s.get("architecture") or ""),
            size_bytes=int(s["file_bytes"]) if size is None else size,
            quantization=str(s.get("quantization") or ""),
            n_params=n_params,
            opens=opens,
            problem=problem,
            detail=detail or str(s.get("name") or ""),
        )
