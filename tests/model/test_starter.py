"""The starter model shipped in assets/starter: its recipe, its size, and the heads it must show."""

import json

import pytest

from model.config import GPTConfig
from model.io.checkpoint import starter

pytestmark = pytest.mark.skipif(
    not (starter.STARTER_DIR / "model.safetensors").is_file(), reason="no starter model built (make starter)"
)


def test_the_recipe_is_what_was_shipped():
    shipped = GPTConfig.load(starter.STARTER_DIR / "config.json", validate=False)
    for name, value in starter.RECIPE["config"].items():
        assert shipped.get(name) == value, name
    meta = json.loads((starter.STARTER_DIR / "meta.json").read_text(encoding="utf-8"))
    assert meta["recipe"] == json.loads(
        json.dumps(starter.RECIPE)
    )  # the recipe in the code made these weights
    assert meta["step"] == starter.RECIPE["stages"][-1]["steps"]
    assert not (starter.STARTER_DIR / "optimizer.safetensors").exists()
    size = sum(p.stat().st_size for p in starter.STARTER_DIR.iterdir())
    assert size <= 4 * 2**20, f"the starter is {size} bytes: at most about 4 MB"


def test_the_corpora_are_deterministic_and_speak_the_starters_vocabulary():
    from model.text.sources import resolve_source
    from model.text.tokens import CharTokenizer

    tales = resolve_source("builtin:tales")
    assert starter.starter_corpus(seed=0) == starter.starter_corpus(seed=0) != starter.starter_corpus(seed=1)
    assert starter.repeats_corpus(1000, seed=0) == starter.repeats_corpus(1000, seed=0)
    assert CharTokenizer.from_text(starter.repeats_corpus(20_000)) == tales.tokenizer
    for stage, spec in enumerate(starter.RECIPE["stages"]):
        text = starter.stage_text(stage)
        if text is None:  # a named source: the starter's data
            assert spec["data"]["spec"] == starter.STARTER_SOURCE
        else:  # so the app opens it with that data
            assert CharTokenizer.from_text(text) == resolve_source(starter.STARTER_SOURCE).tokenizer


def test_the_shipped_weights_name_previous_token_and_induction_heads_on_the_default_prompt():
    from model.io.pretrained import open_model
    from model.text.sources import resolve_source

    ckpt = open_model(starter.STARTER_DIR)
    prompt = resolve_source(starter.STARTER_SOURCE, tokenizer=ckpt.tokenizer).default_prompt
    named = starter.named_heads(ckpt.model, ckpt.tokenizer, prompt)
    assert named.get("previous-token") and named.get("induction"), starter.describe(named)
    assert "previous-token L" in starter.describe(named)
