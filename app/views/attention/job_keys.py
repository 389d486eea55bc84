"""The compute keys of the Attention tab's jobs, what each does (its busy line), and which a page waits for.

The trace of the prompt is ``attention.inspect``; the follow-up jobs of one run share the prefix
:data:`FOLLOW_UPS` (a new run supersedes them all); the Circuits page's composition scores depend on
the weights alone and are not a follow-up.
"""

from __future__ import annotations

from typing import Any

#: the compute key of the trace of the prompt (every head's pattern and the next tokens)
INSPECT_JOB = "attention.inspect"
#: key prefix of the follow-up jobs of one run (metrics, head detail, ...): a new run cancels them
FOLLOW_UPS = "attention.run."
#: The compute keys of the Circuits page's follow-up jobs (:meth:`AttentionJobs.submit` puts them under
#: :data:`FOLLOW_UPS`).
HEAD_JOB = FOLLOW_UPS + "attention.circuit_head"
PATH_JOB = FOLLOW_UPS + "attention.path"
#: the compute key of the Circuits page's composition scores (the weights alone: not a follow-up)
CIRCUITS_JOB = "attention.circuits"

#: the compute keys of the Q–K map page's map of one head and every head's thumbnail (the weights and
#: the corpus: not follow-ups); placing the prompt in the map is the follow-up ``attention.qkprompt``
QK_MAP_JOB = "attention.qkmap"
QK_THUMBS_JOB = "attention.qkthumbs"
#: the compute key of the Heads-over-a-corpus page's run (the weights and the corpus: not a follow-up)
CORPUS_JOB = "attention.corpus"

#: What each follow-up job does, as its busy line says it ("Patching … · 120 of 690 runs").
TITLES = {
    "attention.patching": "Patching",
    "attention.attribution": "Attributing the logit of",
    "attention.ablation": "Switching heads off on",
    "attention.path": "Path patching",
    "attention.circuit_head": "The selected head's full circuits on",
    "attention.head": "Taking the selected head apart on",
    "attention.metrics": "Scoring every head on",
    "attention.aggregate": "Averaging the patterns of",
    "attention.next": "Ranking the next tokens of",
    "attention.experts": "Reading the router's choices on",
    "attention.qkprompt": "Placing in the Q–K map the queries and keys of",
    "attention.features": "Reading the SAE's features of",
}


def page_job_keys(page: Any) -> tuple[str, ...]:
    """The compute keys of the jobs ``page`` waits for (its busy line follows them)."""
    keys = []
    if page.needs_causal:
        keys.append(FOLLOW_UPS + f"attention.{page.needs_causal}")
    if page.needs_circuits:
        keys += [CIRCUITS_JOB, HEAD_JOB, PATH_JOB]
    if page.needs_head_detail:
        keys.append(FOLLOW_UPS + "attention.head")
    if page.needs_aggregates:
        keys.append(FOLLOW_UPS + "attention.aggregate")
    if page.needs_next_tokens:
        keys.append(FOLLOW_UPS + "attention.next")
    if page.needs_experts:
        keys.append(FOLLOW_UPS + "attention.experts")
    if page.needs_qk_map:
        keys += [QK_MAP_JOB, QK_THUMBS_JOB, FOLLOW_UPS + "attention.qkprompt"]
    if page.needs_corpus_heads:
        keys.append(CORPUS_JOB)
    keys += [FOLLOW_UPS + f"attention.{name}" for name in page.own_jobs]
    return tuple(keys)


__all__ = [
    "CIRCUITS_JOB", "CORPUS_JOB", "FOLLOW_UPS", "HEAD_JOB", "INSPECT_JOB", "PATH_JOB", "QK_MAP_JOB",
    "QK_THUMBS_JOB", "TITLES", "page_job_keys",
]  # fmt: skip
