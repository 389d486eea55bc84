"""The README's "Python API" example runs as written, and what it prints holds up against the model:
the README cannot drift from the code."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from model.nn.hooks import ablate_heads

ROOT = Path(__file__).resolve().parent.parent


def python_api_example() -> str:
    """The one ```python block of the README's "## Python API" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "\n## Python API\n" in text, "the README has no Python API section"
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"the Python API section has {len(blocks)} python blocks, not one"
    return blocks[0]


@pytest.fixture(scope="module")
def ran() -> tuple[dict, list[str]]:
    """The example's names and printed lines, run from the repository root as a reader would."""
    code = compile(python_api_example(), "README.md (Python API)", "exec")
    names: dict = {}
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.chdir(ROOT)
        exec(code, names)
    return names, out.getvalue().splitlines()


def test_the_trace_records_what_the_predicate_chose_and_each_pattern_row_is_a_distribution(ran):
    names, printed = ran
    trace, pattern, lm = names["trace"], names["pattern"], names["lm"]
    L, H = lm.config.core.n_layers, lm.config.attention.n_heads
    assert trace.kinds == {"pattern", "resid_pre", "resid_mid", "resid_post"} and trace.layers == list(
        range(L)
    )
    T = trace.seq_len
    for layer in range(L):
        A = trace["pattern", layer]
        assert A.shape == (1, H, T, T)
        torch.testing.assert_close(A.sum(-1), torch.ones(1, H, T))  # softmax rows sum to 1
        assert not A[0].triu(1).any()  # causal: no weight on a later token
    assert torch.equal(pattern, trace["pattern", 1][0, 3])
    # the comment's claim: the last token looks at the token after its earlier occurrence (induction)
    text = names["text"]
    after_earlier = text.index(text[-1]) + 1
    assert int(pattern[-1].argmax()) == names["looks_at"] == after_earlier
    said = re.fullmatch(
        r"L1H3: the last token looks at position (\d+), '(.)'; its row sums to ([\d.]+)", printed[0]
    )
    assert said, printed[0]
    assert int(said[1]) == after_earlier and said[2] == text[after_earlier] and float(said[3]) == 1.0


def test_the_patched_head_is_the_one_that_restores_most_and_zeroing_it_is_what_the_model_does(ran):
    names, printed = ran
    lm, patched, trace, ablated = names["lm"], names["patched"], names["trace"], names["ablated"]
    restored = patched.heads.restored
    assert (
        restored.shape == (lm.config.core.n_layers, lm.config.attention.n_heads)
        and np.isfinite(restored).all()
    )
    layer, head = names["layer"], names["head"]
    assert (layer, head) == np.unravel_index(np.argmax(restored), restored.shape)
    said = re.fullmatch(r"L(\d)H(\d) restores (-?[\d.]+) of logit\('(.)'\) − logit\('(.)'\)", printed[1])
    assert said, printed[1]
    assert (int(said[1]), int(said[2])) == (layer, head) and float(said[3]) == round(restored[layer, head], 2)
    assert said[4] == "p" != said[5]  # the clean answer, against the corrupted run's
    # the ablated run is the model's own forward with that head's output zeroed
    ids = trace.tokens.to(lm.model.device)
    with torch.no_grad(), lm.model.hooks(ablate_heads({(layer, head): "zero"})):
        logits, _ = lm.model(ids)
    torch.testing.assert_close(ablated.logits, logits.float())
    assert not torch.equal(ablated.logits, trace.logits)
    p = torch.softmax(trace.logits[0, -1], -1)[lm.tokenizer.encode("p")[0]].item()
    q = torch.softmax(logits[0, -1].float(), -1)[lm.tokenizer.encode("p")[0]].item()
    assert printed[2] == f"P('p') = {p:.3f}, with L{layer}H{head} zeroed {q:.3f}"


def test_the_budget_printed_counts_the_parameters_the_model_has(ran):
    names, printed = ran
    lm, report = names["lm"], names["report"]
    assert report["params"]["total"] == lm.model.num_params()
    table = "\n".join(printed[3:])
    assert f"{lm.model.num_params():,}" in table and "token embedding" in table
