"""Which files a model needs, the plan of what will be fetched (:func:`plan`), and the fetch itself
(:func:`fetch`) with its progress (:class:`DownloadProgress`), cancel and offline fallback."""

from __future__ import annotations

import fnmatch
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.budget.arithmetic import human_bytes
from model.files import read_json
from model.io.hub.library import cache_dir, endpoint, explain, offline, unreachable
from model.io.hub.refs import DownloadCancelled, HubError, HubRef, HubUnreachable, parse_ref

# huggingface_hub takes about 0.3 s to import: it is imported inside the functions that talk to it
# (see model.io.hub), so telling an hf: name from a path and listing the catalogue never load it.

#: Tokenizer files taken when present (``tokenizer.model``: SentencePiece, only without tokenizer.json).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
)
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def needed_files(names: Iterable[str], ref: HubRef | str = "") -> list[str]:
    """The files to fetch among a repo's ``names``: config, tokenizer, safetensors weights (+ index).

    Only top-level files count. Raises :class:`HubError` when there is no ``config.json``, or when the
    weights exist only as pickles (which are never downloaded) or not at all.
    """
    top = sorted({n for n in names if "/" not in n})
    have = set(top)
    where = f"{ref} " if ref else ""
    if "config.json" not in have:
        raise HubError(f"{where}has no config.json: it is not a model repository Attention Lab can open")
    out = ["config.json"]
    out += [n for n in TOKENIZER_FILES if n in have]
    if "tokenizer.model" in have and "tokenizer.json" not in have:
        out.append("tokenizer.model")
    if SAFETENSORS_INDEX in have:
        shards = [n for n in top if fnmatch.fnmatch(n, "model-*-of-*.safetensors")]
        out += [SAFETENSORS_INDEX, *shards]
    elif "model.safetensors" in have:
        out.append("model.safetensors")
    else:
        weights = [n for n in top if n.endswith(".safetensors")]
        if not weights:
            pickles = [n for n in top if n.endswith(PICKLE_SUFFIXES)]
            if pickles:
                raise HubError(
                    f"{where}holds its weights only as PyTorch pickles ({', '.join(pickles[:3])}); "
                    f"Attention Lab downloads safetensors only, since unpickling a file can run code: choose "
                    f"a revision with model.safetensors (the Hub's conversion bot opens one as refs/pr/N)"
                )
            raise HubError(f"{where}holds no weights (no .safetensors file at its top level)")
        out += weights
    return out


def check_complete(folder: Path) -> list[str]:
    """What a downloaded snapshot folder lacks to be opened (empty: nothing).

    Files appear in a snapshot only once fully downloaded, so presence is completeness; a sharded
    model needs every shard its index names.
    """
    missing = [] if (folder / "config.json").is_file() else ["config.json"]
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            shards = set(read_json(index, error=HubError).get("weight_map", {}).values())
        except (HubError, AttributeError):
            return [*missing, f"{SAFETENSORS_INDEX} (unreadable)"]
        missing += sorted(s for s in shards if not (folder / s).is_file())
    elif not any(folder.glob("*.safetensors")):
        missing.append("model.safetensors")
    return missing


@dataclass(frozen=True)
class Plan:
    """What :func:`fetch` will download for ``ref``: the files with their sizes, at one commit."""

    ref: HubRef
    commit: str
    files: tuple[tuple[str, int], ...]
    family: str = ""  # config.json's model_type when the Hub reports it

    @property
    def total(self) -> int:
        return sum(size for _, size in self.files)

    def describe(self) -> str:
        fam = f"{self.family}, " if self.family else ""
        return f"{self.ref}: {fam}{human_bytes(self.total)} in {len(self.files)} files"


def plan(ref: HubRef | str, *, token: str | bool | None = None) -> Plan:
    """Ask the Hub (one call) which files ``ref`` needs and their sizes. Raises :class:`HubError`."""
    from huggingface_hub import HfApi

    ref = parse_ref(ref) if isinstance(ref, str) else ref
    if offline():
        raise HubError(f"HF_HUB_OFFLINE=1: the Hub is not asked about {ref}")
    try:
        info = HfApi(endpoint=endpoint(), token=token).model_info(
            ref.repo_id, revision=ref.revision, files_metadata=True
        )
    except Exception as exc:  # every failure becomes one line
        raise explain(exc, ref) from None
    sizes = {s.rfilename: int(s.size or 0) for s in (info.siblings or [])}
    names = needed_files(sizes, ref)
    family = ""
    config = getattr(info, "config", None)
    if isinstance(config, dict):
        family = str(config.get("model_type") or "")
    if not info.sha:
        raise HubError(f"the Hub gave no commit for {ref}")
    return Plan(ref, info.sha, tuple((n, sizes[n]) for n in names), family)


@dataclass(frozen=True)
class DownloadProgress:
    """One progress report: ``done`` of ``total`` bytes, ``speed`` in bytes/s over the last seconds."""

    ref: str
    file: str
    done: int
    total: int
    speed: float
    files_done: int
    n_files: int
    finished: bool = False

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else (1.0 if self.finished else 0.0)

    def line(self) -> str:
        """``"12.30 MiB of 522.72 MiB (2%) · 4.10 MiB/s · model.safetensors"``."""
        parts = [f"{human_bytes(self.done)} of {human_bytes(self.total)} ({self.fraction:.0%})"]
        if self.speed > 0:
            parts.append(f"{human_bytes(self.speed)}/s")
        if self.file and not self.finished:
            parts.append(self.file)
        return " · ".join(parts)


@dataclass
class _Tracker:
    """Counts bytes across files, measures speed over a sliding window, and checks for cancel."""

    ref: str
    total: int
    n_files: int
    on_progress: Callable[[DownloadProgress], Any] | None
    should_stop: Callable[[], bool] | None
    window_s: float = 2.0
    min_interval_s: float = 0.1
    done: int = 0
    files_done: int = 0
    file: str = ""
    _samples: deque = field(default_factory=lambda: deque(maxlen=256))
    _last_emit: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise DownloadCancelled(f"download of {self.ref} cancelled")

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n
            now = time.monotonic()
            self._samples.append((now, self.done))
            due = now - self._last_emit >= self.min_interval_s
        if due:
            self.emit()
        self.check()

    def speed(self) -> float:
        now = time.monotonic()
        while len(self._samples) > 1 and now - self._samples[0][0] > self.window_s:
            self._samples.popleft()
        if len(self._samples) < 2:
            return 0.0
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0

    def emit(self, finished: bool = False) -> None:
        self._last_emit = time.monotonic()
        if self.on_progress is not None:
            self.on_progress(
                DownloadProgress(
                    self.ref,
                    self.file,
                    self.done,
                    self.total,
                    self.speed(),
                    self.files_done,
                    self.n_files,
                    finished,
                )
            )

    def bar_class(self) -> type:
        """A ``tqdm_class`` for ``hf_hub_download``: the library calls ``update(n)`` per chunk."""
        tracker = self

        class _Bar:
            def __init__(self, *args: Any, initial: int = 0, **kwargs: Any):
                self.n = 0
                if initial:
                    self.update(initial)

            def update(self, n: int | float | None = 1) -> None:
                n = int(n or 0)
                self.n += n
                tracker.add(n)

            def __enter__(self) -> _Bar:
                return self

            def __exit__(self, *exc: Any) -> None:
                return None

            def close(self) -> None:
                return None

            def set_postfix_str(self, *args: Any, **kwargs: Any) -> None:
                return None

        return _Bar


# ---------------------------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------------------------
def cached_folder(ref: HubRef | str) -> Path | None:
    """The cached snapshot folder of ``ref`` if its config is in the cache (no network), else None."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    ref = parse_ref(ref) if isinstance(ref, str) else ref
    try:
        found = try_to_load_from_cache(
            ref.repo_id, "config.json", cache_dir=str(cache_dir()), revision=ref.rev
        )
    except HFValidationError:  # a HubRef built by hand, not by parse_ref: not a name the cache holds
        return None
    return Path(found).parent if isinstance(found, str) else None


def _from_cache(ref: HubRef, reason: str) -> Path:
    folder = cached_folder(ref)
    if folder is None:
        raise HubError(f"{ref} is not in the cache and {reason}: fetch it once with a connection")
    missing = check_complete(folder)
    if missing:
        raise HubError(
            f"{ref} is only partly downloaded (missing {', '.join(missing[:3])}) and {reason}: "
            f"run `attention-lab download {ref}` with a connection to finish it"
        )
    return folder


def fetch(
    ref: HubRef | str,
    *,
    on_progress: Callable[[DownloadProgress], Any] | None = None,
    should_stop: Callable[[], bool] | None = None,
    token: str | bool | None = None,
    planned: Plan | None = None,
) -> Path:
    """Download what ``ref`` needs into the ``huggingface_hub`` cache; the snapshot folder.

    Offline (``HF_HUB_OFFLINE=1``) or when the Hub cannot be reached, the cached copy is returned if
    it is complete. ``on_progress`` is called (in this thread) at most every 0.1 s and once at the end;
    ``should_stop()`` true raises :class:`DownloadCancelled` at the next chunk. Raises :class:`HubError`.
    """
    from huggingface_hub import hf_hub_download

    ref = parse_ref(ref) if isinstance(ref, str) else ref
    if offline():
        return _from_cache(ref, "HF_HUB_OFFLINE=1 forbids downloading")
    try:
        p = planned or plan(ref, token=token)
    except HubUnreachable:
        if cached_folder(ref) is None:
            raise
        return _from_cache(ref, "the Hub cannot be reached")
    tracker = _Tracker(str(ref), p.total, len(p.files), on_progress, should_stop)
    tracker.check()
    tracker.emit()
    bar = tracker.bar_class()
    folder: Path | None = None
    kw: dict[str, Any] = dict(endpoint=endpoint(), cache_dir=str(cache_dir()), token=token, tqdm_class=bar)
    try:
        for i, (name, size) in enumerate(p.files):
            tracker.file = name
            before = tracker.done
            # the first file by the revision's name, so the cache records refs/<revision> -> commit
            # (and HF_HUB_OFFLINE finds it by that name); the rest by the commit it resolved to
            revision = ref.rev if i == 0 else (folder.name if folder else p.commit)
            path = Path(hf_hub_download(ref.repo_id, name, revision=revision, **kw))
            # a cached file reports no bytes: count it whole; one downloaded counts its own
            tracker.add(max(0, size - (tracker.done - before)))
            tracker.files_done += 1
            if folder is None:
                folder = path.parent
    except DownloadCancelled:
        raise
    except Exception as exc:  # every failure becomes one line
        cancelled = exc.__context__ if isinstance(exc.__context__, DownloadCancelled) else None
        if cancelled is not None:
            raise cancelled from None
        if unreachable(exc):
            raise HubError(
                f"the connection to {endpoint()} broke while fetching {tracker.file} of {ref}: "
                f"run it again to continue (finished files are kept)"
            ) from None
        raise explain(exc, ref) from None
    assert folder is not None
    missing = check_complete(folder)
    if missing:
        raise HubError(f"{ref} downloaded, but its snapshot lacks {', '.join(missing[:3])}")
    tracker.file = ""
    tracker.emit(finished=True)
    return folder


__all__ = [
    "PICKLE_SUFFIXES",
    "SAFETENSORS_INDEX",
    "TOKENIZER_FILES",
    "DownloadProgress",
    "Plan",
    "cached_folder",
    "check_complete",
    "fetch",
    "needed_files",
    "plan",
]
