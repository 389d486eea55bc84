"""The attention inspection without Qt (``model.interp.inspection``): every number checked against the
model's own trace, the pooling of long prompts against a plain reference."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.inspection import head_detail, inspect_prompt
from model.interp.measures import ablation_of, aggregates_of, held_out_batches, next_tokens_of, token_focus_of
from model.interp.plan import plan_prompt, view_need
from model.interp.pooling import pool_max
from model.interp.prompt import PromptError, encode_prompt, prompt_of_ids
from model.interp.threads import pick_threads
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model
from model.text.tokens import CharTokenizer, visible

TEXT = "the cat sat on the mat. the cat ate."


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(TEXT)


@pytest.fixture(scope="module")
def model(tok):
    cfg = GPTConfig(vocab_size=tok.vocab_size, context_length=24, n_layers=2, d_model=16, n_heads=2)
    return init_model(cfg, seed=0)


def test_encode_prompt_keeps_the_last_tokens_and_explains_what_it_cannot_run(tok):
    p = encode_prompt(tok, "the cat sat", 5)
    assert list(p.ids) == tok.encode("the cat sat")[-5:] and p.dropped == 6 and p.dropped_from == "start"
    whole = encode_prompt(tok, "the", 24)
    assert (list(whole.ids), whole.dropped) == (tok.encode("the"), 0)
    with pytest.raises(PromptError, match="empty"):
        encode_prompt(tok, "", 24)
    with pytest.raises(PromptError):
        encode_prompt(tok, "€", 24)  # not in the vocabulary


def test_inspect_prompt_holds_what_the_model_traced(model, tok):
    text = "the cat ate the mat"
    ids = tok.encode(text)
    plan = dataclasses.replace(plan_prompt(model.config, tok, text), block=3)
    insp = inspect_prompt(model, tok, plan)
    with torch.no_grad():
        trace = run_with_trace(model, torch.tensor([ids]), kinds=("pattern",))
    want = trace.stack("pattern")
    T = len(ids)
    assert (insp.n_layers, insp.n_heads, insp.T) == (2, 2, T) and insp.prompt == text
    np.testing.assert_allclose(insp.weights, want, atol=1e-6)
    np.testing.assert_array_equal(insp.overview, pool_max(insp.weights, 3))
    assert insp.block == 3 and insp.overview.shape == (2, 2, math.ceil(T / 3), math.ceil(T / 3))
    assert np.array_equal(insp.mask, np.tril(np.ones((T, T), bool)))
    np.testing.assert_allclose(insp.logits, trace.logits[0].numpy(), atol=1e-5)
    assert insp.labels == [visible(c) for c in text] and insp.target_labels == [*insp.labels[1:], ""]
    top = insp.logits.argmax(-1)
    table = next_tokens_of(insp.logits, ids, tok)  # the Next token page's job
    assert [row[0] for row in table.labels] == [visible(tok.token_strings([int(i)])[0]) for i in top]
    np.testing.assert_array_equal(table.tokens.ids[:, 0], top)
    assert list(table.tokens.target_rank[:-1]) == [
        int((insp.logits[t] > insp.logits[t, ids[t + 1]]).sum()) for t in range(T - 1)
    ]
    assert model.training  # the mode is restored
    # a switched-off head changes what the others see downstream, and is recorded
    off = inspect_prompt(
        model, tok, plan_prompt(model.config, tok, prompt_of_ids(tok, ids)), ablate={(0, 1): "zero"}
    )
    assert off.ablate == {(0, 1): "zero"} and not np.allclose(off.logits, insp.logits)


def test_head_detail_is_the_traced_pipeline_of_one_head(model, tok):
    ids = tok.encode("the cat")
    detail = head_detail(model, ids, 1, 0)
    with torch.no_grad():
        trace = run_with_trace(model, torch.tensor([ids]), kinds=("pattern", "scores_raw"))
    np.testing.assert_allclose(detail["pattern"].value, trace["pattern", 1][0, 0].numpy(), atol=1e-6)
    np.testing.assert_allclose(detail["scores_raw"].value, trace["scores_raw", 1][0, 0].numpy(), atol=1e-5)


def test_aggregates_and_token_focus_are_means_and_slices_of_the_weights():
    w = np.random.default_rng(0).random((3, 2, 5, 5)).astype(np.float16)
    a = aggregates_of(w, [(0, 1), (2, 0)])
    w32 = w.astype(np.float32)
    np.testing.assert_allclose(a.per_layer, w32.mean(1), atol=1e-6)
    np.testing.assert_allclose(a.per_head, w32.mean(0), atol=1e-6)
    np.testing.assert_allclose(a.overall, w32.mean((0, 1)), atol=1e-6)
    np.testing.assert_allclose(a.chosen, (w32[0, 1] + w32[2, 0]) / 2, atol=1e-6)
    assert a.chosen_heads == [(0, 1), (2, 0)]
    assert aggregates_of(w, []).chosen is None
    f = token_focus_of(w, 3)
    np.testing.assert_array_equal(f.looks_at, w32[:, :, 3, :])
    np.testing.assert_array_equal(f.looked_at_by, w32[:, :, :, 3])
    with pytest.raises(ValueError):
        token_focus_of(w, 5)


def test_ablation_names_the_top_tokens_and_measures_the_loss_on_held_out_batches(model, tok):
    from model.text.corpora import TextCorpus

    assert held_out_batches(None, model.config, tok)[0] is None
    source = TextCorpus(TEXT * 20, tokenizer=tok)
    batches, note = held_out_batches(source, model.config, tok)
    assert len(batches) == 4 and batches[0][0].shape == (8, 24) and "4 validation batches of 8×24" in note
    # a corpus scores every next token (its mask is all True), and the note says so
    assert "scoring every next token" in note and not any(bool((y == -100).any()) for _, y in batches)
    again, _ = held_out_batches(source, model.config, tok)
    assert torch.equal(batches[0][0], again[0][0])  # fixed: before and after see the same text
    ids = tok.encode("the cat sat")
    res = ablation_of(model, ids, {(0, 0): "zero"}, batches, note, tokenizer=tok)
    e = res.effect
    assert res.heads == {(0, 0): "zero"} and np.isfinite(res.loss.delta)
    assert len(res.before_labels) == len(ids) == len(res.after_labels)
    for t in (0, len(ids) - 1):
        want = [visible(s) for s in tok.token_strings([int(i) for i in e.top_after.ids[t]])]
        assert res.after_labels[t] == want
    no_loss = ablation_of(model, ids, {(0, 0): "zero"}, None, "no data")
    assert no_loss.loss is None and no_loss.before_labels[0][0] == str(int(e.top_before.ids[0, 0]))


def test_small_work_and_training_run_on_one_thread(model):
    assert pick_threads(model.config, 8, training=True) == 1
    assert pick_threads(model.config, 8) == 1  # far below SMALL_FLOPS


def test_take_stack_gives_the_stack_in_its_dtype_and_empties_the_trace():
    """What inspect_prompt uses so that a 22×32-head trace never holds two copies of the weights."""
    import torch

    from model.config import GPTConfig
    from model.nn.gpt import init_model

    model = init_model(GPTConfig(vocab_size=11, context_length=8, n_layers=3, d_model=8, n_heads=2), seed=0)
    ids = torch.arange(6)[None] % 11
    expected = run_with_trace(model, ids, kinds=("pattern",)).stack("pattern")
    trace = run_with_trace(model, ids, kinds=("pattern",), dtype=torch.float16)
    got = trace.take_stack("pattern")
    assert got.dtype == np.float16 and got.shape == expected.shape
    assert np.allclose(got.astype(np.float32), expected, atol=1e-3)
    assert "pattern" not in trace.kinds


@pytest.mark.parametrize("budget_mib", [3, 40, 100])
def test_the_plan_keeps_the_longest_prompt_whose_inspection_fits(budget_mib):
    from model.text.tokens import ByteTokenizer

    byte = ByteTokenizer()
    cfg = GPTConfig(n_layers=12, n_heads=12, d_model=96, context_length=4096, vocab_size=50257)
    budget = budget_mib * 2**20
    text = "abcdefgh" * 512  # 4096 tokens
    plan = plan_prompt(cfg, byte, text, budget=budget)
    fit = plan.prompt.T
    assert 0 < fit < 4096 and plan.for_memory == 4096 - fit and plan.for_context == 0
    assert list(plan.prompt.ids) == byte.encode(text)[-fit:]  # the last tokens, by the one rule
    assert view_need(cfg, fit, budget).total <= budget and plan.need_all == view_need(cfg, 4096, budget).total
    assert all(view_need(cfg, T, budget).total > budget for T in range(fit + 1, 4097))  # none longer fits
    assert plan_prompt(cfg, byte, text[-fit:], budget=budget).prompt.T == fit  # kept whole when it fits
    with pytest.raises(PromptError, match="even for one token"):
        plan_prompt(cfg, byte, text, budget=min(view_need(cfg, 1).total, view_need(cfg, 1, 0).total) - 1)


@pytest.mark.parametrize("budget_mib", [300, 2000])
def test_a_prompt_whose_patterns_do_not_fit_is_streamed_whole(budget_mib):
    """Every pattern of 4,096 tokens × 144 heads is 4.8 GB (past the held limit): the plan keeps every
    token and streams them (queries, keys and a pooled overview: under 256 MB)."""
    from model.text.tokens import ByteTokenizer

    cfg = GPTConfig(n_layers=12, n_heads=12, d_model=96, context_length=4096, vocab_size=50257)
    plan = plan_prompt(cfg, ByteTokenizer(), "abcdefgh" * 512, budget=budget_mib * 2**20)
    assert plan.prompt.T == 4096 and plan.for_memory == 0 and not plan.held
    assert plan.need.total == view_need(cfg, 4096).total < 2**28


@pytest.mark.parametrize(("T", "S", "b"), [(24, 24, 4), (23, 23, 4), (17, 30, 5), (9, 9, 1), (5, 7, 8)])
def test_block_max_is_pool_max(T, S, b):
    """The inspection pools each layer as it is computed (torch); the result equals the numpy pooling
    the grid uses, short last blocks included."""
    from model.interp.inspection import block_max

    x = torch.rand(3, T, S, generator=torch.Generator().manual_seed(T))
    got = block_max(x, b).numpy()
    if T == S:
        np.testing.assert_array_equal(got, pool_max(x.numpy(), b))
    want = torch.nn.functional.max_pool2d(x, b, ceil_mode=True).numpy() if b > 1 else x.numpy()
    np.testing.assert_array_equal(got, want)


def test_the_ablation_loss_scores_what_training_scores():
    """The Ablation page's validation loss is the training's own: on a task that marks its answers,
    only the answer tokens count (as ``Trainer._batch`` with ``loss_mask``), and the note says so;
    with ``loss_mask`` off every next token counts and the note says that instead."""
    import torch.nn.functional as F

    from model.interp.analysis.ablation import mean_loss
    from model.text.tasks import make_task

    task = make_task("induction")
    cfg = GPTConfig(
        vocab_size=task.tokenizer.vocab_size, context_length=64, n_layers=1, n_heads=2, d_model=16
    )
    torch.manual_seed(0)
    net = init_model(cfg).eval()
    batches, note = held_out_batches(task, cfg, task.tokenizer)
    assert "answer tokens only, as the Train tab's loss does" in note
    scored = torch.cat([(y != -100).flatten() for _, y in batches])
    assert 0 < int(scored.sum()) < scored.numel()  # some targets are not answers, and they are not scored
    with torch.no_grad():
        by_hand = np.mean(
            [
                float(F.cross_entropy(net(x)[0].flatten(0, 1), y.flatten(), ignore_index=-100))
                for x, y in batches
            ]
        )
    assert mean_loss(net, batches) == pytest.approx(by_hand, rel=1e-6)

    every, note_every = held_out_batches(task, cfg, task.tokenizer, loss_mask=False)
    assert "every next token, as the Train tab's loss does" in note_every
    assert all(bool((y != -100).all()) for _, y in every)
    # the same sequences, scored on every target: the masked loss is the mean over the answer positions only
    assert all(torch.equal(x, xe) for (x, _), (xe, _) in zip(batches, every, strict=True))
    with torch.no_grad():
        answers_only = np.mean(
            [
                float(F.cross_entropy(net(x)[0].flatten(0, 1), torch.where(y != -100, ye, -100).flatten()))
                for (x, y), (_, ye) in zip(batches, every, strict=True)
            ]
        )
    assert mean_loss(net, batches) == pytest.approx(answers_only, rel=1e-6)
    assert not all(torch.equal(y, ye) for (_, y), (_, ye) in zip(batches, every, strict=True))


def test_a_recorded_run_switches_only_the_modules_in_training_and_restores_each(monkeypatch):
    """Evaluation mode is the modules' flags, set and restored where they are on: ``model.eval()`` and
    ``model.train(was)`` walked every module through ``nn.Module.__setattr__`` on each run, a fixed
    cost of ~14 ms each on SmolLM2 (820 modules), and a block left in evaluation mode came back
    training."""
    cfg = GPTConfig(vocab_size=11, context_length=16, n_layers=3, d_model=16, n_heads=2, dropout=0.1)
    model = init_model(cfg, seed=0)
    walks = []
    monkeypatch.setattr(torch.nn.Module, "train", lambda self, mode=True: walks.append(self) or self)
    model.training = False
    for m in model.modules():
        m.training = False
    run_with_trace(model, [1, 2, 3], kinds=("pattern",))
    assert walks == []
    for m in model.modules():
        m.training = True
    for m in model.blocks[1].modules():
        m.training = False  # a block the caller froze
    during = []
    hook = ("blocks.2.resid_post", lambda x, hook: during.append({m.training for m in model.modules()}))
    run_with_trace(model, [1, 2, 3], kinds=("pattern",), hooks=[hook])
    assert during == [{False}] and walks == []
    assert all(m.training != (m in set(model.blocks[1].modules())) for m in model.modules())
