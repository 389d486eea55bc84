"""What the Compare tab writes (app/views/compare/words.py): the quick variant sets, the table
cells and field texts, the sentences under its pages."""

from __future__ import annotations

import numpy as np

from app.views.compare.words import (
    config_diff_note,
    describe_base,
    describe_config,
    diff_verdict,
    field_text,
    format_cell,
    pair_mismatch,
    quick_variants,
    summary_cells,
    visible_text,
)
from model.compare.tables import summary_row
from model.config import GPTConfig

BASE = GPTConfig(vocab_size=11, context_length=16, n_layers=2, d_model=16, n_heads=4)


def test_quick_variants_are_valid_variants_of_the_base():
    sets = quick_variants(BASE)  # 4 heads: MHA vs GQA vs MQA is offered
    labels = [label for label, _ in sets]
    assert labels[0] == "Pre-LN vs Post-LN" and "MHA vs GQA vs MQA (4, 2, 1)" in labels
    assert dict(sets)["4 heads vs 8"] == [
        ("4 heads", {"n_heads": 4, "n_kv_heads": None}),
        ("8 heads", {"n_heads": 8, "n_kv_heads": None}),
    ]
    for _label, variants in sets:
        for _name, changes in variants:
            BASE.replace(**changes).validate()
    three = quick_variants(BASE.replace(n_heads=2))  # 2 heads: no GQA set
    assert len(three) == len(sets) - 1 and not any("GQA" in label for label, _ in three)


def test_table_cells_and_field_texts():
    cfg = BASE.replace(n_kv_heads=None)
    assert field_text(cfg, "n_kv_heads") == "auto (4)" and field_text(cfg, "head_dim") == "auto (4)"
    assert field_text(cfg, "d_ff") == "auto (64)" and field_text(cfg, "causal") == "true"
    assert format_cell(None, "{:,}") == "–" and format_cell(1234, "{:,}") == "1,234"
    assert format_cell("n/a", "{:.4f}") == "n/a" and format_cell(3, None) == "3"
    row = summary_row(
        BASE, [{"step": 2, "train_loss": 1.5, "val_loss": None, "tokens_per_s": 99.6}], context=8
    )
    cells = summary_cells("a", "variant", row)
    assert cells[:6] == ["a", "variant", "2", "1.5000", "–", "100"]
    assert cells[7] == f"{row['flops_per_token']:,} (T = 8)" and cells[8].endswith(" B")
    assert visible_text("a\tb\nc") == "a⇥b⏎c"
    assert visible_text("x" * 100, limit=10) == "x" * 9 + "…"


def test_the_words_under_the_pages():
    assert "two or more" in config_diff_note(1, 0)
    n = len(GPTConfig.field_names())
    assert config_diff_note(2, 0) == f"All {n} config fields are equal in every run."
    assert config_diff_note(3, 2).startswith(f"Only the fields that differ: 2 of {n}")
    w = np.zeros((2, 4, 3, 3))
    assert pair_mismatch("a", w, list("xyz"), "b", w, list("xyz")) is None
    assert "different tokens" in pair_mismatch("a", w, list("xyz"), "b", w, list("xyq"))
    assert "a has 2×4 heads on 3 tokens, b 1×4 on 3" in pair_mismatch(
        "a", w, list("xyz"), "b", w[:1], list("xyz")
    )
    zero = diff_verdict("a", "b", w, np.zeros((2, 4)), 3)
    assert "on the same 3 tokens" in zero and "Every head attends exactly alike" in zero
    d = w.copy()
    d[1, 2, 0, 0] = 0.5
    tv = np.zeros((2, 4))
    tv[1, 2] = 0.25
    assert "layer 1, head 2 (total variation 0.250)" in diff_verdict("a", "b", d, tv, 3)
    assert "±0.5 " in diff_verdict("a", "b", d, tv, 3)
    base = describe_base(BASE.replace(n_kv_heads=2), "")
    assert "2 layers, d = 16, 4 heads, 2 K/V heads" in base and base.endswith("data: no data source yet.")
    assert describe_config(BASE).startswith("2 layers, d = 16, 4 heads (4 K/V)")
