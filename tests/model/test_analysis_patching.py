"""Activation patching: per head ([L, H]) and per residual-stream position ([L, T])."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.patching import Patching, cache_activations, patch_heads, patch_resid, run_patched
from model.interp.trace import run_with_trace
from model.nn.gpt import GPT


def model_of(**kw) -> GPT:
    base = dict(vocab_size=37, context_length=24, n_layers=3, d_model=32, n_heads=4)
    base.update(kw)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**base)).eval()
    with torch.no_grad():  # larger weights than init: the two prompts' logits differ clearly
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def prompts(T=12):
    clean = torch.randint(0, 37, (T,), generator=torch.Generator().manual_seed(1))
    corrupt = clean.clone()
    corrupt[3], corrupt[7] = clean[7], (clean[3] + 1) % 37
    return clean, corrupt


def test_patching_everything_restores_clean_and_nothing_changes_nothing():
    model = model_of()
    clean, corrupt = prompts()
    with torch.no_grad():
        clean_logits, corrupt_logits = model(clean[None])[0][0], model(corrupt[None])[0][0]
    heads_and_mlps = [("blocks.0.resid_pre", ())] + [
        (f"blocks.{l}.{p}", ()) for l in range(3) for p in ("attn.z", "mlp.out")
    ]
    every_head = [(f"blocks.{l}.attn.z", (h,)) for l in range(3) for h in range(4)]
    runs = [[], [("blocks.0.resid_pre", ())], [("blocks.2.resid_pre", ())], heads_and_mlps, every_head]
    out = run_patched(model, clean, corrupt, runs, position=None)
    assert out.shape == (5, 12, 37)
    torch.testing.assert_close(out[0], corrupt_logits, rtol=0, atol=1e-5)  # nothing patched
    for i in (1, 2, 3):  # the whole stream (or every write into it) from the clean run
        torch.testing.assert_close(out[i], clean_logits, rtol=0, atol=1e-5)
    # every head alone is not everything: the corrupted tokens still reach the stream directly
    assert not torch.allclose(out[4], clean_logits, atol=1e-3)
    # the resid_pre sweep: one position of the stream per run, the last position's logits
    one = run_patched(model, clean, corrupt, [[("blocks.0.resid_pre", (t,))] for t in range(12)])
    assert one.shape == (12, 37)
    for t in range(12):  # positions the prompts share change nothing
        if t not in (3, 7):
            torch.testing.assert_close(one[t], corrupt_logits[-1], rtol=0, atol=1e-5)


def test_fractions_batched_equal_one_at_a_time():
    model = model_of()
    clean, corrupt = prompts()
    heads = patch_heads(model, clean, corrupt)
    assert isinstance(heads, Patching) and heads.restored.shape == (3, 4) and heads.point == "attn.z"
    assert heads.answer != heads.wrong and heads.position == 11
    one = patch_heads(model, clean, corrupt, max_batch=1)
    np.testing.assert_allclose(one.patched, heads.patched, rtol=0, atol=2e-5)  # logit differences
    gap = abs(heads.clean_diff - heads.corrupt_diff)
    np.testing.assert_allclose(one.restored, heads.restored, rtol=0, atol=2e-5 / gap)
    # the fraction is (m(patched) − m(corrupt)) / (m(clean) − m(corrupt)), checked on one head by hand
    layer, head = heads.best
    with torch.no_grad():
        logits = run_patched(model, clean, corrupt, [[(f"blocks.{layer}.attn.z", (head,))]])[0]
    m = float(logits[heads.answer] - logits[heads.wrong])
    want = (m - heads.corrupt_diff) / (heads.clean_diff - heads.corrupt_diff)
    assert heads.restored[layer, head] == pytest.approx(want, rel=1e-4)
    assert heads.restored[layer, head] == np.nanmax(heads.restored)

    resid = patch_resid(model, clean, corrupt, max_batch=5)
    assert resid.restored.shape == (3, 12) and resid.point == "resid_pre"
    np.testing.assert_allclose(resid.patched, patch_resid(model, clean, corrupt).patched, atol=2e-5)
    # at layer 0 (the embeddings) only the positions whose tokens differ can restore anything
    np.testing.assert_allclose(resid.restored[0, [0, 1, 2, 4, 5, 6, 8, 9, 10, 11]], 0.0, atol=2e-5 / gap)


def test_metric_choices_and_errors():
    model = model_of()
    clean, corrupt = prompts()
    p = patch_heads(model, clean, corrupt, answer=3, wrong=5, position=6)
    assert (p.answer, p.wrong, p.position) == (3, 5, 6)
    # position 6 comes before the second change; a fraction of a gap is still a fraction
    assert np.isfinite(p.restored).all() or p.clean_diff == p.corrupt_diff
    same = patch_heads(model, clean, clean)  # no gap: every fraction is undefined
    assert np.isnan(same.restored).all() and same.answer != same.wrong
    with pytest.raises(ValueError, match="same length"):
        patch_heads(model, clean, corrupt[:-1])
    with pytest.raises(ValueError, match="choose two different tokens"):
        patch_heads(model, clean, corrupt, answer=4, wrong=4)
    with pytest.raises(ValueError, match="needs a tokenizer"):
        patch_resid(model, "abc", "abd")
    cache, logits = cache_activations(model, clean[None], ["blocks.1.attn.z"])
    assert cache["blocks.1.attn.z"].shape == (1, 4, 12, 8) and logits.shape == (1, 12, 37)


def test_on_a_trained_induction_model_patching_singles_out_its_induction_head():
    """The shipped starter model (500 steps of ``task:induction``, ``make starter``) has induction
    heads in layer 1. On a repeated prompt whose last token is changed to another token of the first
    copy, the head whose clean output restores most of the answer is the head with the highest
    induction score of :mod:`model.interp.analysis.heads` (named "induction"), and layer 1 carries the
    answer, not layer 0."""
    from model.interp.analysis.heads import classify_heads, head_metrics, measure_induction
    from model.io.checkpoint.saved import load_checkpoint
    from model.io.checkpoint.starter import STARTER_DIR

    model = load_checkpoint(STARTER_DIR).model.eval()
    scores, prompt = measure_induction(model, period=8)
    clean = torch.as_tensor(prompt.tokens)[:-3]  # ends inside the second copy
    corrupt = clean.clone()
    corrupt[-1] = clean[2]  # another token of the first copy: induction now predicts its successor
    trace = run_with_trace(model, torch.as_tensor(prompt.tokens)[None], kinds=("pattern",))
    w = trace.stack("pattern")
    names = classify_heads(head_metrics(w, trace.mask, period=prompt.period, start=prompt.start))
    induction = names.heads_named("induction")
    top = tuple(int(i) for i in np.unravel_index(int(np.argmax(scores)), scores.shape))
    assert top in induction and scores.max() >= 0.4

    result = patch_heads(model, clean, corrupt)
    assert result.answer == int(prompt.tokens[len(clean)])  # the clean run predicts the repeat
    assert result.best == top, (result.restored.round(2), scores.round(2))
    assert result.restored[1].max() > 2 * np.abs(result.restored[0]).max()
