"""Numbers at their edges: every real-number config field, sampling value, task parameter and GPT-2
tokenizer file is refused out of its range with one line naming it and the range, before anything is
built; values inside the range (however small) work."""

from __future__ import annotations

import json
import time

import pytest
import torch

from model.config import FLOAT_RANGES, MAX_ROPE_BASE, ConfigError, GPTConfig
from model.nn.generate import check_sampling, sample_next
from model.text.bpe import MAX_VOCAB_ENTRIES, MAX_VOCAB_FILE_BYTES, load_hf_tokenizer
from model.text.datasource import DataError
from model.text.tasks import MAX_GAP, MAX_LEN, make_task
from model.text.tokens import TokenizerError
from model.train.settings import TrainSettings

ROPE = dict(positions="rope", n_layers=1, d_model=16, n_heads=2, context_length=16, vocab_size=32)
#: What each field needs beside it to mean something (the field's own problem is what is tested).
CONTEXT = {
    "rope_factor": dict(ROPE, rope_scaling="yarn"),
    "rope_low_freq_factor": dict(ROPE, rope_scaling="linear"),  # (llama3 also orders the two)
    "rope_high_freq_factor": dict(ROPE, rope_scaling="linear"),
    "rope_beta_fast": dict(ROPE, rope_scaling="yarn"),
    "rope_beta_slow": dict(ROPE, rope_scaling="yarn"),
    "rope_attn_factor": dict(ROPE, rope_scaling="yarn"),
    "router_scale": dict(n_experts=4),
    "swiglu_limit": dict(mlp="swiglu"),
}
#: Values each field took before, though they compute infinities or NaN (or mean nothing).
HOSTILE = (float("nan"), float("inf"), 1e-300, 1e300)


def problems(**fields):
    return GPTConfig(**fields).problems()


@pytest.mark.parametrize("name", sorted(FLOAT_RANGES))
def test_every_real_number_field_is_refused_outside_its_range_naming_it(name):
    lo, hi = FLOAT_RANGES[name]
    base = CONTEXT.get(name, {})
    assert problems(**{**base, name: lo}) == [] and problems(**{**base, name: hi}) == []
    refused = [
        v
        for v in HOSTILE
        if any(p.startswith(f"{name}={v!r} must be") for p in problems(**{**base, name: v}))
    ]
    assert len(refused) == len(HOSTILE), (name, refused)
    line = problems(**{**base, name: float("nan")})[0]
    assert "from" in line and "\n" not in line  # the range is named


def test_rope_scaling_values_that_trained_into_nan_are_refused_with_their_range():
    for v in (float("nan"), 1e-300, float("inf")):
        with pytest.raises(ConfigError, match=r"rope_factor=.* must be a number from 1 to 10,000"):
            GPTConfig(**ROPE, rope_scaling="linear", rope_factor=v).validate()
    with pytest.raises(
        ConfigError, match="rope_original_context=1000000000000 must be a whole number from 1"
    ):
        GPTConfig(**ROPE, rope_scaling="llama3", rope_original_context=10**12).validate()
    for name in ("rope_base", "rope_local_base"):
        with pytest.raises(ConfigError, match=f"{name}=1e\\+300 must be greater than 1 and at most"):
            GPTConfig(**ROPE, sliding_window=4, **{name: 1e300}).validate()
        assert not problems(**ROPE, sliding_window=4, **{name: MAX_ROPE_BASE})


def test_the_edges_of_the_rope_ranges_still_give_finite_outputs():
    from model.nn.gpt import init_model

    x = torch.randint(32, (1, 16))
    for kw in (
        dict(rope_scaling="linear", rope_factor=10_000.0),
        dict(rope_scaling="yarn", rope_factor=10_000.0, rope_beta_fast=0.001, rope_attn_factor=100.0),
        dict(rope_scaling="llama3", rope_factor=1.0, rope_low_freq_factor=0.001),
        dict(rope_base=MAX_ROPE_BASE, norm_eps=1e-12, final_softcap=0.01),
    ):
        cfg = GPTConfig(**ROPE, **kw).validate()
        logits, _ = init_model(cfg, seed=0)(x)
        assert torch.isfinite(logits).all(), kw
    with pytest.raises(ConfigError, match=r"norm_eps=1e-300 must be a small positive number from 1e-12"):
        GPTConfig(norm_eps=1e-300).validate()


# ---- sampling ----------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [float("nan"), float("inf"), -1.0, "0.8"])
def test_greedy_still_refuses_a_temperature_that_is_not_a_number(t):
    with pytest.raises(ValueError, match="temperature="):
        check_sampling(t, None, None, greedy=True)
    check_sampling(0.0, None, None, greedy=True)
    check_sampling(1e-6, None, None, greedy=True)  # the Generate box's greedy passes its floor


def test_top_p_true_is_not_one():
    with pytest.raises(ValueError, match="top_p=True"):
        check_sampling(0.8, None, True)


@pytest.mark.parametrize("top_p", [1e-300, 5e-324])
def test_a_tiny_top_p_keeps_the_likeliest_token(top_p):
    check_sampling(0.8, None, top_p)  # in (0, 1]: allowed
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        got = sample_next(logits, temperature=0.8, top_p=top_p, generator=g)
        assert torch.equal(got, logits.argmax(-1, keepdim=True))


# ---- task parameters ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, words",
    [
        ("task:sort:max_len=100000000", "max_len=100000000: must be a whole number between 1 and 4,096"),
        (f"task:copy:max_len={MAX_LEN + 1}", f"max_len={MAX_LEN + 1}:"),
        ("task:induction:max_len=100000000", "max_len=100000000"),
        (f"task:induction:max_gap={MAX_GAP + 1}", f"max_gap={MAX_GAP + 1}: must be a whole number between 0"),
        ("task:induction:max_gap=1000000000", "max_gap=1000000000"),
        ("task:induction:min_gap=-1", "min_gap=-1: must be a whole number between 0 and 4,096"),
        ("task:reverse:min_len=-5,max_len=3", "min_len=-5: must be a whole number between 1 and 4,096"),
        ("task:prev_token:n_symbols=100", "n_symbols=100: must be a whole number between 2 and 62"),
    ],
)
def test_task_parameters_are_bounded_when_the_spec_is_parsed(spec, words):
    t0 = time.perf_counter()
    with pytest.raises(DataError) as err:
        make_task(spec)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert time.perf_counter() - t0 < 1.0


def test_a_huge_task_value_is_named_briefly():
    with pytest.raises(DataError) as err:
        make_task("task:copy:max_len=" + "9" * 5000)  # more digits than int() takes
    assert "max_len='99999" in str(err.value) and len(str(err.value)) < 200


def test_the_largest_task_parameters_still_give_small_batches():
    longest = f"min_len={MAX_LEN},max_len={MAX_LEN}"
    for spec in (f"task:induction:{longest},min_gap={MAX_GAP},max_gap={MAX_GAP}", f"task:sort:{longest}"):
        task = make_task(spec)
        need = task.min_seq_len()
        x, _, mask = task.get_masked_batch("train", 2, need, torch.Generator().manual_seed(0))
        assert x.shape == (2, need) and mask.any()


def test_a_task_that_cannot_fit_the_sequence_is_refused_before_the_run():
    config = GPTConfig(context_length=16, n_layers=1, d_model=16, n_heads=2)
    task = make_task("task:copy:min_len=100,max_len=100")
    assert task.min_seq_len() == 101
    (line,) = TrainSettings(seq_len=16).problems_for(config, task)
    assert line.startswith("seq_len=16 is too short for task:copy:min_len=100,max_len=100") and "101" in line
    (line,) = TrainSettings(seq_len=None).problems_for(config, task)
    assert line.startswith("context_length=16 is too short")
    induction = make_task("task:induction:min_len=30,max_len=30,min_gap=4,max_gap=4")
    assert induction.min_seq_len() == 35
    assert TrainSettings(seq_len=35).problems_for(config.replace(context_length=64), induction) == []
    with pytest.raises(DataError, match=r"no target to score in seq_len=34: .* at least 35"):
        induction.get_masked_batch("train", 2, 34, torch.Generator().manual_seed(0))
    with pytest.raises(DataError, match="at least 2"):
        make_task("task:prev_token").get_masked_batch("train", 2, 1, torch.Generator().manual_seed(0))


# ---- GPT-2 tokenizer files ---------------------------------------------------------------------
def _gpt2_files(directory, vocab: bytes, merges: bytes = b"#version: 0.2\n"):
    directory.mkdir()
    (directory / "vocab.json").write_bytes(vocab)
    (directory / "merges.txt").write_bytes(merges)
    return directory


def test_a_vocab_json_larger_than_any_tokenizer_is_refused_from_its_size(tmp_path):
    d = _gpt2_files(tmp_path / "big", b"")
    with open(d / "vocab.json", "r+b") as fh:  # sparse: nothing of it is written or read
        fh.truncate(MAX_VOCAB_FILE_BYTES + 1)
    t0 = time.perf_counter()
    with pytest.raises(TokenizerError, match=r"vocab\.json is 67,108,865 bytes: larger than any tokenizer's"):
        load_hf_tokenizer(d)
    assert time.perf_counter() - t0 < 1.0


def test_a_vocab_json_of_too_many_entries_is_refused_before_it_is_parsed(tmp_path):
    n = MAX_VOCAB_ENTRIES + 1
    body = b",".join(b'"t%x":%d' % (i, i) for i in range(n))
    d = _gpt2_files(tmp_path / "many", b"{" + body + b"}")
    t0 = time.perf_counter()
    with pytest.raises(
        TokenizerError, match=f"vocab.json holds about {n:,} entries: more than any tokenizer's"
    ):
        load_hf_tokenizer(d)
    assert time.perf_counter() - t0 < 2.0


def test_a_merges_txt_of_too_many_lines_is_refused_and_a_real_one_loads(tmp_path):
    vocab = json.dumps({"a": 0, "b": 1, "ab": 2}).encode()
    d = _gpt2_files(tmp_path / "merges", vocab, b"a b\n" * (MAX_VOCAB_ENTRIES + 1))
    with pytest.raises(TokenizerError, match=r"merges\.txt holds about 1,000,001 lines"):
        load_hf_tokenizer(d)
    (d / "merges.txt").write_bytes(b"#version: 0.2\na b\n")
    assert load_hf_tokenizer(d).encode("ab") == [2]
