"""What ``huggingface_hub`` says, for the rest of the package: its settings read at call time
(:func:`offline`, :func:`endpoint`, :func:`cache_dir`) and its errors as one line (:func:`explain`)."""

from __future__ import annotations

import os
from pathlib import Path

from model.io.hub.refs import REPO_ID_RULE, HubError, HubRef, HubUnreachable, ref_problem

# huggingface_hub takes about 0.3 s to import: it is imported inside the functions that talk to it
# (see model.io.hub), so telling an hf: name from a path and listing the catalogue never load it.


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


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` means the Hub could not be reached (no network, offline mode, a timeout)."""
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
    if unreachable(exc):
        return HubUnreachable(
            f"cannot reach the Hub at {endpoint()} ({type(exc).__name__}): you seem to be offline, and "
            f"{ref} is not in the cache yet"
        )
    if isinstance(exc, OSError):
        return HubError(f"downloading {ref} failed: {str(exc).splitlines()[0] if str(exc) else exc!r}")
    return HubError(f"downloading {ref} failed: {type(exc).__name__}: {exc}")


__all__ = ["cache_dir", "endpoint", "explain", "offline", "unreachable"]
