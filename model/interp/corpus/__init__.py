"""Heads across a corpus: what each head does over many prompts, not one.

A corpus run (:func:`corpus_run`, :mod:`.run`) streams a model over ``N`` prompts of ``T`` tokens
from a data source (``builtin:…``, ``task:…``, a text file) and keeps only bounded statistics: per
prompt one value per head and score (:data:`SCORES`, :mod:`.statistics`: the Metrics page's own
definitions), the top examples of each head (:mod:`.examples`), a mixture of experts' router load. The
:class:`HeadScores` it returns (:mod:`.result`) holds every score's mean [L, H] with a 95% bootstrap
interval over prompts, the heads × scores table (CSV), the top examples with their text, and the heads
grouped by how alike they behave with a 2-D placement (:mod:`.similarity`), by their scores or by their
patterns on the first prompts (:mod:`.patterns`); all plain numpy, for a page to draw. Results are
cached on disk, keyed by model, corpus and settings.

    from model.interp.corpus import CorpusSettings, corpus_run
    result = corpus_run(model, tokenizer, CorpusSettings("task:induction", n_prompts=64, seq_len=64))
    result.top_heads("induction", 3), result.interval("induction")
"""

from model.interp.corpus.examples import EXAMPLE_KINDS, TopExamples
from model.interp.corpus.patterns import PatternSimilarity
from model.interp.corpus.result import ALIKE_BASES, CorpusSettings, HeadScores
from model.interp.corpus.run import CorpusError, corpus_run, save_npz
from model.interp.corpus.similarity import HeadClusters, bootstrap_interval, cluster_heads
from model.interp.corpus.statistics import SCORES

__all__ = [
    "ALIKE_BASES",
    "EXAMPLE_KINDS",
    "SCORES",
    "CorpusError",
    "CorpusSettings",
    "HeadClusters",
    "HeadScores",
    "PatternSimilarity",
    "TopExamples",
    "bootstrap_interval",
    "cluster_heads",
    "corpus_run",
    "save_npz",
]
