"""The analyses the Labs tab reads: mask stages, probes between training steps, positions; and the
labs' prompts, which ask the one prompt rule for the *start* of a text by name."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.gradflow import fixed_batch, grad_flow_on_batch
from model.interp.analysis.masks import future_attention, make_mask, mask_stages
from model.interp.analysis.positions import permutation_experiment, permutation_predictions, without_positions
from model.interp.analysis.residual import residual_profile
from model.interp.analysis.saturation import saturation_summary
from model.interp.prompt import encode_prompt
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model
from model.nn.hooks import use_mask
from model.text.tokens import CharTokenizer


def tiny(**kw):
    base = dict(vocab_size=12, context_length=16, n_layers=2, d_model=16, n_heads=2)
    base.update(kw)
    return init_model(GPTConfig(**base), seed=1)


def test_a_labs_prompt_replaces_keeps_its_start_and_refuses_empty():
    tok = CharTokenizer("abc?")

    def ids(text, limit):
        return list(encode_prompt(tok, text, limit, keep="first", errors="replace").ids)

    assert ids("abxc", 8) == tok.encode("ab?c")
    first = encode_prompt(tok, "abc" * 10, 8, keep="first", errors="replace")
    assert len(first.ids) == 8 and list(first.ids) == tok.encode("abcabcab")  # the start, by name
    assert first.dropped == 22 and first.dropped_from == "end"
    assert ids("abcabc", 2) == tok.encode("ab")
    with pytest.raises(ValueError, match="empty"):
        ids("", 8)


@pytest.mark.parametrize("kind", ["causal", "none", "sliding", "prefix"])
def test_mask_stages_follow_the_mask_given(kind):
    model = tiny()
    T = 7
    mask = make_mask(kind, T, window=3, prefix=3)
    trace = run_with_trace(model, [1, 2, 3, 4, 5, 6, 7], kinds=("scores", "pattern"), hooks=use_mask(mask))
    st = mask_stages(trace, 1, 1)
    assert np.array_equal(st.mask, mask.numpy())
    assert np.all(st.weights[~st.mask] == 0) and np.allclose(st.weights.sum(-1), 1)
    assert np.all(np.isneginf(st.masked[~st.mask])) and np.all(st.additive[st.mask] == 0)
    # weights are the row softmax of the masked scores
    e = np.exp(st.masked - st.masked.max(-1, keepdims=True))
    assert np.allclose(st.weights, e / e.sum(-1, keepdims=True), atol=1e-6)
    upper = np.triu(np.ones((T, T), bool), 1)
    assert (st.future > 0.01) == bool((mask.numpy() & upper).any())


def test_grad_flow_on_batch_leaves_weights_and_grads_alone():
    model = tiny()
    x = torch.randint(0, 12, (2, 8), generator=torch.Generator().manual_seed(0))
    y = torch.roll(x, -1, 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    flow = grad_flow_on_batch(model, x, y)
    assert model.training  # mode restored
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert flow.block.shape == (2,) and np.all(flow.block > 0)
    # the same numbers as an explicit backward pass
    model.eval()
    _, loss = model(x, y)
    loss.backward()
    ref = torch.stack(
        [
            torch.cat(
                [p.grad.flatten() for n, p in model.named_parameters() if n.startswith(f"blocks.{i}.")]
            ).norm()
            for i in range(2)
        ]
    )
    assert np.allclose(flow.block, ref.numpy(), rtol=1e-5)


def test_probes_summarise_attention_and_the_stream():
    model = tiny()
    ids = [1, 5, 2, 7, 3]
    s = saturation_summary(model, ids)
    assert 0.0 < s["max_weight"] <= 1.0 and 0.0 <= s["entropy_norm"] <= 1.0
    names, mean = residual_profile(model, ids)
    assert names == ["embed", "L0.post", "L1.post"]
    trace = run_with_trace(model, ids, kinds=("resid_post",))
    assert mean[-1] == pytest.approx(trace["resid_post", 1][0].norm(dim=-1).mean().item(), rel=1e-5)


def test_without_positions_keeps_weights_and_makes_the_model_permutation_equivariant():
    model = tiny(positions="learned")
    flat = without_positions(model)
    assert flat.config.positional.positions == "none" and getattr(flat, "pos_emb", None) is None
    assert torch.equal(flat.blocks[0].attn.q_proj.weight, model.blocks[0].attn.q_proj.weight)
    ids = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
    with_pos = permutation_predictions(permutation_experiment(model, ids, seed=3))
    no_pos = permutation_predictions(permutation_experiment(flat, ids, seed=3))
    assert no_pos.equivariant and no_pos.follows.all()
    assert not with_pos.equivariant
    assert np.array_equal(no_pos.pred_permuted, no_pos.pred[no_pos.perm])


def test_fixed_batch_repeats():
    from model.text.sources import resolve_source

    src = resolve_source("task:copy")
    a, b = fixed_batch(src, 2, 8, seed=4), fixed_batch(src, 2, 8, seed=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[0].shape == (2, 8)


def test_future_attention_is_zero_under_the_causal_mask_only():
    ids = [1, 2, 3, 4, 5, 6]
    assert future_attention(tiny(causal=True), ids) == 0.0
    # an untrained non-causal model spreads weight about evenly: about half of it lies ahead
    assert 0.2 < future_attention(tiny(causal=False), ids) < 0.6
