"""model.causal: the Attention tab's patching and attribution entry points, on a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.causal import attribution_of, one_token, patching_of, suggest_corruption
from model.interp.prompt import PromptError
from model.nn.gpt import GPT
from model.text.tokens import CharTokenizer

TEXT = "When Mary and Anne went out, Anne gave it to Mary. xyz"


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(TEXT)


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=tok.vocab_size, context_length=64, n_layers=2, d_model=16, n_heads=2))


def test_suggest_corruption_swaps_names_and_keeps_the_token_count(tok):
    p = "When Mary and Anne went out, Anne gave it to"
    assert suggest_corruption(tok, p) == "When Anne and Mary went out, Mary gave it to"
    # no name: two ordinary words of the same length
    q = "went out and gave it to"
    got = suggest_corruption(tok, q)
    assert got is not None and got != q and len(tok.encode(got)) == len(tok.encode(q))
    assert sorted(got.split()) == sorted(q.split())
    assert suggest_corruption(tok, "Mary") is None  # one word: nothing to swap


def test_one_token_names_how_many_tokens_a_text_is(tok):
    assert one_token(tok, "M") == tok.encode("M")[0]
    with pytest.raises(PromptError, match=r"'Ma' is 2 tokens \(M \| a\)"):
        one_token(tok, "Ma")
    with pytest.raises(PromptError, match="not in the tokenizer"):
        one_token(tok, "Q")


def test_patching_of_checks_lengths_and_keeps_the_sweeps_consistent(model, tok):
    clean = "When Mary and Anne went out, Anne gave it to"
    ids = tok.encode(clean)
    with pytest.raises(PromptError, match="same length"):
        patching_of(model, tok, ids, "When Anne went")
    res = patching_of(model, tok, ids, suggest_corruption(tok, clean), answer="M", wrong="A", prompt=clean)
    assert res.heads.restored.shape == (2, 2) and res.resid.restored.shape == (2, len(ids))
    assert (res.heads.answer, res.heads.wrong) == (tok.encode("M")[0], tok.encode("A")[0])
    assert (res.answer_label, res.wrong_label) == ("M", "A")
    assert res.resid.clean_diff == res.heads.clean_diff  # both sweeps read the same metric
    arrays = res.arrays()
    assert all(isinstance(v, np.ndarray | np.generic) and v.dtype != object for v in arrays.values())
    np.testing.assert_array_equal(arrays["restored_heads"], res.heads.restored)


def test_attribution_of_labels_the_target_and_sums_to_the_logit(model, tok):
    ids = tok.encode("When Mary and Anne")
    res = attribution_of(model, tok, ids, token="M", other="A", position=5)
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]))
    want = float(logits[0, 5, tok.encode("M")[0]] - logits[0, 5, tok.encode("A")[0]])
    assert res.attr.logit == pytest.approx(want, abs=1e-5) and res.attr.total == pytest.approx(want, abs=1e-4)
    assert res.target == "logit('M') − logit('A')" and res.norm == "layernorm"
    assert res.arrays()["part_values"].sum() == pytest.approx(want, abs=1e-4)
