"""The causal tools of the Attention tab as plain functions of a model: activation patching and
direct logit attribution of one prompt, with token labels (the numbers come from
:mod:`model.interp.analysis.patching` and :mod:`model.interp.analysis.attribution`).

- :func:`patching_of`: a clean prompt (the tab's) and a corrupted one of the same token length →
  :class:`PatchingResult`: how much of the clean − corrupted logit difference patching each head
  (``restored`` [L, H]) and the residual stream at each layer × position (``restored`` [L, T])
  restores;
- :func:`attribution_of`: the direct contribution of every head, MLP and the embedding to one logit
  (or a difference of two) → :class:`AttributionResult`;
- :func:`suggest_corruption`: a corrupted prompt of the same token length (two words swapped, names
  first), the classic "John and Mary" → "Mary and John" corruption;
- :func:`one_token`: a token typed as text → its id, or a one-line error;
- :func:`path_patching_of`: path patching of one sender head through every later head's queries,
  keys and values (Wang et al., 2022) on the Patching page's prompts → :class:`PathPatchingResult`;
  :func:`induction_corruption` is its corruption when no two words can be swapped (a prompt that
  repeats itself, as the starter model's: the earlier copy of the last token replaced).

No Qt: the app runs these in its compute worker; each puts the model in evaluation mode for its
forward passes and restores the mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from model.interp.analysis.attribution import LogitAttribution, direct_logit_attribution
from model.interp.analysis.patching import Patching, PathPatching, patch_heads, patch_resid, path_patch
from model.interp.prompt import PromptError, encode_prompt, prompt_of_ids
from model.progress import part
from model.text.tokens import visible


def one_token(tokenizer, text: str, what: str = "token") -> int:
    """The id of ``text`` when it is exactly one token; else a :class:`PromptError` naming the count."""
    try:
        ids = tokenizer.encode(text)
    except ValueError as exc:
        raise PromptError(f"the {what} {text!r}: {exc}") from None
    if len(ids) != 1:
        pieces = " | ".join(visible(s) for s in tokenizer.token_strings(ids)) if ids else "nothing"
        raise PromptError(f"the {what} {text!r} is {len(ids)} tokens ({pieces}): type exactly one token")
    return int(ids[0])


#: Words of the prompt :func:`suggest_corruption` tries to pair (names first).
SWAP_CANDIDATES = 12


def _swap(prompt: str, a: str, b: str) -> str:
    """``prompt`` with the whole words ``a`` and ``b`` exchanged."""
    swap = {a: b, b: a}
    return re.sub(rf"\b({re.escape(a)}|{re.escape(b)})\b", lambda m: swap[m.group(0)], prompt)


def suggest_corruption(tokenizer, prompt: str) -> str | None:
    """``prompt`` with two words swapped everywhere they occur, keeping its token count: capitalised
    words (names) first, then any two words that encode to the same number of tokens. None when no
    swap keeps the length (type a corrupted prompt by hand)."""
    words = list(dict.fromkeys(re.findall(r"[^\W\d_]+", prompt)))
    if len(words) < 2:
        return None
    n_tokens = len(tokenizer.encode(prompt))
    # names: capitalised somewhere other than the start of a sentence ("When Mary and John ...")
    names = {
        m.group(1)
        for m in re.finditer(r"(?<![.!?\n]\s)(?<!^)\b([^\W\d_]+)", prompt)
        if m.group(1)[0].isupper()
    }
    # at most the first SWAP_CANDIDATES words: each pair tried re-encodes the whole prompt
    ordered = ([w for w in words if w in names] + [w for w in words if w not in names])[:SWAP_CANDIDATES]
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            swapped = _swap(prompt, a, b)
            if swapped == prompt:
                continue
            try:
                if len(tokenizer.encode(swapped)) == n_tokens:
                    return swapped
            except ValueError:
                continue
    return None


@dataclass
class PatchingResult:
    """Patching of ``corrupt_prompt`` from the clean run of ``prompt`` (see
    :mod:`model.interp.analysis.patching`).

    ``heads`` (restored [L, H]) and ``resid`` (restored [L, T]) are the two sweeps; ``labels`` /
    ``corrupt_labels`` [T] the visible tokens of each prompt; ``answer_label`` / ``wrong_label`` the two
    tokens of the metric ``logit[answer] − logit[wrong]`` at position ``heads.position``.
    """

    prompt: str
    corrupt_prompt: str
    heads: Patching
    resid: Patching
    labels: list[str]
    corrupt_labels: list[str]
    answer_label: str
    wrong_label: str

    def arrays(self) -> dict[str, np.ndarray]:
        """The numbers as plain arrays (the .npz export; no pickles)."""
        return {
            "restored_heads": self.heads.restored.astype(np.float64),
            "logit_diff_heads": self.heads.patched.astype(np.float64),
            "restored_resid": self.resid.restored.astype(np.float64),
            "logit_diff_resid": self.resid.patched.astype(np.float64),
            "clean_logit_diff": np.float64(self.heads.clean_diff),
            "corrupt_logit_diff": np.float64(self.heads.corrupt_diff),
            "answer": np.array([self.heads.answer, self.heads.wrong]),
            "answer_tokens": np.array([self.answer_label, self.wrong_label], dtype=str),
            "position": np.int64(self.heads.position),
            "tokens": np.array(self.labels, dtype=str),
            "corrupt_tokens": np.array(self.corrupt_labels, dtype=str),
        }


def patching_of(
    model,
    tokenizer,
    ids: list[int],
    corrupt_prompt: str,
    *,
    answer: str | None = None,
    wrong: str | None = None,
    position: int = -1,
    prompt: str = "",
    dropped: int = 0,
) -> PatchingResult:
    """Patch every head and every (layer, position) of the residual stream from the clean run of
    ``ids`` into ``corrupt_prompt``'s run (``L·H + L·T`` batched runs). ``answer`` / ``wrong``: tokens
    as text (None: the clean run's top token, the corrupted run's). ``dropped``: the clean prompt's
    tokens left out to fit (the context or memory); the corrupted prompt is cut to ``len(ids)`` by the
    same rule (:func:`~model.interp.prompt.encode_prompt`: the last tokens, BOS kept), so the two
    line up position by position. A :class:`PromptError` when the corrupted prompt does not encode to
    as many tokens as the clean one."""
    cut = _cut_like(tokenizer, corrupt_prompt, ids, dropped, "patching")
    corrupt = list(cut.ids)
    a, w = _metric_tokens(tokenizer, answer, wrong)
    L, H, T = model.config.core.n_layers, model.config.attention.n_heads, len(ids)
    with part(0, L * H + L * T):  # one count of runs over both sweeps
        heads = patch_heads(model, ids, corrupt, answer=a, wrong=w, position=position)
    with part(L * H, L * H + L * T):
        resid = patch_resid(model, ids, corrupt, answer=heads.answer, wrong=heads.wrong, position=position)
    labels = _labels(tokenizer, ids)
    answer_label, wrong_label = _labels(tokenizer, [heads.answer, heads.wrong])
    return PatchingResult(
        prompt, corrupt_prompt, heads, resid, labels, list(cut.labels), answer_label, wrong_label
    )


@dataclass
class AttributionResult:
    """Direct logit attribution at one position (:class:`~model.interp.analysis.attribution.LogitAttribution`
    ``attr``) with the labels: ``token_label`` (and ``other_label`` for a difference), ``labels`` [T];
    ``norm``: the final norm's kind (``layernorm`` or ``rmsnorm``), whose scale was frozen."""

    attr: LogitAttribution
    token_label: str
    other_label: str | None
    labels: list[str]
    norm: str

    @property
    def target(self) -> str:
        """What is attributed, in words: ``logit('x')`` or ``logit('x') − logit('y')``."""
        text = f"logit('{self.token_label}')"
        return text + (f" − logit('{self.other_label}')" if self.other_label is not None else "")

    def arrays(self) -> dict[str, np.ndarray]:
        a = self.attr
        names, values = zip(*a.parts(), strict=True)
        return {
            "heads": a.heads.astype(np.float64),
            "mlp": a.mlp.astype(np.float64),
            "attn_bias": a.attn_bias.astype(np.float64),
            "embed": np.float64(a.embed),
            "norm_bias": np.float64(a.norm_bias),
            "logit": np.float64(a.logit),
            "total": np.float64(a.total),
            "frozen_norm_scale": np.float64(a.scale),
            "position": np.int64(a.position),
            "token": np.array([a.token, -1 if a.other is None else a.other]),
            "parts": np.array(names, dtype=str),
            "part_values": np.array(values, dtype=np.float64),
            "tokens": np.array(self.labels, dtype=str),
        }


def attribution_of(
    model,
    tokenizer,
    ids: list[int],
    *,
    token: str | None = None,
    other: str | None = None,
    position: int = -1,
) -> AttributionResult:
    """:class:`AttributionResult` of ``logit[position, token]`` (``− logit[position, other]``) for the
    prompt ``ids``; ``token`` None = the model's top prediction there. Tokens are typed as text
    (:func:`one_token`). Post-LN models are refused (a ValueError from the analysis)."""
    t = one_token(tokenizer, token, "token") if token else None
    o = one_token(tokenizer, other, "other token") if other else None
    attr = direct_logit_attribution(model, ids, token=t, other=o, position=position)
    labels = _labels(tokenizer, ids)
    names = _labels(tokenizer, [attr.token] + ([attr.other] if attr.other is not None else []))
    other_label = names[1] if len(names) > 1 else None
    return AttributionResult(attr, names[0], other_label, labels, model.config.normalization.norm)


def induction_corruption(ids: list[int], vocab_size: int) -> tuple[list[int], int, int] | None:
    """For a prompt whose last token occurred before (``… A B … A``, where an induction head predicts
    ``B``): the prompt with that earlier ``A`` replaced by the first token the prompt lacks, so no key
    has ``A`` before it any more: (corrupted ids, the position changed, the new token). None when the
    last token is new or the prompt uses every token."""
    ids = [int(i) for i in ids]
    earlier = [i for i in range(len(ids) - 2, -1, -1) if ids[i] == ids[-1]]
    if not earlier:
        return None
    used = set(ids)
    new = next((t for t in range(int(vocab_size)) if t not in used), None)
    if new is None:
        return None
    at = earlier[0]
    return [*ids[:at], new, *ids[at + 1 :]], at, new


@dataclass
class PathPatchingResult:
    """Path patching of one sender (:class:`~model.interp.analysis.patching.PathPatching` ``paths``)
    from the clean run of ``prompt`` into ``corrupt_prompt``'s; ``corruption``: how the corrupted prompt
    was chosen, in words; ``labels`` / ``corrupt_labels`` [T]; ``answer_label`` / ``wrong_label`` the
    tokens of the metric."""

    prompt: str
    corrupt_prompt: str
    corruption: str
    paths: PathPatching
    labels: list[str]
    corrupt_labels: list[str]
    answer_label: str
    wrong_label: str

    def arrays(self) -> dict[str, np.ndarray]:
        """The numbers as plain arrays (the .npz export; no pickles)."""
        return {
            **self.paths.arrays(),
            "answer_tokens": np.array([self.answer_label, self.wrong_label], dtype=str),
            "tokens": np.array(self.labels, dtype=str),
            "corrupt_tokens": np.array(self.corrupt_labels, dtype=str),
        }


def path_patching_of(
    model,
    tokenizer,
    ids: list[int],
    corrupt_prompt: str | None,
    sender: tuple[int, int],
    *,
    answer: str | None = None,
    wrong: str | None = None,
    position: int = -1,
    prompt: str = "",
    dropped: int = 0,
    layers: list[int] | None = None,
) -> PathPatchingResult:
    """Path patching of ``sender`` (layer, head) through the heads of ``layers`` (default: every later
    layer), from the clean run of ``ids`` into the corrupted one's:
    ``corrupt_prompt`` as typed (cut as :func:`patching_of` cuts it), or when empty two words of
    ``prompt`` swapped (:func:`suggest_corruption`), or else :func:`induction_corruption`. A
    :class:`PromptError` when none applies or the lengths differ; a ValueError for a Post-LN model."""
    ids = [int(i) for i in ids]
    how = "typed"
    if not corrupt_prompt:
        corrupt_prompt = suggest_corruption(tokenizer, prompt) if prompt else None
        how = "two words of the prompt swapped"
    if corrupt_prompt:
        cut = _cut_like(tokenizer, corrupt_prompt, ids, dropped, "path patching")
        corrupt, corrupt_labels = list(cut.ids), list(cut.labels)
    else:
        made = induction_corruption(ids, int(model.config.core.vocab_size))
        if made is None:
            raise PromptError(
                "no two words of this prompt can be swapped without changing its token count, and its "
                "last token does not occur earlier: type a corrupted prompt of the same length on the "
                "Patching page"
            )
        corrupt, at, _new = made
        corrupt_labels = _labels(tokenizer, corrupt)
        old_label = _labels(tokenizer, [ids[at]])[0]
        how = (
            f"the earlier '{old_label}' (position {at}) replaced by '{corrupt_labels[at]}': no key has "
            "the last token before it any more (an induction corruption)"
        )
        corrupt_prompt = tokenizer.decode(corrupt)
    a, w = _metric_tokens(tokenizer, answer, wrong)
    paths = path_patch(model, ids, corrupt, sender, answer=a, wrong=w, position=position, layers=layers)
    answer_label, wrong_label = _labels(tokenizer, [paths.answer, paths.wrong])
    return PathPatchingResult(
        prompt, corrupt_prompt, how, paths, _labels(tokenizer, ids), corrupt_labels, answer_label, wrong_label
    )


def _cut_like(tokenizer, corrupt_prompt: str, ids: list[int], dropped: int, what: str):
    """``corrupt_prompt`` encoded and cut as the clean prompt was (its last ``len(ids)`` tokens, BOS
    kept: :func:`~model.interp.prompt.encode_prompt`), so the two runs line up position by position; a
    :class:`PromptError` naming ``what`` needs when the two are not the same length."""
    cut = encode_prompt(tokenizer, corrupt_prompt, len(ids))
    if cut.T + cut.dropped != len(ids) + dropped:
        raise PromptError(
            f"the corrupted prompt is {cut.T + cut.dropped} tokens and the clean one {len(ids) + dropped}: "
            f"{what} needs the same length (swap words of the same token length)"
        )
    return cut


def _metric_tokens(tokenizer, answer: str | None, wrong: str | None) -> tuple[int | None, int | None]:
    """The metric's answer and wrong token ids from their text (None: the runs' own top tokens)."""
    a = one_token(tokenizer, answer, "answer token") if answer else None
    w = one_token(tokenizer, wrong, "wrong token") if wrong else None
    return a, w


def _labels(tokenizer, ids) -> list[str]:
    """The visible labels of token ``ids``."""
    return list(prompt_of_ids(tokenizer, ids).labels)


__all__ = [
    "AttributionResult",
    "PatchingResult",
    "PathPatchingResult",
    "attribution_of",
    "induction_corruption",
    "one_token",
    "patching_of",
    "path_patching_of",
    "suggest_corruption",
]
