"""The Budget tab: presets, typing into fields, every page drawn, side by side, checks and exports."""

from __future__ import annotations

import json
import math

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from model.budget import arithmetic as budget
from model.budget.exports import from_csv, from_markdown, markdown_cell, number
from model.budget.table import BUDGET_HEADER
from model.config import GPTConfig

TIMEOUT = 60_000

TINY = GPTConfig(vocab_size=13, context_length=16, n_layers=2, d_model=16, n_heads=4, n_kv_heads=2)


@pytest.fixture
def session(qtbot):
    from app.session.session import Session
    from app.shell.gui import make_app

    make_app()
    s = Session()
    yield s
    s.shutdown(timeout=30)


@pytest.fixture
def tab(qtbot, session):
    from app.views.budget.tab import BudgetTab

    t = BudgetTab(session)
    qtbot.addWidget(t)
    t.resize(1400, 900)
    t.show()
    return t


def _choose(tab, title: str) -> None:
    """Pick a preset in the combo box the way a user does (activated fires on a user choice)."""
    i = tab.preset_combo.findText(title)
    assert i > 0, title
    tab.preset_combo.setCurrentIndex(i)
    tab.preset_combo.activated.emit(i)


def _table_value(table, name: str, col: int = 3) -> str:
    """The cell in column ``col`` of the last row named ``name`` (summary rows follow components)."""
    for r in reversed(range(table.rowCount())):
        if table.item(r, 0).text() == name:
            return table.item(r, col).text()
    raise KeyError(name)


def test_llama2_7b_preset_shows_the_papers_total(tab):
    _choose(tab, "GPT-2 small")
    assert "124,439,808" in tab.total_label.text()
    _choose(tab, "Llama 2 7B")
    assert "6,738,415,616" in tab.total_label.text()
    t = tab.params_page.table
    assert _table_value(t, "total") == "6,738,415,616"
    # the source chapter's rows: attention and FFN per layer, all layers, embeddings + output, norms
    assert _table_value(t, "attention (per layer)", col=2) == "67,108,864"
    assert _table_value(t, "mlp (per layer)", col=2) == "135,266,304"
    assert _table_value(t, "all layers") == "6,476,005,376"
    assert _table_value(t, "embeddings + output") == "262,144,000"
    assert _table_value(t, "norms") == "266,240"
    assert _table_value(t, "attention Q", col=1) == "L·d·h·d_k"
    # the preset brings its training metadata: 2T tokens on A100s, and the paper's GPU-hours beside ours
    assert tab.settings().tokens == 2e12 and tab.settings().peak_tflops == 312.0
    cost = tab.cost_page.table
    reported = [
        cost.item(r, 2).text() for r in range(cost.rowCount()) if "reported" in cost.item(r, 0).text()
    ]
    assert reported and "184,320" in reported[0]


def test_typing_into_a_field_updates_the_totals(qtbot, tab):
    _choose(tab, "Llama 2 7B")
    spin = tab.editor.widgets["n_layers"]
    spin.selectAll()
    with qtbot.waitSignal(tab.recomputed, timeout=5000):
        qtbot.keyClicks(spin, "16")
    # 32 → 16 layers removes 16 blocks of 67,108,864 + 135,266,304 + 8,192 (two RMSNorms)
    assert "3,500,281,856" in tab.total_label.text()
    assert _table_value(tab.params_page.table, "total") == "3,500,281,856"
    assert "custom config" in tab.total_label.text() and "Llama" not in tab.total_label.text()
    # GQA: 8 KV heads shrink K and V and the KV cache fourfold
    tab.editor.set_field("n_kv_heads", 8)
    assert tab.report["params"]["total"] == budget.parameters(tab.editor.value()).total
    assert "4× smaller" in tab.kv_page.summary.text()
    assert len([c for c in tab.kv_page.ctx_curves.values() if c.isVisible()]) == 3  # this, MHA, MQA


def test_an_invalid_field_is_named_and_the_pages_wait(tab):
    tab.editor.set_field("n_kv_heads", 5)  # 32 heads are not a multiple of 5
    assert tab.report is None and not tab.figures_shown()
    assert "n_kv_heads" in tab.problem_label.text() and tab.problem_label.isVisibleTo(tab)
    assert "border" in tab.editor.widgets["n_kv_heads"].styleSheet()
    tab.editor.set_field("n_kv_heads", 4)
    assert tab.report is not None and tab.figures_shown() and not tab.problem_label.isVisibleTo(tab)
    tab.inputs.tokens_edit.setText("lots")
    assert "not a number of tokens" in tab.inputs.settings_error.text()
    assert tab.report is not None and "training" not in tab.report  # the rest still computes


def test_flops_page_marks_the_crossover_and_kv_cache_shows_the_gqa_saving(tab):
    _choose(tab, "Llama 2 70B")
    cfg = tab.editor.value()
    cross = budget.attention_crossover(cfg)
    assert tab.flops_page.cross_line.value() == pytest.approx(math.log10(cross))
    assert f"{cross:,.0f}" in tab.flops_page.cross_line.label.format
    _, y = tab.flops_page.curves["attention scores"].getData()
    _, y_mlp = tab.flops_page.curves["mlp"].getData()
    # left of the marked crossover the MLP dominates, right of it attention does
    assert y[0] < y_mlp[0] and y[-1] > y_mlp[-1]
    assert "8× smaller" in tab.kv_page.summary.text()
    tab.inputs.causal_check.setChecked(True)
    assert tab.flops_page.cross_line.value() == pytest.approx(math.log10(2 * cross))


def test_memory_page_highlights_the_chosen_precision(tab):
    tab.inputs.precision_combo.setCurrentText("fp32")
    t = tab.memory_page.table
    assert t.horizontalHeaderItem(1).text() == "fp32 ◀"
    n = tab.report["params"]["total"]
    assert t.item(1, 1).text() == budget.human_bytes(4 * n)  # fp32 weights: 4 bytes per parameter


def test_use_the_current_models_config(qtbot, session, tab, tiny_config):
    session.set_device("cpu")
    session.set_source("task:copy")
    session.set_config(tiny_config)
    session.build_model()
    qtbot.mouseClick(tab.current_button, Qt.MouseButton.LeftButton)
    assert tab.editor.value() == session.model.config
    assert f"{session.model.num_params():,}" in tab.total_label.text()


def test_side_by_side_highlights_differences_and_exports(tmp_path, tab):
    side = tab.side_page
    tab.page_tabs.setCurrentWidget(side)
    assert side.header[1:] == ["Llama 2 7B", "Mistral 7B", "Llama 3 8B"]
    labels = [r[0] for r in side.rows]
    kv_row = labels.index("KV heads h_kv")
    d_row = labels.index("width d")
    marked = set(side.differing_cells())
    assert (kv_row, 2) in marked and (kv_row, 3) in marked  # 8 KV heads vs Llama 2's 32
    assert (d_row, 2) not in marked  # all three are 4096 wide

    def colour(r, c):
        return side.table.item(r, c).background().color().name()

    assert colour(kv_row, 2) != colour(d_row, 2)
    before = len(side.columns)
    tab.editor.set_field("n_layers", 2)
    side.add_combo.setCurrentIndex(0)  # "the config being edited"
    side.add_button.click()
    assert len(side.columns) == before + 1 and side.rows[labels.index("layers L")][-1] == 2
    path = tab.export_table(tmp_path / "side.csv", side=True)
    header, rows = from_csv(path.read_text())
    assert header == side.header
    assert number(rows[labels.index("parameters, total")][1]) == 6_738_415_616


def test_budget_table_exports_round_trip(tmp_path, tab):
    header, rows = tab.budget_rows()
    assert header == BUDGET_HEADER
    csv_header, csv_rows = from_csv(tab.export_table(tmp_path / "b.csv").read_text())
    assert csv_header == header and len(csv_rows) == len(rows)
    for got, want in zip(csv_rows, rows, strict=True):
        assert got[:3] == [str(v) for v in want[:3]]
        assert number(got[3]) == want[3]  # exact: integers in full, floats with every digit
    md = tab.export_table(tmp_path / "b.md").read_text()
    assert md.startswith("# Budget: Llama 2 7B")
    md_header, md_rows = from_markdown(md)
    assert md_header == header
    assert md_rows == [[markdown_cell(v) for v in r] for r in rows]
    total = next(r for r in md_rows if r[1] == "total")
    assert total[3] == "6,738,415,616" and number(total[3]) == 6_738_415_616
    with pytest.raises(ValueError, match=r"\.csv or \.md"):
        tab.export_table(tmp_path / "b.txt")


def test_check_against_the_built_model_and_a_measured_speed(qtbot, tab):
    tab.set_config(TINY)
    page = tab.check_page
    with qtbot.waitSignal(page.paramsChecked, timeout=TIMEOUT) as got:
        page.count_button.click()
    result = got.args[0]
    assert not isinstance(result, Exception) and result.ok and result.device == "cpu"
    t = page.param_table
    assert _table_value(t, "total", col=2) == f"{budget.parameters(TINY).total:,}"
    assert all(t.item(r, 3).text() == "✓" for r in range(t.rowCount()))
    with qtbot.waitSignal(page.speedMeasured, timeout=TIMEOUT) as got:
        page.speed_button.click()
    r = got.args[0]
    assert not isinstance(r, Exception) and not r.scaled and r.tokens_per_s > 0
    assert _table_value(page.speed_table, "training tokens/s", col=1) == f"{r.tokens_per_s:,.0f}"


def test_the_budget_tab_fits_a_1280_by_760_window(qtbot, window_of_one_tab):
    win, tab, scroll = window_of_one_tab("budget", "app.views.budget.tab:BudgetTab")
    assert not any(d.isVisible() for d in win.docks.values())  # the docks make room for it
    assert tab.minimumSizeHint().width() <= scroll.contentsRect().width()
    for i in range(tab.page_tabs.count()):  # on every page
        tab.page_tabs.setCurrentIndex(i)
        assert tab.minimumSizeHint().width() <= scroll.contentsRect().width(), tab.page_tabs.tabText(i)
        qtbot.waitUntil(lambda: not scroll.horizontalScrollBar().isVisible(), timeout=5000)
        assert tab.width() <= scroll.viewport().width()


@pytest.mark.parametrize(
    "model_type, options", [("qwen3", {"head_dim": 12}), ("gpt_neox", {"rotary_pct": 0.5})]
)
def test_check_against_an_opened_family_model(qtbot, tmp_path, tab, write_hf_family, model_type, options):
    """A Qwen3 (QK-norm weights) or Pythia-shaped (parallel, partial rotary) model opened from a Hugging
    Face folder: the form keeps every field, and the check counts exactly its parameters."""
    from model.io.pretrained import open_model

    write_hf_family(tmp_path, model_type, **options)
    ckpt = open_model(tmp_path)
    tab.set_config(ckpt.config)
    assert tab.editor.value() == ckpt.config
    assert f"{ckpt.model.num_params():,}" in tab.total_label.text()
    page = tab.check_page
    with qtbot.waitSignal(page.paramsChecked, timeout=TIMEOUT) as got:
        page.count_button.click()
    result = got.args[0]
    assert not isinstance(result, Exception) and result.ok
    assert result.measured_total == ckpt.model.num_params() == budget.parameters(ckpt.config).total
    assert all(page.param_table.item(r, 3).text() == "✓" for r in range(page.param_table.rowCount()))
    if ckpt.config.n_rep > 1:  # the KV-cache figure of the opened model shows what GQA saves
        assert f"{ckpt.config.n_rep}× smaller" in tab.kv_page.summary.text()


@pytest.mark.parametrize(
    ("key", "plots"), [("flops", ("plot",)), ("kv-cache", ("ctx_plot", "batch_plot")), ("memory", ("plot",))]
)
def test_budget_legends_are_rows_above_the_plots_never_on_the_data(qtbot, tab, key, plots):
    _choose(tab, "Llama 2 7B")
    page = tab.show_page(key)
    for name in plots:
        item = getattr(page, name).getPlotItem()
        legend = item.legend
        qtbot.waitUntil(
            lambda legend=legend: legend.items and legend.sceneBoundingRect().height() > 0, timeout=5000
        )
        data = item.getViewBox().sceneBoundingRect()
        assert not legend.sceneBoundingRect().intersects(data)  # pyqtgraph's floated over the curves


@pytest.mark.parametrize("title", ["DeepSeek-V3", "Mixtral 8x7B", "Mistral 7B", "gpt-oss-20b", "Gemma 2 9B"])
def test_todays_presets_show_total_active_and_their_cache(tab, title):
    """Mixtures of experts say what a token uses; latent attention's cache is its own formula; a model
    whose windows keep attention below the MLP says so instead of crashing on a crossover."""
    _choose(tab, title)
    assert tab.report is not None and tab.figures_shown()
    cfg = tab.editor.value()
    text = tab.total_label.text()
    p = budget.parameters(cfg)
    assert f"{p.total:,}" in text
    assert ("active per token" in text) == bool(cfg.feed_forward.n_experts)
    summary = tab.kv_page.summary.text()
    assert ("L·(r + d_R)" in summary) == cfg.mla


def test_open_config_reads_a_hugging_face_folder(tab, tmp_path, write_hf_family):
    from model.io.hf.families import family_config

    folder = tmp_path / "gemma"
    write_hf_family(folder, "gemma", hidden_size=64, intermediate_size=96, head_dim=32)
    hf = json.loads((folder / "config.json").read_text())
    assert tab.open_config(str(folder))
    assert tab.report["params"]["total"] == budget.parameters(family_config(hf)).total
    assert not tab.problem_label.isVisibleTo(tab)


def test_every_budget_view_file_stays_under_500_lines():
    """The project's size rule, for the tab's own package (its pages were one file of 506 lines)."""
    from pathlib import Path

    import app.views.budget as package

    files = sorted(Path(package.__file__).parent.glob("*.py"))
    assert len(files) > 5
    assert {f.name: n for f in files if (n := len(f.read_text(encoding="utf-8").splitlines())) >= 500} == {}


# ---- issue 38.7: a number typed out of range into the Budget tab (or the Model panel) stays as typed,
# outlined, with one line naming it, and nothing is computed from the value behind it: never rewritten
# (−5 → 5, 100000000000 → 10,000) or ignored (0)
def _type(qtbot, box, text: str) -> None:
    """Select the box's text and type ``text`` as a user does, then leave it with Return."""
    box.setFocus()
    box.lineEdit().selectAll()
    qtbot.keyClicks(box.lineEdit(), text)
    qtbot.keyClick(box.lineEdit(), Qt.Key.Key_Return)


@pytest.mark.parametrize("typed", ["-5", "0", "100000000000"])
def test_a_layer_count_out_of_range_is_kept_and_named(qtbot, tab, typed):
    _choose(tab, "Llama 2 7B")
    box = tab.editor.widgets["n_layers"]
    _type(qtbot, box, typed)
    box.clearFocus()  # leaving the field puts no old value back
    assert box.text() == typed
    line = f"n_layers={typed} must be a whole number from 1 to 10,000"
    assert line in tab.problem_label.text() and tab.problem_label.isVisibleTo(tab)
    assert line in tab.editor.error_label.text()
    assert "border" in box.styleSheet()
    # nothing is computed from the last valid value (32) behind the typed one
    assert tab.report is None and not tab.figures_shown()
    _type(qtbot, box, "16")
    assert box.text() == "16" and tab.report is not None
    assert tab.report["config"]["n_layers"] == 16 and not tab.problem_label.isVisibleTo(tab)
    assert "border" not in box.styleSheet()


def test_a_setting_out_of_range_is_kept_and_named(qtbot, tab):
    _choose(tab, "Llama 2 7B")
    batch = tab.inputs.batch_spin
    _type(qtbot, batch, "0")
    assert batch.text() == "0"
    line = "Batch B=0 must be a whole number from 1 to 1,000,000"
    assert line in tab.inputs.settings_error.text() and line in tab.problem_label.text()
    assert tab.report is None and "border" in batch.styleSheet()
    mfu = tab.inputs.mfu_spin
    _type(qtbot, batch, "8")
    tab.page_tabs.setCurrentWidget(tab.cost_page)  # where the cost inputs are
    _type(qtbot, mfu, "250")
    assert "Utilisation (MFU, %)=250 must be a number from 0.1 to 100" in tab.problem_label.text()
    _type(qtbot, mfu, "50")
    assert tab.report is not None, tab.problem_label.text()
    assert tab.settings().batch == 8 and tab.settings().mfu == 0.5


def test_the_model_panel_keeps_a_typed_value_and_refuses_it(qtbot):
    from app.panels.model import ConfigPanel
    from app.shell.gui import make_app

    make_app()
    panel = ConfigPanel()
    qtbot.addWidget(panel)
    panel.show()
    box = panel.form.widgets["n_layers"]
    _type(qtbot, box, "-5")
    assert box.text() == "-5" and not panel.form.valid
    assert "n_layers=-5 must be a whole number from 1" in panel.form.error_label.text()


# ---- issue 53.11: the header names what the values are; a half-typed value never shows
def test_the_header_names_the_preset_the_values_equal(tab):
    """GPT-2 small edited field by field into Llama 2 7B is Llama 2 7B (with the paper's figures),
    not "GPT-2 small (edited)"; one more change and it is a custom config."""
    from model.budget import presets

    _choose(tab, "GPT-2 small")
    llama = presets.get("llama2-7b")
    for name, value in llama.gpt_config().to_dict().items():
        if name in tab.editor.widgets:
            tab.editor.set_field(name, value)
    assert tab.editor.value().to_dict() == llama.gpt_config().to_dict()
    head = tab.total_label.text()
    assert "<b>Llama 2 7B</b>" in head and "GPT-2" not in head and "edited" not in head
    assert tab.preset_combo.currentText() == "Llama 2 7B" and "preset" in tab.report
    tab.editor.set_field("d_ff", 11000)
    assert "<b>custom config</b>" in tab.total_label.text() and tab.preset_combo.currentIndex() == 0


def _colours(widget) -> int:
    """How many pixels of ``widget`` as drawn are not a shade of grey (r, g, b more than 24 apart)."""
    image = widget.grab().toImage()
    count = 0
    for y in range(0, image.height(), 3):
        for x in range(0, image.width(), 3):
            c = image.pixelColor(x, y)
            count += max(c.red(), c.green(), c.blue()) - min(c.red(), c.green(), c.blue()) > 24
    return count


def test_a_half_typed_value_shows_the_last_valid_budget_greyed(qtbot, tab):
    """Typing 999999999999 into V passes 9,999,999 (valid) on the way to an invalid number: while it
    is invalid every page shows the last budget entered whole (Llama 2 7B, V = 32,000), greyed,
    plots and coloured rows too, under a line that names it."""
    _choose(tab, "Llama 2 7B")
    total = tab.report["params"]["total"]
    flops = tab.show_page("flops")
    qtbot.waitUntil(lambda: _colours(flops.plot) > 0)  # in colour while valid
    box = tab.editor.widgets["vocab_size"]
    box.setFocus()
    box.lineEdit().selectAll()
    qtbot.keyClicks(box.lineEdit(), "999999999999")  # still in the box: no Return, no focus out
    assert "vocab_size=999999999999 must be" in tab.problem_label.text()
    assert tab.report is None and not tab.figures_shown()
    assert _table_value(tab.params_page.table, "total") == f"{total:,}"  # Llama's, not V = 9,999,999's
    assert f"{total:,}" in tab.total_label.text()
    stale = tab.stale_label
    assert stale.isVisibleTo(tab) and "last valid config: Llama 2 7B" in stale.text()
    assert "V = 32,000" in stale.text()
    inputs = set(tab.inputs.widgets())
    for key in ("flops", "parameters", "kv-cache", "memory", "cost"):
        page = tab.show_page(key)
        figures = [
            w
            for w in page.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
            if w.isVisible() and w not in inputs
        ]
        assert figures and all(_colours(w) == 0 for w in figures), key  # tables, rows, plots: grey
    box.lineEdit().selectAll()
    qtbot.keyClicks(box.lineEdit(), "50000")
    qtbot.keyClick(box.lineEdit(), Qt.Key.Key_Return)
    assert tab.report is not None and not stale.isVisibleTo(tab)
    assert tab.report["params"]["total"] == budget.parameters(tab.editor.value()).total != total
    box.lineEdit().selectAll()  # entered with Return: now the last valid config
    qtbot.keyClicks(box.lineEdit(), "999999999999")
    assert "V = 50,000" in stale.text() and stale.isVisibleTo(tab)
