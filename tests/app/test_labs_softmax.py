"""Softmax scaling lab: the theory table shows the sampled numbers of model/ (std ≈ √d_k), the model
page draws model_saturation, and the scaled-vs-unscaled comparison runs and stops."""

import math

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel

from model.interp.analysis.saturation import model_saturation
from model.interp.analysis.scaling_run import LEVEL, final_loss, scaling_run_summary
from model.interp.analysis.softmax_theory import sample_logits, softmax_stats
from model.interp.prompt import encode_prompt
from model.interp.trace import run_with_trace


@pytest.fixture
def theory(labs, qtbot, wait_results):
    tab, _ = labs
    page = tab.show_page("softmax-theory")
    if "curves" not in page.results:  # sampled once per module, over 16 keys a row to keep it quick
        wait_results(qtbot, page, "curves", lambda: page.n_keys.setValue(16))
    return page


@pytest.mark.parametrize("d_k, std", [(64, 8.0), (128, 11.3)])
def test_theory_table_shows_sqrt_dk_and_saturation(theory, qtbot, d_k, std, wait_results):
    page = theory
    page.dk.setValue(d_k)
    wait_results(qtbot, page, "point", page._compute_point)
    assert page.slider.value() == round(10 * math.log2(d_k))
    assert float(page.table_text(0, 1).split()[0]) == pytest.approx(std, rel=0.01)  # unscaled: ≈ √d_k ...
    assert f"({math.sqrt(d_k):.2f})" in page.table_text(0, 1)  # ... next to the theory
    assert page.table_text(1, 1).startswith("1.0")  # scaled: 1
    ref_un = softmax_stats(sample_logits(d_k, "unscaled", n_keys=16, n_rows=512))
    ref_sc = softmax_stats(sample_logits(d_k, "scaled", n_keys=16, n_rows=512))
    assert page.table_text(0, 2) == f"{ref_un.max_weight:.3f}"
    assert page.table_text(1, 3) == f"{ref_sc.entropy:.3f}"
    assert ref_un.max_weight > 0.6 > ref_sc.max_weight  # the unscaled rows saturate
    assert page.table_text(4, 2) == page.table_text(1, 2)  # scale baked into init = scaled, at init
    assert page.std_plot.marker is not None and page.std_plot.marker.value() == pytest.approx(math.log10(d_k))


def test_default_dk_shows_the_vanishing_gradient_and_says_what_it_shows(labs, qtbot, wait_results):
    """At the page's default d_k (the chapters' 128) the unscaled softmax's mean Jacobian is below the
    scaled one's and rows have vanished; the notice quotes the very numbers of the table."""
    from app.views.labs.softmax import SoftmaxTheoryPage

    _, session = labs
    page = SoftmaxTheoryPage(session)  # a fresh page: its defaults, not a neighbour test's settings
    qtbot.addWidget(page)
    wait_results(qtbot, page, "point", page._compute_point)
    _, stats, _, _ = page.results["point"]
    un, sc = stats["unscaled"], stats["scaled"]
    assert un.jacobian_norm < sc.jacobian_norm and un.vanished > 0.2 > sc.vanished
    notice = page.header.findChild(QLabel, "labNotice").text()
    for row in (0, 1):  # unscaled, scaled
        assert page.table_text(row, 4) in notice  # ‖J‖ as the table shows it
        assert page.table_text(row, 5).split()[0] in notice  # the share of vanished rows
    assert "vanishes row by row" in notice and "still" not in notice
    assert page.notice in notice  # Help's copy says the same


def test_slider_and_curves(theory, qtbot, wait_results):
    page = theory
    wait_results(qtbot, page, "point", lambda: page.slider.setValue(30))  # 2^3
    assert page.dk.value() == 8
    curve = page.std_plot.curves["unscaled"]  # xData/yData: the values given, before the log axes
    assert np.allclose(curve.yData, np.sqrt(curve.xData), rtol=0.1)  # the unscaled std follows √d_k
    assert np.allclose(page.std_plot.curves["scaled"].yData, 1.0, rtol=0.1)
    ent = page.ent_plot.curves["unscaled"].yData
    assert ent[0] > 2.3 > 0.5 > ent[-1]  # from nearly uniform (ln 16 = 2.77) to nearly one-hot


def test_model_page_draws_model_saturation(labs, qtbot, wait_results):
    tab, session = labs
    page = tab.show_page("softmax-model")
    s = wait_results(qtbot, page, "saturation")
    limit = min(32, page.tokens.value())
    prompt = encode_prompt(session.tokenizer, session.probe_prompt, limit, keep="first", errors="replace")
    ids = list(prompt.ids)
    ref = model_saturation(run_with_trace(session.model, ids, kinds=("pattern", "scores_raw", "scores")))
    assert np.allclose(s.entropy_model, ref.entropy_model)
    assert np.allclose(page.entropy_bars.values["model's scale"], ref.entropy_model.ravel())
    assert np.allclose(page.max_bars.values["scale removed"], ref.max_weight_unscaled.ravel())
    assert page.entropy_bars.categories == ["L0H0", "L0H1", "L1H0", "L1H1"]
    # 1/√d_k < 1 makes the softmax flatter: without it every head is at least as peaked
    assert np.all(ref.max_weight_unscaled >= ref.max_weight_model - 1e-9)
    # the spread of the scores, raw and as the softmax sees them (√d_k apart), against the dashed 1
    assert np.allclose(page.spread_bars.values["what the softmax compares"], ref.spread.scaled.ravel())
    np.testing.assert_allclose(
        ref.spread.raw / ref.spread.scaled, math.sqrt(session.model.config.d_head), rtol=1e-4
    )
    assert page.spread_bars.reference is not None and page.spread_bars.reference.value() == 1.0
    assert f"{ref.spread.median_scaled:.2f} as the softmax sees it" in page.message.text()


def test_scaled_vs_unscaled_training_runs(labs, qtbot):
    """A short run on the Data panel's data: both variants train and are probed, and the notice then
    says what this run measured (its words follow its numbers, whichever way they came out)."""
    tab, session = labs
    page = tab.show_page("softmax-training")
    page.data.setCurrentIndex(page.data.findData(""))  # the session's own data
    for w, v in (
        (page.head_dim, 32),
        (page.d_model, 16),
        (page.n_layers, 1),
        (page.steps, 2),
        (page.seq_len, 16),
        (page.batch, 2),
    ):
        w.setValue(v)
    with qtbot.waitSignal(page.panel.finished, timeout=60000) as blocker:
        page.panel.start()
    assert blocker.args[0] == "done"
    assert set(page.panel.losses) == {"scaled", "unscaled"}
    steps, values = page.panel.probes["unscaled"]
    assert steps == [0, 1, 2] and all(0 < v <= 1 for v in values)
    assert set(page.panel.probe_plot.curves) == {"scaled", "unscaled"}
    outcome = page.outcome()
    assert outcome is not None and outcome.vocab_size == session.tokenizer.vocab_size
    assert outcome.loss_unscaled == final_loss(page.panel.losses["unscaled"][1])
    notice = page.header.findChild(QLabel, "labNotice").text()
    assert scaling_run_summary(outcome) in notice and page.notice in notice


@pytest.mark.slow
def test_the_default_comparison_learns_and_shows_the_effect(labs, qtbot):
    """The page's defaults (its own task, its head, rate and batch), cut to 100 steps to stay quick:
    both models learn — the scaled one ends well below ln V — and the unscaled one is behind and
    attends more one-hot, as the notice then says."""
    tab, _ = labs
    page = tab.show_page("softmax-training")
    fresh = type(page)(page.session)  # the defaults, whatever another test set on the tab's page
    qtbot.addWidget(fresh)
    fresh.steps.setValue(100)
    with qtbot.waitSignal(fresh.panel.finished, timeout=120000) as blocker:
        fresh.panel.start()
    assert blocker.args[0] == "done"
    o = fresh.outcome()
    assert o is not None
    assert o.loss_scaled < o.ln_vocab - 1.0  # learned: over a nat below a uniform guess
    assert o.loss_unscaled < o.ln_vocab - LEVEL and o.gap > LEVEL  # learned too, and is behind
    assert o.max_weight_unscaled > o.max_weight_scaled
    notice = fresh.header.findChild(QLabel, "labNotice").text()
    assert "nats behind, as the theory says" in notice and "it learned nothing" not in notice


def test_a_lab_comparison_is_a_job_that_counts_its_steps_and_stop_cancels(labs, qtbot):
    """The lab's training goes through the window's job model: on the board while it runs, how far it is,
    and Stop is the job's Cancel (it ends within a second, between two steps)."""
    tab, session = labs
    page = tab.show_page("softmax-training")
    page.data.setCurrentIndex(page.data.findData(""))
    for w, v in (
        (page.head_dim, 32),
        (page.d_model, 16),
        (page.n_layers, 1),
        (page.seq_len, 16),
        (page.batch, 2),
    ):
        w.setValue(v)
    page.steps.setValue(page.steps.maximum())
    page.panel.start()
    job = session.jobs.get(page.panel.job_key)
    assert job is not None and job.active and "2 variants" in job.title
    qtbot.waitUntil(lambda: job.snapshot().done >= 2, timeout=60000)
    assert f"of {page.steps.maximum()}" in job.describe()
    with qtbot.waitSignal(page.panel.finished, timeout=1000) as ended:
        page.panel.stop_button.click()
    assert ended.args[0] == "stopped" and job.state == "cancelled"
