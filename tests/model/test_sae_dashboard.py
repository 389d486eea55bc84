"""Reading a feature over a corpus (model.interp.sae.dashboard) and from the weights
(model.interp.sae.readout), on the starter with an SAE built by hand (tests/model/sae_hand.py), so each
number is checked against a definition computed another way: one pass over every activation, the
decoder through the unembedding written out, the pre-activation the SAE itself computes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from model import api
from model.config import GPTConfig
from model.interp.corpus.result import CorpusSettings
from model.interp.corpus.run import open_source, prompt_batches
from model.interp.sae import Site, SiteError, readout, site_activations
from model.interp.sae.dashboard import HIST_BINS, _Histograms, feature_dashboard, feature_stats
from model.interp.sae.readout import feature_logits, feature_source_attribution, head_shares
from model.nn.gpt import GPT
from model.progress import Cancelled, Progress, reporting
from tests.model.sae_hand import D_V, hand_sae

STARTER = Path(__file__).resolve().parents[2] / "assets" / "starter"


@pytest.fixture(scope="module")
def lm():
    return api.open_model(STARTER)


def test_head_shares_say_which_heads_write_a_feature(lm):
    shares = head_shares(hand_sae(), lm.config)
    assert shares.shape == (64, 4)
    np.testing.assert_allclose(shares[0], [0, 0, 0, 1], atol=1e-7)  # head 3's slice only
    np.testing.assert_allclose(shares[1], [0.25, 0, 0.75, 0], atol=1e-6)
    np.testing.assert_allclose(shares.sum(axis=1), 1.0, atol=1e-6)
    assert (shares[2:] > 0).all()  # the random rows: every head writes some
    with pytest.raises(SiteError, match="need an SAE on z"):
        head_shares(hand_sae(Site("resid_pre", 1)), lm.config)


def test_feature_stats_equal_one_pass_over_every_activation(lm):
    sae = hand_sae()
    settings = CorpusSettings("task:induction", n_prompts=10, seq_len=48, batch_size=3, top_k=3, context=4)
    stats = feature_stats(lm.model, lm.tokenizer, sae, settings)
    source = open_source("task:induction", lm.tokenizer)
    ids = torch.cat([b for _, b in prompt_batches(source, settings, [], 3)])  # [N, T]
    with torch.no_grad():
        f = sae.encode(site_activations(lm.model, sae.config.site, ids)).numpy()  # [N, T, F]
    assert stats.n_tokens == 10 * 48
    np.testing.assert_array_equal(stats.fired, (f > 0).sum(axis=(0, 1)))
    np.testing.assert_allclose(stats.total, f.sum(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_array_equal(stats.max_activation, f.max(axis=(0, 1)))
    for i in np.flatnonzero(stats.fired):
        values = f[..., i][f[..., i] > 0]
        counts, edges = stats.histogram(i)
        assert edges[-1] / 2 <= values.max() < edges[-1]  # the smallest power of two above the max
        np.testing.assert_array_equal(counts, np.histogram(values, bins=edges)[0])
        best = np.sort(f[..., i].max(axis=1))[::-1][:3]  # each prompt's strongest, at most one each
        top = stats.top(i)
        np.testing.assert_array_equal([v for v, _, _ in top], best[best > 0])
        for rank, (value, n, position) in enumerate(top):
            assert f[n, position, i] == value
            if rank == 0:
                assert torch.equal(stats.prompt_ids(n, source), ids[n])  # drawn again, the same
            text = stats.example_text(i, rank, lm.tokenizer)
            marked = lm.tokenizer.token_strings([int(ids[n, position])])[0]
            assert f"⟦{marked}⟧" in text and len(text) == len(ids[n, max(0, position - 4) : position + 5]) + 2
    assert stats.hist_counts.shape == (64, HIST_BINS)  # what it keeps: F × bins, F × k examples
    assert stats.examples.tokens.shape == (1, 64, 3, 2, 9)


def test_a_histogram_stays_exact_as_its_range_doubles():
    hist = _Histograms(2)
    seen: list[list[float]] = [[], []]
    for feature, value in [
        ([0, 0, 1], [0.3, 0.2, 0.1]),
        ([0, 1], [5.0, 100.0]),
        ([0, 1, 1], [0.05, 0.1, 64.0]),
    ]:
        hist.add(np.array(feature), np.array(value))
        for i, v in zip(feature, value, strict=True):
            seen[i].append(v)
    assert list(hist.high) == [8.0, 128.0]
    for i in (0, 1):
        edges = np.linspace(0, hist.high[i], HIST_BINS + 1)
        np.testing.assert_array_equal(hist.counts[i], np.histogram(seen[i], bins=edges)[0])


@pytest.mark.parametrize("kind", ["z", "resid_pre"])
def test_feature_logits_are_the_decoder_through_the_final_norm_and_unembedding(lm, kind, monkeypatch):
    sae = hand_sae(Site(kind, 1))
    model = lm.model
    write = sae.W_dec.detach()
    if kind == "z":
        write = write @ model.blocks[1].attn.o_proj.weight.detach().T  # Σ_h W_O,h W_dec[i, h]
    centred = write - write.mean(dim=1, keepdim=True)  # the final LayerNorm centres, then scales by γ
    want = (centred * model.norm_f.weight.detach()) @ model.lm_head.weight.detach().T  # [F, V]
    got = feature_logits(model, sae, [0, 1, 5], k=4)
    for row, i in enumerate([0, 1, 5]):
        top, bottom = want[i].topk(4), want[i].topk(4, largest=False)
        np.testing.assert_array_equal(got.top_ids[row], top.indices.numpy())
        np.testing.assert_allclose(got.top_values[row], top.values.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got.bottom_ids[row], bottom.indices.numpy())
        np.testing.assert_allclose(got.bottom_values[row], bottom.values.numpy(), rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(readout, "LOGIT_CHUNK", 5)  # every feature, a few at a time
    every = feature_logits(model, sae, None, k=4)
    assert every.top_ids.shape == (64, 4)
    np.testing.assert_array_equal(every.top_ids, want.topk(4, dim=1).indices.numpy())
    assert got.tokens(lm.tokenizer)[0] == lm.tokenizer.token_strings(got.top_ids[0].tolist())
    np.testing.assert_array_equal(api.feature_logits(lm, sae, 5, k=4).top_ids, got.top_ids[2:])


def test_source_attribution_sums_to_the_pre_activation(lm):
    sae = hand_sae()
    g = torch.Generator().manual_seed(3)
    block = torch.randint(0, 26, (20,), generator=g)
    ids = torch.cat([block, block])  # repeated tokens: the induction head L1H3 looks back a copy
    with torch.no_grad():
        z = site_activations(lm.model, sae.config.site, ids[None])[0]  # [T, H·d_v]
        pre = sae.pre_activations(z)
    t = 30
    for i in (0, 1, 7):
        got = feature_source_attribution(lm.model, sae, i, ids, t)
        assert got.contributions.shape == (4, t + 1)
        assert got.contributions.sum() + got.bias == pytest.approx(float(pre[t, i]), abs=1e-5)
        assert got.pre_activation == pytest.approx(float(pre[t, i]), abs=1e-6)
        # head h's sources add up to z_h · W_enc[h slice, i]: the pattern-weighted values are z
        per_head = (z[t].view(4, D_V) * sae.W_enc[:, i].detach().view(4, D_V)).sum(-1).double()
        np.testing.assert_allclose(got.per_head, per_head.numpy(), atol=1e-5)
    assert not feature_source_attribution(lm.model, sae, 0, ids, t).contributions[:3].any()  # head 3's only
    assert not feature_source_attribution(lm.model, sae, 1, ids, t).contributions[[1, 3]].any()
    with pytest.raises(SiteError):
        feature_source_attribution(lm.model, hand_sae(Site("mlp_out", 1)), 0, ids, t)


def test_source_attribution_reads_the_shared_values_of_grouped_query_heads():
    cfg = GPTConfig(vocab_size=37, context_length=24, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2)
    torch.manual_seed(0)
    model = GPT(cfg).eval()
    sae = hand_sae(Site("z", 1), d_in=32)
    ids = torch.randint(0, 37, (16,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        pre = sae.pre_activations(site_activations(model, sae.config.site, ids[None])[0])
    for i in range(6):
        got = feature_source_attribution(model, sae, i, ids, -1)
        assert got.position == 15 and got.contributions.sum() + got.bias == pytest.approx(
            float(pre[15, i]), abs=1e-5
        )


def test_a_features_page_draws_its_examples_again_and_attributes_them(lm):
    sae = hand_sae()
    stats = feature_stats(lm.model, lm.tokenizer, sae, "task:induction", n_prompts=6, seq_len=40, top_k=3)
    page = feature_dashboard(lm.model, lm.tokenizer, sae, stats, 1, k=4)
    assert [e[:3] for e in page.examples] == stats.top(1) and len(page.examples) == 3
    np.testing.assert_allclose(page.head_shares, [0.25, 0, 0.75, 0], atol=1e-6)
    np.testing.assert_array_equal(page.logits.top_ids, feature_logits(lm.model, sae, 1, 4).top_ids)
    assert page.promoted == lm.tokenizer.token_strings(page.logits.top_ids[0].tolist())
    assert page.sources is not None and len(page.sources) == 3
    for (value, _, position, _), attribution in zip(page.examples, page.sources, strict=True):
        # the prompt drawn again gives the very activation the run kept; its sources add up to it
        assert attribution.position == position and attribution.activation == pytest.approx(value, rel=1e-5)
        assert attribution.contributions.sum() + attribution.bias == pytest.approx(value, abs=1e-5)
        assert not attribution.contributions[[1, 3]].any()  # feature 1 is heads 0's and 2's alone
    off_z = hand_sae(Site("mlp_out", 0))
    stats = feature_stats(lm.model, lm.tokenizer, off_z, "task:induction", n_prompts=2, seq_len=16)
    page = feature_dashboard(lm.model, lm.tokenizer, off_z, stats, 5)
    assert page.head_shares is None and page.sources is None


def test_feature_stats_report_progress_and_stop_when_cancelled(lm):
    class StopAfterFirstBatch(Progress):
        def update(self, done, total, unit=""):
            self.seen.append((done, total, unit))
            if done:
                self.cancel()
            super().update(done, total, unit)

    progress = StopAfterFirstBatch()
    progress.seen = []
    with reporting(progress), pytest.raises(Cancelled):
        feature_stats(
            lm.model, lm.tokenizer, hand_sae(), "task:induction", n_prompts=8, seq_len=16, batch_size=2
        )
    assert progress.seen == [(0, 8, "prompts"), (2, 8, "prompts")]
