"""The reading path: model/nn/reference.py is the default GPT in one short file, and it computes what the
production :class:`~model.nn.gpt.GPT` computes under ``GPTConfig()`` itself (so a change of the
default that the reference does not follow fails here)."""

from __future__ import annotations

import ast
import inspect

import pytest
import torch

import model.nn.reference as reference_module
from model.config import ConfigError, GPTConfig
from model.nn.gpt import init_model
from model.nn.reference import ReferenceGPT

V = 97  # the one field GPTConfig() leaves for a tokenizer to set

# The production GPT trains on the fused F.scaled_dot_product_attention, which adds its products in
# another order than the reference's written-out softmax(QKᵀ/√d_head + M)V: in float32 the logits then
# differ by rounding, measured up to 2e-6 of the largest logit after 4 layers (more than 1e-6, so the
# bound is 32 float32 epsilons). In float64 the same two computations agree to ~3e-15, so any other
# formula (a missing bias, another ε, GELU's tanh form, a mask off by one) shows far above 1e-12.
RTOL = {torch.float32: 32 * torch.finfo(torch.float32).eps, torch.float64: 1e-12}


def _gpt_and_reference(config: GPTConfig, seed: int = 0):
    """The production GPT with weights moved away from their init (so LayerNorm's γ ≠ 1, β ≠ 0 and the
    attention patterns are far from uniform), and the reference holding the same weights."""
    gpt = init_model(config, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in gpt.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
            else:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
    ref = ReferenceGPT(config)
    ref.load_state_dict(gpt.state_dict())  # strict: the same parameter names and shapes
    return gpt, ref


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    """``max |got − want| ≤ rtol · max |want|``."""
    err, scale = (got - want).abs().max().item(), want.abs().max().item()
    assert err <= RTOL[want.dtype] * scale, f"{err:.3g} apart, {err / scale:.3g} of the largest value"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_reference_computes_the_production_gpts_logits_and_loss_under_gpt_config(dtype):
    cfg = GPTConfig(vocab_size=V)  # GPTConfig() itself: its sizes and every one of its choices
    gpt, ref = _gpt_and_reference(cfg)
    gpt, ref = gpt.to(dtype), ref.to(dtype)
    gen = torch.Generator().manual_seed(7)
    for B, T in ((3, 1), (2, 17), (4, 64), (2, 65), (2, cfg.core.context_length)):
        idx = torch.randint(0, V, (B, T), generator=gen)
        targets = torch.randint(0, V, (B, T), generator=gen)
        targets[0, : T // 3] = -100  # positions the loss skips
        with torch.no_grad():
            # training mode, as the trainer calls it: default dropout (0) changes nothing in either
            logits, loss = gpt.train()(idx, targets)
            ref_logits, ref_loss = ref.train()(idx, targets)
        assert ref_logits.shape == (B, T, V) and ref_logits.dtype == dtype
        _close(ref_logits, logits)
        assert loss is not None and ref_loss is not None
        _close(ref_loss, loss)


def test_the_reference_draws_the_production_gpts_initial_weights_from_the_same_seed():
    cfg = GPTConfig(vocab_size=V)
    gpt = init_model(cfg, seed=5).state_dict()
    torch.manual_seed(5)
    ref = ReferenceGPT(cfg).state_dict()
    assert list(ref) == list(gpt)
    assert all(torch.equal(ref[name], gpt[name]) for name in gpt)
    torch.manual_seed(6)
    assert not torch.equal(
        ReferenceGPT(cfg).state_dict()["blocks.0.attn.q_proj.weight"], ref["blocks.0.attn.q_proj.weight"]
    )


def test_the_reference_takes_other_sizes_and_refuses_every_other_choice():
    sizes = GPTConfig(vocab_size=11, context_length=16, n_layers=2, d_model=24, n_heads=3, d_ff=40)
    gpt, ref = _gpt_and_reference(sizes, seed=2)
    idx = torch.randint(0, 11, (2, 16), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        _close(ref(idx)[0], gpt(idx)[0])
    for other in ({"norm": "rmsnorm"}, {"positions": "rope"}, {"n_kv_heads": 1}, {"dropout": 0.1}):
        with pytest.raises(ConfigError, match="GPTConfig"):
            ReferenceGPT(sizes.replace(**other))
    with pytest.raises(ConfigError, match="vocab_size"):
        ReferenceGPT(GPTConfig())
    with pytest.raises(ValueError, match="context_length=16"):
        ref(torch.zeros(1, 17, dtype=torch.long))


def test_the_reference_stays_a_short_file_of_plain_torch():
    """A reading path: one screenful or three, no hook points, nothing from the production network but
    GPT-2's init helper."""
    source = inspect.getsource(reference_module)
    assert len(source.splitlines()) <= 180
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= {
        "__future__",
        "math",
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "model.config",
        "model.nn.layers",
    }
    assert "Hook" not in source
