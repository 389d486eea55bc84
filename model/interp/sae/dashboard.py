"""A feature's dashboard over a corpus, as Neuronpedia shows one: where it fires and how strongly.

:func:`feature_stats` streams ``N`` prompts of ``T`` tokens of a corpus (the prompts of a corpus run:
:func:`~model.interp.corpus.run.prompt_batches`, a BOS prefix then a window) through the model only
as deep as the SAE's site (:func:`~model.interp.sae.site.site_activations`), encodes each batch,
``f = SAE(x)`` [B, T, F], and keeps per feature ``i``, whatever ``N``:

* ``fired[i]`` = #{tokens with ``f_i > 0``} and ``total[i]`` = Σ f_i: the firing frequency
  ``fired / n_tokens`` and the mean activation when firing ``total / fired``;
* ``max_activation[i]``;
* a histogram of its nonzero activations in :data:`HIST_BINS` equal bins over ``[0, high_i)``,
  ``high_i`` the smallest power of two above its largest activation so far: when a larger one comes
  ``high_i`` doubles and pairs of bins merge (the edges of the wider bins are edges of the narrower,
  so the counts stay exact, as one histogram of every activation with the final edges);
* its ``top_k`` activating examples, at most one per prompt (the prompt's position where ``f_i`` is
  largest), each with the ids ``c`` tokens either side (the bounded heap of
  :class:`~model.interp.corpus.examples.TopExamples`, a "head" per feature).

The BOS prefix's positions are left out of all of them (a BOS carries a huge stream norm in many
models, and SAELens trains without it). Memory: the model's pass to the site and one batch's
``f`` [B·T, F], plus ``F·(HIST_BINS + k·2(2c+1))`` kept numbers: independent of ``N``. Progress
(:func:`model.progress.report`) in prompts after each batch; a cancel stops within one block.

An example's whole prompt is not kept: :meth:`FeatureStats.prompt_ids` draws it again from the
corpus (the same seed and batches draw the same windows), as the source attribution of
:func:`~model.interp.sae.readout.feature_source_attribution` needs the tokens the heads attended to.

:func:`feature_dashboard` gathers one feature's page: these numbers, the tokens it promotes and
suppresses, and for a ``z`` SAE each head's share of it and, for each top example, the source tokens
the heads attended to (one pass as deep as the layer per example).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from model.interp.corpus.examples import TopExamples
from model.interp.corpus.result import CorpusSettings
from model.interp.corpus.run import batch_size_for, bos_prefix, check_settings, open_source, prompt_batches
from model.interp.sae.readout import (
    FeatureLogits,
    SourceAttribution,
    check_fits,
    feature_logits,
    feature_source_attribution,
    head_shares,
)
from model.interp.sae.sae import SparseAutoencoder
from model.interp.sae.site import site_activations
from model.progress import report
from model.text.datasource import DataSource
from model.text.tokens import visible

#: Bins of each feature's activation histogram (a power of two, so that two bins merge into one).
HIST_BINS = 32


@dataclass
class FeatureStats:
    """What :func:`feature_stats` kept of every feature ``i`` of ``F`` (module docstring).

    ``fired`` [F] int64, ``total`` [F] float64, ``max_activation`` [F] float32 (0: never fired),
    ``hist_counts`` [F, HIST_BINS] int64 over ``[0, hist_high[i])`` (``hist_high`` [F], 0: never fired),
    ``examples`` the top examples (``value`` / ``prompt`` / ``query`` = the position / ``tokens``, each
    ``[1, F, k, ...]``; an empty slot has ``prompt = −1``); ``n_tokens`` the positions read (BOS left
    out); ``settings``, ``prefix`` (BOS ids) and ``batch_size``: what draws the prompts again."""

    settings: CorpusSettings
    prefix: list[int]
    batch_size: int
    n_tokens: int
    fired: np.ndarray
    total: np.ndarray
    max_activation: np.ndarray
    hist_counts: np.ndarray
    hist_high: np.ndarray
    examples: TopExamples

    @property
    def n_features(self) -> int:
        return int(self.fired.shape[0])

    @property
    def frequency(self) -> np.ndarray:
        """[F] the share of tokens on which each feature fires, ``fired / n_tokens``."""
        return self.fired / max(1, self.n_tokens)

    @property
    def mean_activation(self) -> np.ndarray:
        """[F] the mean activation over the tokens where the feature fires (0 where it never does)."""
        return np.where(self.fired > 0, self.total / np.maximum(1, self.fired), 0.0)

    def histogram(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Feature ``i``'s histogram: (counts [HIST_BINS], edges [HIST_BINS + 1] from 0 to ``high``)."""
        return self.hist_counts[i], np.linspace(0.0, float(self.hist_high[i]), HIST_BINS + 1)

    def top(self, i: int) -> list[tuple[float, int, int]]:
        """Feature ``i``'s kept examples, best first: (activation, prompt, position)."""
        ex = self.examples
        return [
            (float(ex.value[0, i, r]), int(ex.prompt[0, i, r]), int(ex.query[0, i, r]))
            for r in range(ex.k)
            if ex.prompt[0, i, r] >= 0
        ]

    def example_text(self, i: int, rank: int, tokenizer) -> str:
        """Example ``rank`` of feature ``i`` as one line: the ``c`` tokens either side of the
        activating one, which is marked ``⟦token⟧``."""
        ex, c = self.examples, self.examples.context
        window = ex.tokens[0, i, rank, 1]  # the ids around the position (row 1: the "query" window)
        kept = [(offset, int(t)) for offset, t in enumerate(window) if t >= 0]
        labels = [visible(s) for s in tokenizer.token_strings([t for _, t in kept])]
        return "".join(
            f"⟦{label}⟧" if offset == c else label for (offset, _), label in zip(kept, labels, strict=True)
        )

    def prompt_ids(self, n: int, source: DataSource) -> torch.Tensor:
        """Prompt ``n`` of the run, ids [T], drawn again from ``source`` (the corpus it read)."""
        if not 0 <= n < self.settings.n_prompts:
            raise ValueError(f"prompt {n}: the run read prompts 0 to {self.settings.n_prompts - 1}")
        for start, ids in prompt_batches(source, self.settings, self.prefix, self.batch_size):
            if n < start + len(ids):
                return ids[n - start]
        raise AssertionError("unreachable: the batches cover every prompt")


class _Histograms:
    """Every feature's histogram of nonzero activations, exact under a growing range (module doc)."""

    def __init__(self, n_features: int, bins: int = HIST_BINS):
        assert bins >= 2 and bins & (bins - 1) == 0, "bins must be a power of two"
        self.bins = bins
        self.counts = np.zeros((n_features, bins), dtype=np.int64)
        self.high = np.zeros(n_features, dtype=np.float64)

    def add(self, feature: np.ndarray, value: np.ndarray) -> None:
        """Count activations ``value`` (> 0) of features ``feature`` (same length)."""
        if not len(value):
            return
        F, n = self.counts.shape
        peak = np.zeros(F)
        np.maximum.at(peak, feature, value)
        fresh = (self.high == 0) & (peak > 0)  # the first power of two above the first peak
        self.high[fresh] = 2.0 ** (np.floor(np.log2(peak[fresh])) + 1)
        while (grow := (peak >= self.high) & (peak > 0)).any():
            merged = self.counts[grow].reshape(-1, n // 2, 2).sum(axis=-1)
            self.counts[grow] = np.concatenate([merged, np.zeros_like(merged)], axis=1)
            self.high[grow] *= 2
        # a power-of-two high and bin count make v·n/high exact: the bin is floor of it
        b = np.minimum((value * n / self.high[feature]).astype(np.int64), n - 1)
        self.counts += np.bincount(feature * n + b, minlength=F * n).reshape(F, n)


@torch.no_grad()
def feature_stats(
    model,
    tokenizer,
    sae: SparseAutoencoder,
    corpus: str | CorpusSettings,
    *,
    source: DataSource | None = None,
    n_prompts: int = 256,
    seq_len: int = 64,
    top_k: int = 10,
    context: int = 8,
    seed: int = 0,
    batch_size: int = 0,
) -> FeatureStats:
    """Every feature of ``sae`` read over a corpus (module docstring): a :class:`FeatureStats`.

    ``corpus``: a data source's name (``builtin:NAME``, ``task:NAME``, a text file; the keywords give
    the rest of the run) or a whole :class:`CorpusSettings` (its ``n_prompts``, ``seq_len``, ``seed``,
    ``batch_size``, ``top_k``, ``context`` used); ``source``: the corpus already opened. Refused in one
    line (:class:`~model.interp.corpus.run.CorpusError`) before any pass for settings no run can take."""
    settings = (
        corpus
        if isinstance(corpus, CorpusSettings)
        else CorpusSettings(corpus, n_prompts=n_prompts, seq_len=seq_len, seed=seed,
                            batch_size=batch_size, top_k=top_k, context=context)
    )  # fmt: skip
    cfg = model.config
    check_settings(settings, cfg.core.context_length)
    check_fits(model, sae)
    site = sae.config.site
    source = source if source is not None else open_source(settings.corpus, tokenizer)
    prefix = bos_prefix(tokenizer, settings.seq_len)
    skip = len(prefix)
    F, N = sae.config.d_sae, settings.n_prompts
    B = batch_size_for(cfg, settings)
    examples = TopExamples.empty("feature", 1, F, settings.top_k, settings.context)
    hist = _Histograms(F)
    fired = np.zeros(F, dtype=np.int64)
    total = np.zeros(F, dtype=np.float64)
    n_tokens = 0
    report(0, N, "prompts")
    for start, ids in prompt_batches(source, settings, prefix, B):
        x = site_activations(model, site, ids)[:, skip:]  # [b, T', d_in], the BOS left out
        f = sae.encode(x.to(sae.W_enc)).float().cpu()  # [b, T', F]
        b, T_read = f.shape[:2]
        n_tokens += b * T_read
        best, where = f.max(dim=1)  # [b, F]: each prompt's strongest position per feature
        value = torch.where(best > 0, best, -math.inf).numpy()
        pos = (where + skip).numpy()
        examples.offer(0, value, pos, pos, start, ids.numpy())
        examples.prompt[examples.value == -math.inf] = -1  # a prompt where it never fired is no example
        flat = f.reshape(-1, F)
        rows, cols = flat.nonzero(as_tuple=True)
        values = flat[rows, cols].double().numpy()
        fired += np.bincount(cols.numpy(), minlength=F)
        total += np.bincount(cols.numpy(), weights=values, minlength=F)
        hist.add(cols.numpy(), values)
        report(start + b, N, "prompts")
    top = examples.value[0, :, 0]
    return FeatureStats(
        settings=settings,
        prefix=prefix,
        batch_size=B,
        n_tokens=n_tokens,
        fired=fired,
        total=total,
        max_activation=np.where(np.isfinite(top), top, 0.0).astype(np.float32),
        hist_counts=hist.counts,
        hist_high=hist.high.astype(np.float32),
        examples=examples,
    )


@dataclass
class FeatureDashboard:
    """One feature's page (module docstring): ``examples`` (activation, prompt, position, text with the
    activating token marked), best first; ``histogram`` (counts, edges); ``logits`` its
    :class:`~model.interp.sae.readout.FeatureLogits` (one row) with ``promoted`` / ``suppressed`` token
    texts; for a ``z`` SAE ``head_shares`` [H] and ``sources``, one
    :class:`~model.interp.sae.readout.SourceAttribution` per example (None otherwise)."""

    feature: int
    frequency: float
    mean_activation: float
    max_activation: float
    examples: list[tuple[float, int, int, str]]
    histogram: tuple[np.ndarray, np.ndarray]
    logits: FeatureLogits
    promoted: list[str]
    suppressed: list[str]
    head_shares: np.ndarray | None
    sources: list[SourceAttribution] | None


def feature_dashboard(
    model, tokenizer, sae: SparseAutoencoder, stats: FeatureStats, feature: int, *,
    source: DataSource | None = None, k: int = 10,
) -> FeatureDashboard:  # fmt: skip
    """Feature ``feature``'s page from ``stats`` (what :func:`feature_stats` kept) and the weights:
    ``k`` promoted and suppressed tokens; for a ``z`` SAE the source attribution of each top example,
    its prompt drawn again from ``source`` (the corpus ``stats`` read; opened again when None)."""
    if not 0 <= feature < stats.n_features:
        raise IndexError(f"feature {feature}: the SAE has features 0 to {stats.n_features - 1}")
    top = stats.top(feature)
    logits = feature_logits(model, sae, feature, k)
    shares = sources = None
    if sae.config.site.kind == "z":
        shares = head_shares(sae, model.config)[feature]
        source = source if source is not None else open_source(stats.settings.corpus, tokenizer)
        sources = [
            feature_source_attribution(model, sae, feature, stats.prompt_ids(n, source), position)
            for _, n, position in top
        ]
    return FeatureDashboard(
        feature=int(feature),
        frequency=float(stats.frequency[feature]),
        mean_activation=float(stats.mean_activation[feature]),
        max_activation=float(stats.max_activation[feature]),
        examples=[(v, n, p, stats.example_text(feature, r, tokenizer)) for r, (v, n, p) in enumerate(top)],
        histogram=stats.histogram(feature),
        logits=logits,
        promoted=logits.tokens(tokenizer, "top")[0],
        suppressed=logits.tokens(tokenizer, "bottom")[0],
        head_shares=shares,
        sources=sources,
    )


__all__ = ["HIST_BINS", "FeatureDashboard", "FeatureStats", "feature_dashboard", "feature_stats"]
