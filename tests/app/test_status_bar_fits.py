"""The status bar at 1024×768 with a model whose origin is long (a GGUF file: its name, quant types
and tokenizer): the origin gives way, shown as far as it fits and ending in "…", the whole of it in
its tooltip, and the device, parameters, step and pace beside it stay whole."""

from __future__ import annotations

from tests.app.fit_probe import fit_problems


def test_a_long_origin_is_elided_and_the_counts_stay_whole(qtbot, window_of_one_tab):
    win, _tab, _scroll = window_of_one_tab("budget", "app.views.budget.tab:BudgetTab", (1024, 718))
    line = win.status_line
    long = "Model: " + " · ".join(["SmolLM2 135M (GGUF)", "quantized weights Q4_1 (79%), Q8_0 (21%)"] * 6)
    line.origin.setText(long)
    win.statusBar().clearMessage()
    qtbot.waitUntil(lambda: line.origin.isVisible() and line.tps.isVisible(), timeout=5000)
    qtbot.waitUntil(lambda: line.origin.shown_text().endswith("…"), timeout=5000)
    shown = line.origin.shown_text()
    assert long.startswith(shown[:-1]) and len(shown) < len(long)
    assert line.origin.text() == long and long in line.origin.toolTip()
    bar = [p for p in fit_problems(win) if "QLabel" in p or "ElidedLabel" in p]
    assert bar == []
    for label in (line.device, line.params, line.step, line.tps):  # the counts: whole
        assert label.width() >= label.fontMetrics().horizontalAdvance(label.text())
    # a short origin shows whole, and the tooltip is only what it adds
    line.origin.setText("Model: starter model")
    qtbot.waitUntil(lambda: line.origin.shown_text() == "Model: starter model", timeout=5000)
