"""Heads across a corpus (model.interp.corpus): the starter's induction head stands out over its own
task, a prompt's corpus score is its Metrics page score, memory follows the settings and not N, and a
cancelled run leaves the cache as it was."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch

from model.interp.analysis.head_scores import (
    duplicate_token_score,
    induction_score,
    local_share,
    mean_distance,
    repeat_induction_score,
)
from model.interp.analysis.heads import repeated_sequence
from model.interp.corpus import SCORES, CorpusSettings, bootstrap_interval, cluster_heads, corpus_run
from model.interp.corpus.run import bos_prefix, open_source, prompt_batches
from model.interp.corpus.statistics import Collector
from model.progress import Cancelled, Progress, reporting


@pytest.fixture(scope="module")
def starter():
    from model.io.checkpoint import starter
    from model.io.pretrained import open_model

    if not (starter.STARTER_DIR / "model.safetensors").is_file():
        pytest.skip("no starter model built (make starter)")
    return open_model(starter.STARTER_DIR)


def test_the_starters_l1h3_is_the_top_induction_head_and_its_interval_clears_every_other(starter):
    settings = CorpusSettings("task:induction", n_prompts=2048, seq_len=64, batch_size=256)
    result = corpus_run(starter.model, starter.tokenizer, settings, use_cache=False)
    assert result.top_heads("induction", 1) == [(1, 3)]
    low, high = result.interval("induction")
    others = np.ones(result.shape, dtype=bool)
    others[1, 3] = False
    assert low[1, 3] > high[others].max(), (low[1, 3], high[others].max())
    mean = result.score("induction")
    assert np.all((low <= mean) & (mean <= high))


def test_one_prompts_corpus_scores_are_its_metrics_page_scores(starter):
    """N = 1: every score equals the single-prompt function on the trace of the same tokens, and the
    random-token induction equals the Metrics page's (same period, seed 0)."""
    from model.interp.measures import head_metrics_of
    from model.interp.trace import run_with_trace

    settings = CorpusSettings("task:induction", n_prompts=1, seq_len=64, seed=0)
    result = corpus_run(starter.model, starter.tokenizer, settings, use_cache=False)
    source = open_source(settings.corpus, starter.tokenizer)
    [(_, ids)] = list(prompt_batches(source, settings, bos_prefix(starter.tokenizer, 64), 1))
    trace = run_with_trace(starter.model, ids, kinds=("pattern",))
    w, mask = trace.stack("pattern"), trace.mask.numpy()
    page = head_metrics_of(starter.model, w, mask).metrics
    one = {name: result.per_prompt[i, 0] for i, name in enumerate(result.names)}
    for name in ("prev_token", "sink", "entropy", "self_score"):
        np.testing.assert_allclose(one[name], getattr(page, name), rtol=1e-6, atol=1e-7, err_msg=name)
    np.testing.assert_allclose(one["induction_random"], page.induction, rtol=1e-6, atol=1e-7)
    tokens = ids.numpy()
    np.testing.assert_allclose(one["induction"], repeat_induction_score(w, tokens), rtol=1e-6)
    np.testing.assert_allclose(one["duplicate_token"], duplicate_token_score(w, tokens), rtol=1e-6)
    np.testing.assert_allclose(one["distance"], mean_distance(w, mask), rtol=1e-6)
    np.testing.assert_allclose(one["local"], local_share(w, mask, 8), rtol=1e-6)
    assert np.array_equal(result.mean, result.per_prompt[:, 0])  # one prompt: the mean is its score


def test_scores_of_known_patterns():
    T, P = 12, 5
    rp = repeated_sequence(50, P, n_repeats=2, prefix=(7, 8), exclude=(7, 8), seed=3)
    w = np.zeros((T, T))
    w[0, 0] = 1
    q, k = np.arange(2 + P, T), np.arange(2 + P, T) - P + 1
    for i in range(1, T):
        w[i, i - 1] = 1.0  # a previous-token head ...
    ind = w.copy()
    ind[q] = 0
    ind[q, k] = 1.0  # ... whose later copy looks at the token after the earlier occurrence
    assert repeat_induction_score(ind, rp.tokens) == pytest.approx(induction_score(ind, P, 2)) == 1.0
    assert duplicate_token_score(ind, rp.tokens) == pytest.approx(0.0)
    assert mean_distance(w) == pytest.approx(1.0) and local_share(w) == pytest.approx(1.0)
    dup = np.zeros((T, T))
    dup[np.arange(T), np.arange(T)] = 1.0
    dup[q] = 0
    dup[q, q - P] = 1.0  # every repeated token looks at its earlier copy
    assert duplicate_token_score(dup, rp.tokens) == pytest.approx(1.0)
    assert np.isnan(repeat_induction_score(dup, np.arange(T)))  # no token repeats: undefined


def test_the_bootstrap_and_the_clusters():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 3))
    x[:, 2] = 5.0
    x[::7, 1] = np.nan  # undefined on some prompts: left out
    mean, low, high = bootstrap_interval(x, 500)
    assert np.all(low[:2] < mean[:2]) and np.all(mean[:2] < high[:2]) and low[2] == high[2] == 5.0
    assert mean[1] == pytest.approx(np.nanmean(x[:, 1]))
    assert high[0] - low[0] == pytest.approx(2 * 1.96 / np.sqrt(200), rel=0.2)  # ≈ the normal interval
    scores = np.zeros((2, 2, 4))  # [S, L, H]: layer 0 high on score 0, layer 1 on score 1
    scores[0, 0] = [0.9, 0.8, 0.85, 0.95]
    scores[1, 1] = [0.7, 0.9, 0.8, 0.75]
    clusters = cluster_heads(scores, ["prev_token", "induction"], n_clusters=2)
    assert len(set(clusters.labels[0])) == len(set(clusters.labels[1])) == 1
    assert {clusters.names[clusters.labels[0, 0]], clusters.names[clusters.labels[1, 0]]} == {
        "prev_token",
        "induction",
    }
    assert clusters.coords.shape == (2, 4, 2) and clusters.explained[0] > 0.9


def _run_collector(model, tokenizer, n: int) -> int:
    """Run ``n`` prompts through a collector; its bytes."""
    from model.interp.corpus.run import _stream

    settings = CorpusSettings("task:induction", n_prompts=n, seq_len=64, batch_size=8)
    collector = _stream(model, open_source(settings.corpus, tokenizer), settings, [])
    assert isinstance(collector, Collector)
    return collector.nbytes


def test_memory_is_bounded_by_the_settings_not_by_n(starter):
    """Between N = 16 and N = 64 the held statistics grow by the per-prompt score rows alone (S·L·H
    float32 a prompt), and so does what the run allocates at its peak, a pattern [L, H, T, T] per
    prompt being 450× more."""
    L, H, T = starter.config.core.n_layers, starter.config.attention.n_heads, 64
    row = len(SCORES) * L * H * 4
    small = _run_collector(starter.model, starter.tokenizer, 16)
    large = _run_collector(starter.model, starter.tokenizer, 64)
    assert large - small == 48 * row
    peaks = []
    for n in (16, 64):
        tracemalloc.start()
        settings = CorpusSettings("task:induction", n_prompts=n, seq_len=T, batch_size=8, resamples=200)
        corpus_run(starter.model, starter.tokenizer, settings, use_cache=False)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    square = L * H * T * T * 4  # one prompt's patterns, float32
    grew = peaks[1] - peaks[0]
    assert grew < 48 * square / 4, (grew, 48 * square)


class _CancelAfterFirstBatch(Progress):
    def update(self, done: int, total: int, unit: str = "") -> None:
        if done > 0:
            self.cancel()
        super().update(done, total, unit)


def test_a_cancelled_run_leaves_the_cache_unchanged_and_a_finished_one_is_read_back(starter, tmp_path):
    def listing():
        return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))

    kept = CorpusSettings("task:induction", n_prompts=4, seq_len=32, batch_size=2)
    first = corpus_run(starter.model, starter.tokenizer, kept, cache_dir=tmp_path)
    before = listing()
    assert len(before) == 1 and not first.from_cache
    other = CorpusSettings("task:induction", n_prompts=8, seq_len=32, batch_size=2, seed=5)
    with pytest.raises(Cancelled), reporting(_CancelAfterFirstBatch()):
        corpus_run(starter.model, starter.tokenizer, other, cache_dir=tmp_path)
    assert listing() == before
    again = corpus_run(starter.model, starter.tokenizer, kept, cache_dir=tmp_path)
    assert again.from_cache and np.array_equal(again.per_prompt, first.per_prompt, equal_nan=True)
    assert again.csv() == first.csv()
    for kind, texts in first.example_texts.items():
        assert np.array_equal(again.example_texts[kind], texts)


def test_top_examples_name_the_prompts_query_and_key_with_their_text(starter):
    settings = CorpusSettings("task:induction", n_prompts=12, seq_len=48, batch_size=5, top_k=4)
    result = corpus_run(starter.model, starter.tokenizer, settings, use_cache=False)
    source = open_source(settings.corpus, starter.tokenizer)
    prompts = torch.cat([ids for _, ids in prompt_batches(source, settings, [], 5)]).numpy()
    ex = result.examples["attention"]
    assert ex.value.shape == (2, 4, 4)
    assert np.all(np.diff(ex.value, axis=-1) <= 0)  # best first
    for layer, head in ((1, 3), (0, 1)):
        prompts_of = ex.prompt[layer, head]
        assert len(set(prompts_of.tolist())) == 4  # four different prompts
        for r in range(4):
            n, q, k = prompts_of[r], ex.query[layer, head, r], ex.key[layer, head, r]
            ids = prompts[n]
            assert ex.tokens[layer, head, r, 0, ex.context] == ids[k]
            assert ex.tokens[layer, head, r, 1, ex.context] == ids[q]
            text = result.example_texts["attention"][layer, head, r]
            assert f"«{starter.tokenizer.decode([int(ids[k])])}»" in text.replace("⟦", "").replace("⟧", "")
        # the heap kept each prompt's best: no prompt's weight beats the kept ones
        from model.interp.trace import run_with_trace

        w = run_with_trace(starter.model, torch.from_numpy(prompts), kinds=("pattern",))["pattern", layer]
        best = w[:, head, 1:, 1:].flatten(1).max(1).values.numpy()  # position 0 is the sink score's
        assert ex.value[layer, head, 0] == pytest.approx(best.max(), rel=1e-6)


def test_a_mixture_of_experts_gets_each_layers_router_load():
    from model.config import GPTConfig
    from model.nn.gpt import init_model
    from model.text.sources import resolve_source

    task = resolve_source("task:induction")
    cfg = GPTConfig(
        vocab_size=task.vocab_size, context_length=32, n_layers=2, d_model=16, n_heads=2, mlp="swiglu",
        n_experts=4, n_experts_per_token=2, expert_d_ff=8, moe_dense_layers=1,
    ).validate()  # fmt: skip
    moe = init_model(cfg, seed=0)
    settings = CorpusSettings("task:induction", n_prompts=6, seq_len=32, batch_size=4)
    result = corpus_run(moe, task.tokenizer, settings, use_cache=False)
    load, low, high = result.router_load, result.router_low, result.router_high
    assert load is not None and low is not None and high is not None and load.shape == (2, 4)
    assert np.all(np.isnan(load[0]))  # the dense first layer has no router
    assert load[1].sum() == pytest.approx(1.0)  # every choice went to one of the experts
    assert np.all((low[1] <= load[1]) & (load[1] <= high[1]))
    chosen = run_chosen(moe, settings, task)
    assert load[1] == pytest.approx(np.bincount(chosen.reshape(-1), minlength=4) / chosen.size, abs=1e-6)


def run_chosen(model, settings, source):
    """The experts layer 1 chose for every token of the run's prompts: [N, T, k]."""
    from model.interp.trace import run_with_trace

    ids = torch.cat([ids for _, ids in prompt_batches(source, settings, [], settings.batch_size)])
    return run_with_trace(model, ids, kinds=("chosen",))["chosen", 1].numpy()
