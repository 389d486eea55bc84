"""The comparison module: variant specs, summary rows, aligned tables, levels, and the file format."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from model.budget import arithmetic as budget
from model.compare.comparison import (
    Comparison,
    ComparisonError,
    RunRecord,
    decode_array,
    encode_array,
    load_comparison,
    resolve_run_path,
    safe_dir_name,
    save_comparison,
)
from model.compare.tables import config_table, diff_levels, loss_curves, metric_table, summary_row
from model.compare.variants import describe_changes, parse_changes, unique_name
from model.config import ConfigError, GPTConfig
from model.interp.analysis.compare import weights_difference
from model.interp.analysis.heads import head_metrics
from model.interp.frame import AttentionFrame
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model
from model.train.multitrain import variant_configs

BASE = GPTConfig(vocab_size=11, context_length=16, n_layers=2, d_model=16, n_heads=4)


def test_parse_changes_types_every_kind_of_field():
    got = parse_changes("n_kv_heads=1, norm_position = post; causal=false\nhead_dim=auto, dropout=0.1")
    want = {"n_kv_heads": 1, "norm_position": "post", "causal": False, "head_dim": None, "dropout": 0.1}
    assert got == want
    assert isinstance(got["n_kv_heads"], int) and isinstance(got["dropout"], float)
    assert parse_changes("") == {}
    today = parse_changes(
        "n_experts=4, router=softmax_topk, window_pattern=LG, attn_softcap=30, kv_lora_rank=off"
    )
    assert today == dict(
        n_experts=4, router="softmax_topk", window_pattern="LG", attn_softcap=30.0, kv_lora_rank=None
    )
    assert describe_changes(parse_changes("attn_softcap=off, d_ff=auto")) == "attn_softcap=off, d_ff=auto"
    with pytest.raises(ConfigError, match="attn_softcap='big' must be a number or off"):
        parse_changes("attn_softcap=big")
    # the variants it describes are what TrainerGroup builds
    cfg = variant_configs(BASE, {"x": got})["x"]
    assert (
        cfg.attention.n_kv_heads == 1
        and cfg.normalization.norm_position == "post"
        and cfg.core.causal is False
    )


def test_parse_changes_collects_every_problem_in_one_error():
    with pytest.raises(ConfigError) as err:
        parse_changes("n_head=2, norm=batchnorm, n_layers=two, causal=maybe, d_model")
    text = str(err.value)
    assert "n_head" in text and "did you mean 'n_heads'" in text
    assert "batchnorm" in text and "layernorm" in text
    assert "n_layers='two'" in text and "causal='maybe'" in text
    assert "field=value" in text
    assert len(err.value.problems) == 5


def test_describe_and_unique_names():
    assert describe_changes({}) == "base"
    assert describe_changes({"n_kv_heads": 1, "head_dim": None, "causal": False}) == (
        "n_kv_heads=1, head_dim=auto, causal=false"
    )
    assert describe_changes(parse_changes(describe_changes({"n_kv_heads": 1}))) == "n_kv_heads=1"
    assert unique_name("a", ["a", "a (2)"]) == "a (3)" and unique_name("b", ["a"]) == "b"
    assert safe_dir_name("n_kv_heads=1, norm/post") == "n_kv_heads=1_norm_post"


def test_summary_row_takes_the_last_losses_and_the_calculator_figures():
    history = [
        {"step": 1, "train_loss": 3.0, "val_loss": None, "tokens_per_s": 100.0},
        {"step": 2, "train_loss": 2.5, "val_loss": 2.7, "tokens_per_s": 110.0},
        {"step": 3, "train_loss": 2.0, "val_loss": None, "tokens_per_s": 120.0},
    ]
    mqa = BASE.replace(n_kv_heads=1)
    row = summary_row(mqa, history, context=8)
    assert row["steps"] == 3 and row["train_loss"] == 2.0 and row["val_loss"] == 2.7
    assert row["tokens_per_s"] == 120.0
    model = init_model(mqa)
    assert row["params"] == sum(p.numel() for p in model.parameters())
    # KV cache per token: keys and values of every layer and KV head, fp32
    assert row["kv_cache_bytes_per_token"] == 2 * mqa.core.n_layers * 1 * mqa.d_head * 4
    assert row["flops_per_token"] == budget.flops(mqa, 8).forward_total_per_token
    assert summary_row(BASE, [])["train_loss"] is None


def test_loss_curves_keep_only_measured_validation_points():
    hist = [
        {"step": s, "train_loss": 4.0 - s, "val_loss": (1.0 if s % 2 == 0 else None)} for s in range(1, 6)
    ]
    c = loss_curves(hist)
    assert c["step"].tolist() == [1, 2, 3, 4, 5] and c["train_loss"].tolist() == [3, 2, 1, 0, -1]
    assert c["val_step"].tolist() == [2, 4] and c["val_loss"].tolist() == [1.0, 1.0]


def test_config_table_shows_only_the_fields_that_differ():
    rows = config_table({"a": BASE, "b": BASE.replace(n_kv_heads=2), "c": BASE.replace(norm="rmsnorm")})
    assert rows == [("n_kv_heads", [None, 2, None]), ("norm", ["layernorm", "layernorm", "rmsnorm"])]
    assert config_table({"a": BASE, "b": BASE.replace()}) == []


def test_metric_table_aligns_heads_and_fills_missing_ones_with_none():
    rng = np.random.default_rng(0)
    w_a = rng.random((2, 3, 5, 5))
    w_b = rng.random((1, 3, 5, 5))
    w_a /= w_a.sum(-1, keepdims=True)
    w_b /= w_b.sum(-1, keepdims=True)
    ma, mb = head_metrics(w_a, np.ones((5, 5), bool)), head_metrics(w_b, np.ones((5, 5), bool))
    rows = metric_table({"A": ma, "B": mb}, "sink")
    assert len(rows) == 6
    r = rows[1]
    assert (r["layer"], r["head"]) == (0, 1)
    assert r["A"] == pytest.approx(ma.sink[0, 1]) and r["B"] == pytest.approx(mb.sink[0, 1])
    assert r["delta"] == pytest.approx(mb.sink[0, 1] - ma.sink[0, 1])
    assert rows[4]["B"] is None and rows[4]["delta"] is None
    three = metric_table({"A": ma, "B": mb, "C": None}, "entropy")
    assert "delta" not in three[0] and three[0]["C"] is None


def test_difference_of_a_model_with_itself_is_exactly_zero_and_levels_are_symmetric():
    torch.manual_seed(0)
    model = init_model(BASE, seed=1)
    idx = torch.tensor([[1, 2, 3, 4, 5, 6]])
    a = run_with_trace(model, idx, kinds=("pattern",), dtype=torch.float16).stack("pattern")
    b = run_with_trace(model, idx, kinds=("pattern",), dtype=torch.float16).stack("pattern")
    d = weights_difference(a, b)
    assert d.shape == (2, 4, 6, 6) and not np.any(d)
    lo, hi = diff_levels(d)
    assert lo == -hi and hi > 0  # a zero difference still gets a usable (tiny) range
    other = run_with_trace(init_model(BASE, seed=2), idx, kinds=("pattern",)).stack("pattern")
    d2 = weights_difference(a, other)
    lo2, hi2 = diff_levels(d2)
    assert lo2 == -hi2 == -np.abs(d2).max()


def test_arrays_round_trip_exactly_and_bad_ones_are_refused():
    rng = np.random.default_rng(3)
    for dtype in (np.float16, np.float32, np.float64):
        a = rng.random((2, 3, 4, 4)).astype(dtype)
        b = decode_array(json.loads(json.dumps(encode_array(a))))
        assert b.dtype == dtype and b.shape == a.shape and np.array_equal(a, b)
    enc = encode_array(np.zeros((2, 2), np.float32))
    with pytest.raises(ComparisonError, match="bytes of data for shape"):
        decode_array({**enc, "shape": [3, 3]})
    with pytest.raises(ComparisonError, match="dtype"):
        decode_array({**enc, "dtype": "object"})
    with pytest.raises(ComparisonError, match="base64"):
        decode_array({**enc, "data": "not base64!"})


def _comparison() -> Comparison:
    rng = np.random.default_rng(1)
    w = rng.random((2, 4, 3, 3)).astype(np.float16)
    hist = [{"step": 1, "train_loss": 2.0, "val_loss": 2.1, "tokens_per_s": 50.0, "lr": 0.1}]
    runs = [
        RunRecord(
            "base",
            "variant",
            BASE.to_dict(),
            {},
            None,
            hist,
            summary_row(BASE, hist),
            AttentionFrame(prompt="abc", labels=["a", "b", "c"], weights=w),
        ),
        RunRecord(
            "mqa", "variant", BASE.replace(n_kv_heads=1).to_dict(), {"n_kv_heads": 1}, "runs/mqa", hist
        ),
    ]
    return Comparison(
        runs,
        title="MHA vs MQA",
        source="task:copy",
        settings={"steps": 3},
        prompt="abc",
        base_config=BASE.to_dict(),
    )


def test_comparison_file_round_trips(tmp_path):
    comp = _comparison()
    path = save_comparison(tmp_path / "x.comparison.json", comp)
    back = load_comparison(path)
    assert back.names() == ["base", "mqa"] and back.title == "MHA vs MQA" and back.prompt == "abc"
    assert back["mqa"].changes == {"n_kv_heads": 1} and back["mqa"].gpt_config().attention.n_kv_heads == 1
    assert back["base"].history == [{"step": 1, "train_loss": 2.0, "val_loss": 2.1, "tokens_per_s": 50.0}]
    assert back["base"].summary == comp["base"].summary
    att = back["base"].attention
    assert att.labels == ["a", "b", "c"] and np.array_equal(att.weights, comp["base"].attention.weights)
    assert back["mqa"].attention is None
    assert resolve_run_path(path, back["mqa"].path) == tmp_path / "runs" / "mqa"
    assert resolve_run_path(path, "/abs/dir").as_posix() == "/abs/dir"
    # saving again what was loaded gives the same file content (created time kept)
    again = save_comparison(tmp_path / "y.comparison.json", back)
    assert json.loads(again.read_text()) == json.loads(path.read_text())
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary file left behind


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(format="something-else"), "not a comparison file"),
        (lambda d: d.update(version=99), "newer than this program"),
        (lambda d: d["runs"][1].update(name="base"), "unique"),
        (lambda d: d["runs"][0].update(kind="magic"), "kind 'magic'"),
        (lambda d: d["runs"][0]["config"].update(n_head=3), "unknown option 'n_head'"),
        (lambda d: d["runs"][0]["attention"].update(tokens=["a"]), "do not fit 1 tokens"),
        (lambda d: d["runs"][0].update(history=[{"loss": 1}]), "history"),
    ],
)
def test_broken_files_give_one_clear_error(tmp_path, mutate, message):
    d = _comparison().to_dict()
    mutate(d)
    p = tmp_path / "bad.comparison.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ComparisonError, match=message):
        load_comparison(p)


def test_unreadable_files(tmp_path):
    with pytest.raises(ComparisonError, match="does not exist"):
        load_comparison(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ComparisonError, match="not valid JSON"):
        load_comparison(tmp_path / "x.json")
    (tmp_path / "deep.json").write_text("[" * 200_000)  # a hostile file: one line, no RecursionError
    with pytest.raises(ComparisonError, match="nested too deeply"):
        load_comparison(tmp_path / "deep.json")
    (tmp_path / "latin1.json").write_bytes('{"title": "café"}'.encode("latin-1"))
    with pytest.raises(ComparisonError, match="not UTF-8"):
        load_comparison(tmp_path / "latin1.json")


def test_the_attention_of_a_prompt_and_its_metrics():
    from model.compare.comparison import frame_metrics, prompt_attention
    from model.text.tokens import CharTokenizer

    tok = CharTokenizer("abcdefghij")
    cfg = BASE.replace(vocab_size=tok.vocab_size, context_length=8)
    model = init_model(cfg, seed=0)
    model.train()
    snap, metrics = prompt_attention(model, tok, "abcabcabcab?")  # 12 chars, context 8; '?' unknown
    assert model.training  # put back as it was
    assert snap.weights.shape == (2, 4, 8, 8) and snap.weights.dtype == np.float16
    assert len(snap.labels) == 8 and snap.labels[0] == "b"  # the last 8 tokens are kept
    np.testing.assert_allclose(snap.weights.astype(np.float32).sum(-1), 1.0, atol=5e-3)
    assert metrics.entropy.shape == (2, 4)
    again = frame_metrics(snap, causal=True)  # what a reopened file recomputes
    np.testing.assert_allclose(again.entropy, metrics.entropy)
    np.testing.assert_allclose(again.prev_token, metrics.prev_token)
