"""Models from the Hugging Face Hub: ``hf:REPO[@REVISION]`` fetched into the standard cache, then opened.

Everything goes through ``huggingface_hub`` (its cache layout, ETags, redirects, retries, tokens); this
module only decides *which* files a model needs and turns the library's progress and errors into what
a person reads:

* :func:`parse_ref` — ``"hf:gpt2"``, ``"openai-community/gpt2@main"`` → :class:`HubRef`; a name
  ``huggingface_hub`` would refuse (``openai-``, ``a/``, ``x--y``) is a :class:`HubError` of one line
  (:func:`ref_problem` says why without raising: what the Get a model… field shows while typing).
* :func:`needed_files` — of a repo's top-level files: ``config.json``, the tokenizer files, and the
  weights as safetensors (``model.safetensors``, or ``model.safetensors.index.json`` + its shards).
  A repo whose weights exist only as pickles (``pytorch_model.bin``, ``*.pt``) is refused before any
  byte is fetched: Attention Lab never unpickles a downloaded file.
* :func:`plan` — one metadata call (``model_info`` with file sizes): commit, files, bytes, family.
* :func:`fetch` — the planned files, one ``hf_hub_download`` each, into the cache; returns the
  snapshot folder that :func:`model.io.pretrained.open_model` reads. ``on_progress`` receives
  :class:`DownloadProgress` (bytes, total, speed); ``should_stop`` cancels between two chunks.
  ``huggingface_hub`` writes each file to a temporary name and renames it into the cache only when
  complete, so a cancelled or broken download never leaves a half-file where a model is read;
  files already complete are kept and not fetched again, and a transfer cut by the network resumes
  where it stopped (an HTTP ``Range`` request).
* With ``HF_HUB_OFFLINE=1`` (or when the Hub cannot be reached) :func:`fetch` opens what the cache
  holds and fetches nothing; a model only partly downloaded is named as such.

The endpoint and cache come from the environment at call time (``HF_ENDPOINT``, ``HF_HUB_CACHE`` /
``HF_HOME``), falling back to ``huggingface_hub``'s own settings, so a test can point them at a server
on 127.0.0.1 and a temporary folder.
"""

from __future__ import annotations

import fnmatch
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.files import read_json
from model.io.checkpoint import CheckpointError

__all__ = [
    "CATALOGUE",
    "CatalogueEntry",
    "DownloadCancelled",
    "DownloadProgress",
    "HubError",
    "HubRef",
    "HubUnreachable",
    "Plan",
    "cached_folder",
    "fetch",
    "format_bytes",
    "is_hub_spec",
    "needed_files",
    "parse_ref",
    "plan",
    "ref_problem",
    "resolve",
    "resolve_name",
]

PREFIX = "hf:"

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


class HubError(CheckpointError):
    """A model that cannot be fetched or opened from the Hub: the message is one line for a person."""


class HubUnreachable(HubError):
    """The Hub could not be reached (no network, DNS, refused connection, timeout)."""


class DownloadCancelled(HubError):
    """The download was cancelled; complete files stay in the cache, nothing half-written does."""


# ---------------------------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HubRef:
    """A repo on the Hub and a revision (branch, tag or commit; ``None`` = the default branch)."""

    repo_id: str
    revision: str | None = None

    @property
    def rev(self) -> str:
        return self.revision or "main"

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")

    @property
    def spec(self) -> str:
        """The ``hf:REPO[@REVISION]`` form ``--checkpoint`` accepts."""
        return PREFIX + str(self)


def is_hub_spec(text: Any) -> bool:
    """Whether ``text`` names a Hub model (``hf:...``) rather than a local path."""
    return isinstance(text, str) and text.startswith(PREFIX)


#: How a repo id looks (huggingface_hub's rules, which :func:`repo_id_problem` finally asks).
REPO_ID_RULE = "NAME or OWNER/NAME of letters, digits, '-', '_' and '.'"


def repo_id_problem(repo_id: str) -> str:
    """Why ``repo_id`` is not a Hub repo id (empty when it is one), in a few words for a person.

    The rules are ``huggingface_hub``'s own (``huggingface_hub.utils.validate_repo_id``), checked last
    so that nothing it would refuse gets through; the checks before it only name the problem better.
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    parts = repo_id.split("/")
    if not repo_id:
        return "no repo id"
    if len(parts) > 2:
        return "a repo id is NAME or OWNER/NAME (one slash)"
    if not all(parts):
        return "OWNER/NAME needs a name on both sides of the slash"
    if any(c.isspace() for c in repo_id):
        return "a repo id has no spaces"
    if "--" in repo_id or ".." in repo_id:
        return "a repo id has no '--' and no '..'"
    if any(p[0] in "-." or p[-1] in "-." for p in parts):
        return "a name neither starts nor ends with '-' or '.'"
    if any(len(p) > 96 for p in parts):
        return "a name has at most 96 characters"
    if repo_id.endswith(".git"):
        return "a repo id does not end in '.git'"
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return f"a repo id is {REPO_ID_RULE}"
    return ""


def revision_problem(revision: str) -> str:
    """Why ``revision`` cannot name a branch, tag or commit (empty when it can), in a few words."""
    if not revision:
        return "nothing after '@' (a branch, tag or commit)"
    if any(c.isspace() or ord(c) < 32 or c in "~^:?*[\\" for c in revision):
        return "a revision has no spaces and none of ~ ^ : ? * [ \\"
    if ".." in revision or "//" in revision or revision[0] in "/." or revision[-1] in "/.":
        return "a revision has no '..' or '//' and neither starts nor ends with '/' or '.'"
    return ""


def ref_problem(text: str) -> str:
    """Why ``text`` is not ``[hf:]REPO[@REVISION]`` (empty when it is): what :func:`parse_ref` says."""
    raw = (text[len(PREFIX) :] if is_hub_spec(text) else text).strip()
    repo, at, revision = raw.partition("@")
    return repo_id_problem(repo.strip()) or (revision_problem(revision.strip()) if at else "")


def parse_ref(text: str) -> HubRef:
    """``[hf:]OWNER/NAME[@REVISION]`` or ``[hf:]NAME[@REVISION]`` → :class:`HubRef`; HubError if malformed.

    A name ``huggingface_hub`` would refuse (``openai-``, ``a/``, ``x--y``, ...) is refused here, with
    one line, so no :class:`HubRef` this returns makes the library raise its validation error later.
    """
    problem = ref_problem(text)
    if problem:
        raise HubError(f"{text!r} is not a Hub model name: {problem}; e.g. hf:openai-community/gpt2@main")
    raw = (text[len(PREFIX) :] if is_hub_spec(text) else text).strip()
    repo, _, revision = raw.partition("@")
    return HubRef(repo.strip(), revision.strip() or None)


# ---------------------------------------------------------------------------------------------
# which files
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# settings read at call time
# ---------------------------------------------------------------------------------------------
def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def offline() -> bool:
    """``HF_HUB_OFFLINE=1`` (read now, or as ``huggingface_hub`` read it at import)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or _truthy(os.environ.get("HF_HUB_OFFLINE"))


def endpoint() -> str:
    """The Hub's address: ``HF_ENDPOINT`` now, else ``huggingface_hub``'s."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def cache_dir() -> Path:
    """The ``huggingface_hub`` cache: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else the library's."""
    from huggingface_hub import constants

    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(constants.HF_HUB_CACHE)


# ---------------------------------------------------------------------------------------------
# errors, in one line
# ---------------------------------------------------------------------------------------------
def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _unreachable(exc: BaseException) -> bool:
    import httpx2
    from huggingface_hub.errors import OfflineModeIsEnabled

    return isinstance(exc, (httpx2.TransportError, OfflineModeIsEnabled, ConnectionError, TimeoutError))


def explain(exc: BaseException, ref: HubRef) -> HubError:
    """The one-line :class:`HubError` for what ``huggingface_hub`` raised about ``ref``."""
    from huggingface_hub import errors as E

    status = _status(exc)
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, E.HFValidationError):
        return HubError(f"{str(ref)!r} is not a Hub model name: {ref_problem(str(ref)) or REPO_ID_RULE}")
    if isinstance(exc, E.GatedRepoError):
        return HubError(
            f"{ref.repo_id} is gated: accept its terms on the Hub's page, then log in "
            f"(`hf auth login` or HF_TOKEN)"
        )
    if isinstance(exc, E.RevisionNotFoundError):
        return HubError(f"{ref.repo_id} has no revision {ref.rev!r} (404): check the branch, tag or commit")
    if isinstance(exc, E.RepositoryNotFoundError):
        code = status or 404
        return HubError(
            f"{ref.repo_id} was not found on the Hub ({code}): check the name; if it is private, log in "
            f"(`hf auth login` or HF_TOKEN)"
        )
    if isinstance(exc, E.EntryNotFoundError):
        return HubError(f"{ref} lacks a file it lists ({status or 404}): {str(exc).splitlines()[0]}")
    if status == 401:
        return HubError(f"{ref.repo_id} needs a login (401): `hf auth login` or set HF_TOKEN")
    if status == 403:
        return HubError(f"access to {ref.repo_id} is forbidden (403): your token lacks the right to read it")
    if status == 429:
        return HubError("the Hub is rate-limiting this machine (429): wait a minute and try again")
    if status is not None and status >= 500:
        return HubError(f"the Hub answered {status} (a server error) for {ref}: try again later")
    if status is not None:
        return HubError(f"the Hub answered {status} for {ref}: {str(exc).splitlines()[0]}")
    if _unreachable(exc):
        return HubUnreachable(
            f"cannot reach the Hub at {endpoint()} ({type(exc).__name__}): you seem to be offline, and "
            f"{ref} is not in the cache yet"
        )
    if isinstance(exc, OSError):
        return HubError(f"downloading {ref} failed: {str(exc).splitlines()[0] if str(exc) else exc!r}")
    return HubError(f"downloading {ref} failed: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------
# the plan: what will be fetched
# ---------------------------------------------------------------------------------------------
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
        return f"{self.ref}: {fam}{format_bytes(self.total)} in {len(self.files)} files"


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
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line
        raise explain(exc, ref) from None
    sizes = {s.rfilename: int(s.size or 0) for s in (info.siblings or [])}
    names = needed_files(sizes, ref)
    family = ""
    if isinstance(getattr(info, "config", None), dict):
        family = str(info.config.get("model_type") or "")
    if not info.sha:
        raise HubError(f"the Hub gave no commit for {ref}")
    return Plan(ref, info.sha, tuple((n, sizes[n]) for n in names), family)


# ---------------------------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------------------------
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
        """``"12.3 MB of 548.1 MB (2%) · 4.1 MB/s · model.safetensors"``."""
        parts = [f"{format_bytes(self.done)} of {format_bytes(self.total)} ({self.fraction:.0%})"]
        if self.speed > 0:
            parts.append(f"{format_bytes(self.speed)}/s")
        if self.file and not self.finished:
            parts.append(self.file)
        return " · ".join(parts)


def format_bytes(n: float) -> str:
    """Bytes for a person, in decimal units as the Hub shows them: ``548.1 MB``."""
    n = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


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
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line
        cancelled = exc.__context__ if isinstance(exc.__context__, DownloadCancelled) else None
        if cancelled is not None:
            raise cancelled from None
        if _unreachable(exc):
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


def resolve_name(text: str) -> HubRef:
    """:func:`parse_ref`, with a catalogue name (``gpt2``, ``pythia-70m``) standing for its repo."""
    ref = parse_ref(text)
    for entry in CATALOGUE:
        if ref.repo_id == entry.name:
            return HubRef(entry.repo_id, ref.revision)
    return ref


def resolve(spec: str | Path, **fetch_kwargs: Any) -> str | Path:
    """``hf:REPO[@REV]`` → the local snapshot folder (fetched if needed); any other path unchanged."""
    if is_hub_spec(spec):
        return fetch(resolve_name(str(spec)), **fetch_kwargs)
    return spec


# ---------------------------------------------------------------------------------------------
# the catalogue
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogueEntry:
    """A model people study: repo, family, parameters, and the approximate bytes to download.

    ``size`` is the safetensors weights as listed on the Hub (the tokenizer and config add well under
    5 MB); :func:`plan` gives the exact figure for a revision.
    """

    name: str
    repo_id: str
    family: str
    n_params: str
    size: int
    note: str = ""

    @property
    def ref(self) -> HubRef:
        return HubRef(self.repo_id)


CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry("gpt2", "openai-community/gpt2", "GPT-2", "124M", 548_105_171, "12 layers × 12 heads"),
    CatalogueEntry("distilgpt2", "distilbert/distilgpt2", "GPT-2", "82M", 352_824_413, "6 layers × 12 heads"),
    CatalogueEntry("gpt2-medium", "openai-community/gpt2-medium", "GPT-2", "355M", 1_519_974_680, "24 × 16"),
    CatalogueEntry("pythia-70m", "EleutherAI/pythia-70m", "GPT-NeoX", "70M", 166_029_852, "6 × 8 heads"),
    CatalogueEntry(
        "pythia-160m", "EleutherAI/pythia-160m", "GPT-NeoX", "162M", 374_824_712, "12 layers × 12 heads"
    ),
    CatalogueEntry(
        "SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M", "Llama", "135M", 269_060_552, "30 × 9 heads, GQA 3"
    ),
    CatalogueEntry(
        "SmolLM2-360M", "HuggingFaceTB/SmolLM2-360M", "Llama", "362M", 723_674_912, "32 × 15 heads, GQA 5"
    ),
    CatalogueEntry("Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B", "Qwen2", "494M", 988_097_824, "24 × 14 heads, GQA 2"),
    CatalogueEntry(
        "TinyLlama-1.1B",
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "Llama",
        "1.1B",
        2_200_119_864,
        "22 × 32 heads, GQA 4",
    ),
)
