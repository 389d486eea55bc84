"""Hub names: ``[hf:]REPO[@REVISION]`` as a :class:`HubRef`, why a name is not one, and the Hub's errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model.io.checkpoint.saved import CheckpointError

PREFIX = "hf:"


class HubError(CheckpointError):
    """A model that cannot be fetched or opened from the Hub: the message is one line for a person."""


class HubUnreachable(HubError):
    """The Hub could not be reached (no network, DNS, refused connection, timeout)."""


class DownloadCancelled(HubError):
    """The download was cancelled; complete files stay in the cache, nothing half-written does."""


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
    # lazy: the names are checked as they are typed; the library loads at the first one (model.io.hub)
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


__all__ = [
    "PREFIX",
    "REPO_ID_RULE",
    "DownloadCancelled",
    "HubError",
    "HubRef",
    "HubUnreachable",
    "is_hub_spec",
    "parse_ref",
    "ref_problem",
    "repo_id_problem",
    "revision_problem",
]
