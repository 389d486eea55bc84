"""The result of a corpus run, :class:`HeadScores`: every head's scores with intervals, the per-prompt
rows they come from, the top examples, the clusters; plain numpy and dataclasses, for a page to draw.

=====================  ==========================  ===================================================
attribute              shape                       meaning
=====================  ==========================  ===================================================
``names``              [S]                         the scores (:data:`~model.interp.corpus.statistics.SCORES`)
``per_prompt``         [S, N, L, H] float32        each prompt's score of each head (NaN: undefined)
``mean`` ``low``       [S, L, H] float64           the mean over prompts and its 95% percentile-
``high``                                           bootstrap interval (:func:`bootstrap_interval`)
``router_load``        [L, E] or None              a mixture of experts' mean fraction of choices per
                                                   expert (NaN in a dense layer); ``router_low/high``
``examples``           {kind: TopExamples}         ``"attention"`` and ``"z"`` (:mod:`.examples`)
``example_texts``      {kind: [L, H, k] str}       each example as one line of text
``clusters``           HeadClusters                by the scores: labels [L, H], names, 2-D placement
                                                   [L, H, 2] (PCA of the standardised scores)
``pattern_similarity`` [L·H, L·H] float64          1 − mean Jensen–Shannon divergence of two heads'
                                                   rows over the shared prompts (:mod:`.patterns`)
``pattern_clusters``   HeadClusters                by the patterns: the same, of ``√(1 − S)`` (MDS)
``settings``           CorpusSettings              what was run (``identity``: the cache key's parts)
=====================  ==========================  ===================================================

``result.score("induction")`` is a map [L, H]; ``result.interval("induction")`` its (low, high);
``result.top_heads("induction", 3)`` the best (layer, head)s; ``result.alike("patterns")`` the heads
grouped and placed by their patterns (``"scores"``: by their scores); :meth:`HeadScores.rows` the
heads × scores table (each head's cluster and place by both); :meth:`HeadScores.csv` writes it;
:meth:`HeadScores.arrays` / :meth:`HeadScores.from_arrays` are its ``.npz`` form (no pickle: strings
are unicode arrays, the settings JSON).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from model.interp.corpus.examples import EXAMPLE_KINDS, TopExamples
from model.interp.corpus.similarity import HeadClusters


@dataclass(frozen=True)
class CorpusSettings:
    """What a corpus run reads and keeps.

    ``corpus``: a data source as :func:`model.text.sources.resolve_source` names it (``builtin:tales``,
    ``task:induction``, a text file); ``n_prompts`` prompts ``N`` of ``seq_len`` tokens ``T`` (a BOS
    prefix, when the tokenizer has one, then a window of the corpus), drawn with ``seed``;
    ``batch_size`` prompts per forward pass (0: chosen by the model's size; prompts are drawn batch by
    batch, so it is part of what was run); ``top_k`` examples per head and kind, with ``context``
    tokens either side; ``window`` the local window (:func:`~model.interp.analysis.head_scores.local_share`);
    ``resamples`` of the bootstrap; ``n_clusters`` groups of heads; ``random_prompts``: how many of the
    prompts (the first ones) also measure induction on repeated random tokens, a second forward pass
    each (the others' ``induction_random`` is NaN, left out of its mean and interval);
    ``shared_prompts``: over how many of the prompts (the first ones) every pair of heads' patterns is
    compared (:mod:`~model.interp.corpus.patterns`; no extra pass, its memory grows with ``seq_len``²)."""

    corpus: str
    n_prompts: int = 256
    seq_len: int = 128
    seed: int = 0
    batch_size: int = 0
    top_k: int = 10
    context: int = 8
    window: int = 8
    resamples: int = 1000
    n_clusters: int = 6
    random_prompts: int = 64
    shared_prompts: int = 16


#: What heads can be found alike by (:meth:`HeadScores.alike`), in words.
ALIKE_BASES: dict[str, str] = {"scores": "corpus statistics", "patterns": "patterns on shared prompts"}


@dataclass
class HeadScores:
    """Every head's scores over a corpus (the module docstring lists the attributes)."""

    settings: CorpusSettings
    names: list[str]
    per_prompt: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    examples: dict[str, TopExamples]
    example_texts: dict[str, np.ndarray]
    clusters: HeadClusters
    pattern_similarity: np.ndarray
    pattern_clusters: HeadClusters
    router_load: np.ndarray | None = None
    router_low: np.ndarray | None = None
    router_high: np.ndarray | None = None
    identity: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    from_cache: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        """(L, H)."""
        return int(self.mean.shape[1]), int(self.mean.shape[2])

    def _index(self, name: str) -> int:
        if name not in self.names:
            raise KeyError(f"no score {name!r}; the scores are: {', '.join(self.names)}")
        return self.names.index(name)

    def score(self, name: str) -> np.ndarray:
        """The mean over prompts of score ``name``: [L, H]."""
        return self.mean[self._index(name)]

    def interval(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The 95% bootstrap interval of score ``name``: (low [L, H], high [L, H])."""
        i = self._index(name)
        return self.low[i], self.high[i]

    def top_heads(self, name: str, n: int = 5) -> list[tuple[int, int]]:
        """The ``n`` (layer, head)s of highest mean ``name``, best first (NaN last)."""
        s = np.nan_to_num(self.score(name), nan=-np.inf).reshape(-1)
        H = self.shape[1]
        return [divmod(int(i), H) for i in np.argsort(-s, kind="stable")[:n]]

    def alike(self, basis: str) -> HeadClusters:
        """The heads grouped and placed by ``basis`` (:data:`ALIKE_BASES`): their ``"scores"`` or their
        ``"patterns"`` on the shared prompts."""
        if basis not in ALIKE_BASES:
            raise KeyError(f"no basis {basis!r}; heads are alike by: {', '.join(ALIKE_BASES)}")
        return self.pattern_clusters if basis == "patterns" else self.clusters

    # ---- the heads × scores table ------------------------------------------------------------------
    def columns(self) -> list[str]:
        """The table's columns: layer, head, its cluster by scores and by patterns, each score's mean,
        low and high, then its place in both planes."""
        cols = ["layer", "head", "cluster", "pattern_cluster"]
        for name in self.names:
            cols += [name, f"{name}_low", f"{name}_high"]
        return [*cols, "score_x", "score_y", "pattern_x", "pattern_y"]

    def rows(self) -> list[list[Any]]:
        """One row per head (:meth:`columns`), layer by layer."""
        L, H = self.shape
        out = []
        for layer in range(L):
            for head in range(H):
                row: list[Any] = [layer, head]
                row += [c.names[int(c.labels[layer, head])] for c in (self.clusters, self.pattern_clusters)]
                for i in range(len(self.names)):
                    row += [float(a[i, layer, head]) for a in (self.mean, self.low, self.high)]
                for c in (self.clusters, self.pattern_clusters):
                    row += [float(v) for v in c.coords[layer, head]]
                out.append(row)
        return out

    def csv(self) -> str:
        """The heads × scores table as CSV text (floats to 6 significant digits, NaN as ``nan``)."""
        lines = [",".join(self.columns())]
        lines += [",".join(v if isinstance(v, str) else f"{v:.6g}" for v in row) for row in self.rows()]
        return "\n".join(lines) + "\n"

    # ---- the .npz form ------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """Every array, for ``np.savez`` (loads with ``allow_pickle=False``)."""
        out: dict[str, np.ndarray] = {
            "score_names": np.array(self.names, dtype=str),
            "per_prompt": self.per_prompt,
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "settings": np.array(json.dumps(asdict(self.settings))),
            "identity": np.array(json.dumps(self.identity)),
            "pattern_similarity": self.pattern_similarity,
        }
        for prefix, c in (("cluster", self.clusters), ("pattern_cluster", self.pattern_clusters)):
            out[f"{prefix}_labels"] = c.labels
            out[f"{prefix}_names"] = np.array(c.names, dtype=str)
            out[f"{prefix}_profile"] = c.profile
            out[f"{prefix}_coords"] = c.coords
            out[f"{prefix}_explained"] = c.explained
        for kind, ex in self.examples.items():
            for part in ("value", "prompt", "query", "key", "tokens"):
                out[f"top_{kind}_{part}"] = getattr(ex, part)
            out[f"top_{kind}_text"] = np.asarray(self.example_texts[kind], dtype=str)
        out["top_context"] = np.array(next(iter(self.examples.values())).context)
        if self.router_load is not None:
            out["router_load"] = self.router_load
            out["router_low"] = np.asarray(self.router_low)
            out["router_high"] = np.asarray(self.router_high)
        return out

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> HeadScores:
        """The result :meth:`arrays` wrote."""
        context = int(a["top_context"])
        examples = {
            kind: TopExamples(
                kind,
                value=a[f"top_{kind}_value"],
                prompt=a[f"top_{kind}_prompt"],
                query=a[f"top_{kind}_query"],
                key=a[f"top_{kind}_key"],
                tokens=a[f"top_{kind}_tokens"],
                context=context,
            )
            for kind in EXAMPLE_KINDS
        }
        return cls(
            settings=CorpusSettings(**json.loads(str(a["settings"]))),
            names=[str(n) for n in a["score_names"]],
            per_prompt=a["per_prompt"],
            mean=a["mean"],
            low=a["low"],
            high=a["high"],
            examples=examples,
            example_texts={kind: a[f"top_{kind}_text"] for kind in EXAMPLE_KINDS},
            clusters=_clusters(a, "cluster"),
            pattern_similarity=a["pattern_similarity"],
            pattern_clusters=_clusters(a, "pattern_cluster"),
            router_load=a.get("router_load"),
            router_low=a.get("router_low"),
            router_high=a.get("router_high"),
            identity=json.loads(str(a["identity"])),
        )


def _clusters(a: dict[str, np.ndarray], prefix: str) -> HeadClusters:
    """The :class:`HeadClusters` :meth:`HeadScores.arrays` wrote under ``prefix``."""
    names = [str(n) for n in a[f"{prefix}_names"]]
    return HeadClusters(
        a[f"{prefix}_labels"], names, a[f"{prefix}_profile"], a[f"{prefix}_coords"], a[f"{prefix}_explained"]
    )


__all__ = ["ALIKE_BASES", "CorpusSettings", "HeadScores"]
