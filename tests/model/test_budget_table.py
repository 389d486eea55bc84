"""The one budget table: text, CSV and Markdown render the same rows; settings; reading exports back."""

from __future__ import annotations

import pytest

from model.budget import arithmetic as budget
from model.budget import presets
from model.budget.exports import from_csv, from_markdown, markdown_cell, number, to_csv, to_markdown
from model.budget.table import (
    BUDGET_HEADER,
    COST,
    PARAMETERS,
    BudgetSettings,
    budget_table,
    display_value,
    parse_quantity,
    render_text,
    section,
    table_cells,
)


def _report(name: str = "llama2-7b", **kw):
    p = presets.get(name)
    rep = budget.report(p.gpt_config(), title=p.title, **kw)
    rep["preset"] = p.to_dict()
    return rep


def test_text_table_shows_formulas_and_counts():  # moved from test_budget.py with render_text
    text = render_text(budget.report(presets.get("llama2-7b").gpt_config(), tokens=2e12, peak_flops=312e12))
    for needle in ("L·3·d·d_ff", "135,266,304", "6,738,415,616", "2.00 GiB", "GPU-hours"):
        assert needle in text
    assert "position embedding" not in text  # a zero row is not shown


def test_text_csv_and_markdown_render_the_same_rows():
    rep = _report(tokens=2e12, peak_flops=312e12, gpus=2048, seq_len=4096)
    rows = budget_table(rep)
    cells = table_cells(rows)
    assert all(len(c) == len(BUDGET_HEADER) for c in cells)
    # CSV: every row, exact
    header, csv_rows = from_csv(to_csv(BUDGET_HEADER, cells))
    assert header == BUDGET_HEADER and len(csv_rows) == len(rows)
    for got, r in zip(csv_rows, rows, strict=True):
        assert got[:3] == [r.section, r.quantity, r.formula] and got[4] == r.unit
        assert number(got[3]) == r.value
    # Markdown: every row, as the table writes it
    md_header, md_rows = from_markdown(to_markdown(BUDGET_HEADER, cells))
    assert md_header == BUDGET_HEADER
    assert md_rows == [[markdown_cell(v) for v in c] for c in cells]
    # text: every row but a zero parameter count, its quantity and its value as displayed
    text = render_text(rep)
    lines = text.splitlines()
    shown = [r for r in rows if r.value or r.section != PARAMETERS]
    for r in shown:
        value = f"{r.value:,}" if r.section == PARAMETERS else display_value(r)
        assert any(r.quantity in ln and value in ln for ln in lines), (r.quantity, value)
    assert "position embedding" not in text and any(r.quantity == "position embedding" for r in rows)
    assert "2,048 GPUs" in text and "reported for Llama 2 7B" in text


def test_the_cost_section_counts_both_ways_and_quotes_the_authors():
    rep = _report(tokens=2e12, peak_flops=312e12)
    cost = {r.quantity: r for r in section(budget_table(rep), COST)}
    cfg = presets.get("llama2-7b").gpt_config()
    assert cost["compute"].value == budget.training_cost(cfg, 2e12).flops
    matmul = budget.training_cost(cfg, 2e12, basis="matmul", seq_len=4096).flops
    assert cost["compute, matmuls"].value == pytest.approx(matmul, rel=1e-12)
    assert cost["GPU-hours"].value == pytest.approx(rep["training"]["gpu_hours"])
    reported = cost["reported for Llama 2 7B: GPU-hours"]
    assert reported.value == 184_320 and "184,320" in display_value(reported, with_unit=True)
    assert "GPU-hours" in display_value(reported, with_unit=True)
    assert display_value(cost["peak per device"]) == "312 TFLOP/s"
    assert COST not in {r.section for r in budget_table(_report())}  # no tokens: no cost section


def test_settings_give_the_report_and_name_their_problems():
    cfg = presets.get("gpt2").gpt_config()
    s = BudgetSettings(seq_len=None, batch=4, tokens=None)
    rep = s.report(cfg, "GPT-2")
    assert rep["kv_cache"]["seq_len"] == cfg.core.context_length and rep["kv_cache"]["batch"] == 4
    assert "training" not in rep
    assert any(p.startswith("mfu=") for p in BudgetSettings(mfu=2.0).problems(cfg))


def test_parse_quantity():  # moved from test_budget_tab.py with parse_quantity
    assert parse_quantity("2T") == 2e12 and parse_quantity("300B") == 3e11
    assert parse_quantity("1.5e12") == 1.5e12 and parse_quantity("15,000,000") == 1.5e7
    with pytest.raises(ValueError):
        parse_quantity("-3B")
