"""Direct logit attribution: the parts add up to the model's logit, through a frozen final norm."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.attribution import LogitAttribution, direct_logit_attribution
from model.nn.gpt import GPT
from model.text.tokens import CharTokenizer


def model_of(**kw) -> GPT:
    base = dict(vocab_size=37, context_length=24, n_layers=3, d_model=32, n_heads=4)
    base.update(kw)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**base)).eval()
    with torch.no_grad():  # weights far from init: every part matters, biases and γ/β included
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


@pytest.mark.parametrize(
    "variant",
    [
        dict(),
        dict(norm="rmsnorm"),
        dict(bias="none", norm_bias=False),
        dict(tie_embeddings=True, positions="rope"),
        dict(n_kv_heads=2, mlp="swiglu", norm="rmsnorm", positions="sinusoidal"),
        dict(norm="rmsnorm", norm_offset=True, positions="rope"),  # Gemma: the norm scales by 1 + γ
    ],
)
def test_parts_add_up_to_the_logit(variant):
    model = model_of(**variant)
    idx = torch.randint(0, 37, (10,), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits, _ = model(idx[None])
    top = direct_logit_attribution(model, idx)
    assert top.position == 9 and top.token == int(logits[0, -1].argmax()) and top.other is None
    assert top.logit == pytest.approx(float(logits[0, -1, top.token]), abs=1e-6)
    assert top.total == pytest.approx(top.logit, abs=1e-5 * max(1.0, abs(top.logit)))
    assert top.heads.shape == (3, 4) and top.mlp.shape == (3,) and top.attn_bias.shape == (3,)
    diff = direct_logit_attribution(model, idx, token=3, other=5, position=4)
    want = float(logits[0, 4, 3] - logits[0, 4, 5])
    assert diff.logit == pytest.approx(want, abs=1e-5)
    assert diff.total == pytest.approx(want, abs=1e-5 * max(1.0, abs(want)))
    # parts() lists the same numbers, in stream order
    names = [n for n, _ in diff.parts()]
    assert names[:2] == ["embed", "L0H0"] and "L2 MLP" in names
    assert sum(v for _, v in diff.parts()) == pytest.approx(diff.total, abs=1e-9)
    has_bias = variant.get("bias", "all") == "all"
    assert ("L0 attn bias" in names) == has_bias and (diff.attn_bias != 0).any() == has_bias
    is_ln = variant.get("norm", "layernorm") == "layernorm"
    assert (diff.norm_bias != 0) == (is_ln and variant.get("norm_bias", True))


def test_the_frozen_scale_is_the_final_norms_and_a_head_part_is_its_write():
    model = model_of(tie_embeddings=False)
    idx = torch.randint(0, 37, (1, 8), generator=torch.Generator().manual_seed(4))
    cache = {}
    names = ["blocks.2.resid_post", "blocks.1.attn.z"]
    with model.hooks({n: (lambda x, hook: cache.__setitem__(hook.name, x)) for n in names}), torch.no_grad():
        model(idx)
    a = direct_logit_attribution(model, idx, token=7)
    x = cache["blocks.2.resid_post"][0, -1]
    assert a.scale == pytest.approx(float(torch.sqrt(x.var(unbiased=False) + model.norm_f.eps)), rel=1e-6)
    # head 2 of layer 1 by hand: its write W_O[h] z_h, centred, over σ, times γ, onto u_7 (untied head)
    z = cache["blocks.1.attn.z"][0, 2, -1]
    d_k = model.config.d_head
    with torch.no_grad():
        write = model.blocks[1].attn.o_proj.weight[:, 2 * d_k : 3 * d_k] @ z
        want = ((write - write.mean()) / a.scale * model.norm_f.weight) @ model.lm_head.weight[7]
    assert a.heads[1, 2] == pytest.approx(float(want), rel=1e-4, abs=1e-6)


def test_post_ln_is_refused_and_text_prompts_need_a_tokenizer():
    with pytest.raises(ValueError, match="Post-LN model has no single final norm"):
        direct_logit_attribution(model_of(norm_position="post"), [1, 2, 3])
    tok = CharTokenizer.from_text("abcdef ")
    model = model_of(vocab_size=tok.vocab_size)
    a = direct_logit_attribution(model, "abc de", tokenizer=tok)
    assert isinstance(a, LogitAttribution) and a.position == 5
    assert np.isclose(a.total, a.logit, atol=1e-5)
    with pytest.raises(ValueError, match="needs a tokenizer"):
        direct_logit_attribution(model, "abc")
    with pytest.raises(ValueError, match="outside a prompt of 3 tokens"):
        direct_logit_attribution(model, [1, 2, 3], position=3)
