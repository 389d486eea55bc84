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
``clusters``           HeadClusters                labels [L, H], names, 2-D placement [L, H, 2]
``settings``           CorpusSettings              what was run (``identity``: the cache key's parts)
=====================  ==========================  ===================================================

``result.score("induction")`` is a map [L, H]; ``result.interval("induction")`` its (low, high);
``result.top_heads("induction", 3)`` the best (layer, head)s; :meth:`HeadScores.rows` the heads ×
scores table; :meth:`HeadScores.to_csv` writes it; :meth:`HeadScores.arrays` /
:meth:`HeadScores.from_arrays` are its ``.npz`` form (no pickle: strings are unicode arrays, the
settings JSON).
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
    each (the others' ``induction_random`` is NaN, left out of its mean and interval)."""

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

    # ---- the heads × scores table ------------------------------------------------------------------
    def columns(self) -> list[str]:
        """The table's columns: layer, head, cluster, then each score's mean, low and high."""
        cols = ["layer", "head", "cluster"]
        for name in self.names:
            cols += [name, f"{name}_low", f"{name}_high"]
        return cols

    def rows(self) -> list[list[Any]]:
        """One row per head (:meth:`columns`), layer by layer."""
        L, H = self.shape
        out = []
        for layer in range(L):
            for head in range(H):
                row: list[Any] = [layer, head, self.clusters.names[int(self.clusters.labels[layer, head])]]
                for i in range(len(self.names)):
                    row += [float(a[i, layer, head]) for a in (self.mean, self.low, self.high)]
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
            "cluster_labels": self.clusters.labels,
            "cluster_names": np.array(self.clusters.names, dtype=str),
            "cluster_profile": self.clusters.profile,
            "cluster_coords": self.clusters.coords,
            "cluster_explained": self.clusters.explained,
        }
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
            clusters=HeadClusters(
                a["cluster_labels"],
                [str(n) for n in a["cluster_names"]],
                a["cluster_profile"],
                a["cluster_coords"],
                a["cluster_explained"],
            ),
            router_load=a.get("router_load"),
            router_low=a.get("router_low"),
            router_high=a.get("router_high"),
            identity=json.loads(str(a["identity"])),
        )


__all__ = ["CorpusSettings", "HeadScores"]
