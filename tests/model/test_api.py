"""The public API (model.api, exported by model itself): each door opens onto the function the app
uses, with the same numbers, and importing model stays cheap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import model
from model import api
from model.budget import arithmetic, presets
from model.interp.causal import patching_of
from model.interp.prompt import encode_prompt
from model.interp.trace import run_with_trace as record
from model.io.hub import HubError

STARTER = Path(__file__).resolve().parents[2] / "assets" / "starter"
TEXT = "abcdefghabcdefg"


@pytest.fixture(scope="module")
def lm():
    return api.open_model(STARTER)


def test_importing_model_imports_no_torch_and_its_api_names_load_on_first_use():
    code = (
        "import sys, model, model.budget.arithmetic\n"
        "assert 'torch' not in sys.modules and 'model.api' not in sys.modules, 'model imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
    assert set(model.__all__) >= set(api.__all__) and set(dir(model)) >= set(api.__all__)
    assert all(getattr(model, name) is getattr(api, name) for name in api.__all__)
    with pytest.raises(AttributeError, match="no attribute 'from_pretrained'"):
        model.from_pretrained  # noqa: B018
    functions = [getattr(api, n) for n in api.__all__ if callable(getattr(api, n))]
    assert all(f.__doc__ and f.__doc__.strip() for f in functions)


def test_run_with_trace_takes_text_and_a_predicate_and_is_the_engine_run(lm):
    trace = api.run_with_trace(lm, TEXT, names=lambda name: name in ("pattern", "z"), layers=[1])
    ids = encode_prompt(lm.tokenizer, TEXT, lm.config.core.context_length)
    want = record(lm.model, ids, kinds=("pattern", "z"), layers=[1])
    assert trace.kinds == {"pattern", "z"} and trace.layers == [1]
    assert torch.equal(trace["pattern", 1], want["pattern", 1]) and torch.equal(trace.logits, want.logits)
    assert torch.equal(
        api.run_with_trace(lm, list(ids.ids), names=["z"])["z", 0], record(lm.model, ids, kinds=["z"])["z", 0]
    )
    with pytest.raises(ValueError, match=r"^'weights' is now 'pattern'$"):
        api.run_with_trace(lm, TEXT, names=["weights"])


def test_patch_and_attribute_are_the_tabs_numbers(lm):
    ids = list(encode_prompt(lm.tokenizer, TEXT, lm.config.core.context_length).ids)
    corrupt = "abcdxfghabcdefg"
    got = api.patch(lm, TEXT, corrupt)
    want = patching_of(lm.model, lm.tokenizer, ids, corrupt, prompt=TEXT)
    np.testing.assert_array_equal(got.heads.restored, want.heads.restored)
    np.testing.assert_array_equal(got.resid.restored, want.resid.restored)
    attr = api.attribute(lm, TEXT).attr
    assert attr.heads.shape == (lm.config.core.n_layers, lm.config.attention.n_heads)
    assert attr.total == pytest.approx(attr.logit, abs=1e-4)  # the parts add up to the logit


def test_circuits_and_budget_take_what_a_notebook_has(lm):
    c = api.circuits(lm)
    L, H = lm.config.core.n_layers, lm.config.attention.n_heads
    assert c.composition.scores.shape == (3, L, H, L, H) and c.heads.copying.shape == (L, H)
    assert api.budget_report(lm)["params"]["total"] == lm.model.num_params()
    assert api.budget_report(lm.config) == api.budget_report(lm.model)
    llama = api.budget_report("llama2-7b", seq_len=4096)
    assert llama == arithmetic.report(presets.get("llama2-7b").gpt_config(), seq_len=4096)
    assert f"{llama['params']['total']:,}" in api.budget_table(llama)


def test_open_model_reads_hub_and_package_specs_and_refuses_in_one_line():
    with pytest.raises(HubError, match=r"^package:nope: no such packaged model"):
        api.open_model("package:nope")


def test_qk_map_is_the_commands_map_with_the_prompt_placed_in_it(lm):
    from model.interp.analysis.qk_map import qk_map
    from model.text.sources import resolve_source

    got, placed = api.qk_map(lm, 1, 3, "task:induction", prompts=4, seq_len=16, prompt=TEXT)
    want = qk_map(lm.model, lm.tokenizer, resolve_source("task:induction"), 1, 3, n_prompts=4, seq_len=16)
    np.testing.assert_array_equal(got.points, want.points)
    assert got.corr_full == want.corr_full and got.token == want.token
    T = len(encode_prompt(lm.tokenizer, TEXT, lm.config.core.context_length).ids)
    assert placed is not None and placed.points.shape == (2 * T, 2) and placed.token[:T] == list(TEXT[-T:])
    assert api.qk_map(lm, 0, 0, "task:induction", prompts=2, seq_len=12)[1] is None


def test_head_scores_is_the_corpus_run_and_caches_it(lm, tmp_path, monkeypatch):
    from model.interp.corpus import CorpusSettings, corpus_run

    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path))
    got = model.head_scores(lm, "task:induction", prompts=8, seq_len=32, top_k=3)
    settings = CorpusSettings("task:induction", n_prompts=8, seq_len=32, top_k=3)
    direct = corpus_run(lm.model, lm.tokenizer, settings, use_cache=False)
    assert np.array_equal(got.mean, direct.mean, equal_nan=True) and got.names == direct.names
    assert got.examples["attention"].k == 3 and len(list((tmp_path / "heads").glob("*.npz"))) == 1
    assert model.head_scores(lm, "task:induction", prompts=8, seq_len=32, top_k=3).from_cache
