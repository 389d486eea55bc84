"""The Features tab: an SAE trained in the background (progress, live curves, Cancel, Resume),
evaluated and read feature by feature, opened on request, and a hostile folder refused in one line."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

#: ms: the machine's two cores are shared with other test runs
TIMEOUT = 60_000


@pytest.fixture
def features_tab(qtbot, attention_session, tmp_path, monkeypatch):
    """The Features tab on a small model (2 layers × 2 heads, d 32), its SAE place under tmp_path."""
    from app.views.features.tab import FeaturesTab

    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))
    tab = FeaturesTab(attention_session)
    qtbot.addWidget(tab)
    tab.resize(1200, 760)
    tab.show()
    yield tab
    tab.shutdown()
    attention_session.compute.shutdown()


def _sae_folder(session, folder, *, seed=0, d_sae=128, k=8):
    """An SAE on the model's layer-1 z, made by hand and written in SAELens's format."""
    from model.interp.sae import SAEConfig, Site, SparseAutoencoder
    from model.interp.sae.format import save_sae

    site = Site("z", 1)
    sae = SparseAutoencoder(SAEConfig(site, site.d_in(session.model.config), d_sae, k=k))
    sae.reset_parameters(seed=seed)
    save_sae(sae, folder)
    return folder


def test_training_shows_progress_and_growing_curves_cancel_stops_within_a_second_and_resume_ends_it(
    qtbot, features_tab, tmp_path
):
    from app.session.messages import SAEChosen
    from app.views.features.training import TRAIN_JOB
    from model.interp.sae.format import load_sae

    tab, s = features_tab, features_tab.session
    heard: list[SAEChosen] = []
    s.hub.subscribe(SAEChosen, heard.append)
    page = tab.train_page
    page.site_box.setCurrentIndex(page.site_box.findData("z"))
    page.layer_spin.setValue(1)
    page.expansion_spin.setValue(4)
    page.tokens_spin.setValue(200_000)
    page.folder_edit.setText(str(tmp_path / "run"))
    assert "128 features" in page.width_label.text()  # 4 × d_in 32
    assert page.start(resume=False)
    qtbot.waitUntil(lambda: page.curve_points("mse") >= 3 and page.job_bar.isVisible(), timeout=TIMEOUT)
    job = s.jobs.get(TRAIN_JOB)
    assert job is not None and job.state == "running" and "tokens" in job.how_far()
    grown = page.curve_points("fve")
    qtbot.waitUntil(lambda: page.curve_points("fve") > grown, timeout=TIMEOUT)

    t0 = time.monotonic()
    page.job_bar.cancel_button.click()
    qtbot.waitUntil(lambda: not page.running, timeout=5000)
    assert time.monotonic() - t0 < 1.0
    qtbot.waitUntil(lambda: s.jobs.get(TRAIN_JOB).state == "cancelled", timeout=5000)
    qtbot.waitUntil(lambda: page.status.text().startswith("Stopped after"), timeout=5000)  # every step drawn
    stopped_at = page.curve_points("mse")
    assert stopped_at < 200_000 // 4096 and page.resume_button.isEnabled() and not heard

    page.tokens_spin.setValue(5_000)  # Resume takes the stopped run's settings, not the form's
    with qtbot.waitSignal(page.trained, timeout=TIMEOUT * 3):
        assert page.start(resume=True)
    assert page.tokens_spin.value() == 200_000
    steps = page.loop.trained.steps
    assert page.loop.trained.resumed_at == stopped_at and steps * 4096 >= 200_000
    assert page.curve_points("mse") == steps  # every step's point, before the stop and after
    assert heard == [SAEChosen(str(tmp_path / "run"))] and tab.state.folder == str(tmp_path / "run")
    sae = load_sae(tmp_path / "run", model_config=s.model.config)
    assert sae.config.d_sae == 128 and torch.equal(sae.W_dec, tab.state.sae.W_dec)


def test_evaluate_fills_the_table_with_the_models_numbers_and_greys_them_for_another_model(
    qtbot, features_tab, tmp_path
):
    from app.views.features.eval_page import ROWS
    from model.interp.sae.evaluate import evaluate_sae

    tab, s = features_tab, features_tab.session
    folder = _sae_folder(s, tmp_path / "hand")
    assert tab.open_folder(folder)
    page = tab.eval_page
    page.tokens_spin.setValue(2048)
    assert page.evaluate()
    qtbot.waitUntil(lambda: tab.state.current("eval"), timeout=TIMEOUT)
    seq_len = min(128, s.model.config.core.context_length)
    want = evaluate_sae(
        s.model, s.tokenizer, tab.state.sae, corpus=page.corpus(), n_tokens=2048, seq_len=seq_len
    )
    for field, _, fmt, _ in ROWS:
        assert page.value_text(field) == fmt.format(getattr(want, field)), field
    assert not page.job_bar.stale

    s.build_model(seed=7)  # another model: the evaluation shown is not of it
    qtbot.waitUntil(lambda: page.job_bar.stale, timeout=5000)
    assert "evaluation of" in page.job_bar.stale_note and not tab.state.current("eval")


def _top_feature(qtbot, tab, prompts=24):
    page = tab.features_page
    page.prompts_spin.setValue(prompts)
    page.tokens_spin.setValue(32)
    assert page.read_features()
    qtbot.waitUntil(lambda: tab.state.current("list"), timeout=TIMEOUT)
    stats = tab.state.get("list").value.stats
    return int(np.argmax(stats.max_activation)), tab.state.get("list").value


def test_selecting_a_feature_shows_its_dashboard_with_the_top_examples_activating_token_highlighted(
    qtbot, features_tab, tmp_path
):
    from model.interp.sae.site import site_activations

    tab, s = features_tab, features_tab.session
    assert tab.open_folder(_sae_folder(s, tmp_path / "hand"))
    feature, fl = _top_feature(qtbot, tab)
    assert fl.stats.max_activation[feature] > 0
    page = tab.features_page
    page.table.select_feature(feature)
    qtbot.waitUntil(lambda: tab.state.current("dashboard"), timeout=TIMEOUT)
    shown = page.dashboard.data.dashboard
    assert shown.feature == feature
    value, n, position, _ = shown.examples[0]
    ids = fl.stats.prompt_ids(n, fl.source)
    skip = len(fl.stats.prefix)
    with torch.no_grad():
        f = tab.state.sae.encode(site_activations(s.model, tab.state.sae.config.site, ids[None]))[
            0, :, feature
        ]
    assert int(torch.argmax(f[skip:])) + skip == position
    assert float(f[position]) == pytest.approx(value, rel=1e-5)
    from model.text.tokens import visible

    assert page.dashboard.highlighted(0) == visible(s.tokenizer.token_strings([int(ids[position])])[0])
    assert "background" in page.dashboard.examples_view.toHtml()
    assert page.dashboard.sources_view.toPlainText().count("L1H") == 2  # both writing heads
    assert not page.job_bar.stale

    assert tab.open_folder(_sae_folder(s, tmp_path / "other", seed=5))  # another SAE: both are old now
    assert page.job_bar.stale and str(tmp_path / "hand") in page.job_bar.stale_note
    qtbot.waitUntil(lambda: page.job_bar.greyed, timeout=5000)


def test_open_feature_opens_the_folder_and_shows_that_features_dashboard(
    qtbot, features_tab, tmp_path, monkeypatch
):
    """The folder asked for is opened (its name shown with the home folder as ``~``, the whole path in
    the tooltip) and the feature's dashboard drawn."""
    from pathlib import Path

    from app.session.messages import OpenFeature, ask

    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    tab, s = features_tab, features_tab.session
    first, second = _sae_folder(s, tmp_path / "a", seed=0), _sae_folder(s, tmp_path / "b", seed=1)
    assert tab.open_folder(first)
    assert tab.folder_label.text() == "~/a" and tab.folder_label.toolTip() == str(first)
    assert ask(s.hub, OpenFeature(str(second), 5))
    assert tab.state.folder == str(second) and tab.pages.currentWidget() is tab.features_page
    qtbot.waitUntil(
        lambda: tab.state.current("dashboard") and tab.features_page.dashboard.data.dashboard.feature == 5,
        timeout=TIMEOUT,
    )
    assert tab.features_page.table.selected_feature() == 5


@pytest.mark.parametrize("harm", ["d_in", "nan", "huge", "not json"])
def test_a_hostile_sae_folder_is_refused_in_one_line_and_the_tab_keeps_working(
    qtbot, features_tab, tmp_path, harm
):
    from safetensors.torch import load_file, save_file

    tab, s = features_tab, features_tab.session
    good = _sae_folder(s, tmp_path / "good")
    assert tab.open_folder(good)
    bad = _sae_folder(s, tmp_path / "bad", seed=3)
    cfg_path, weights = bad / "cfg.json", bad / "sae_weights.safetensors"
    cfg = json.loads(cfg_path.read_text())
    if harm == "d_in":
        cfg["d_in"] = 48
        cfg_path.write_text(json.dumps(cfg))
    elif harm == "nan":
        t = load_file(weights)
        t["W_dec"][3, 4] = float("nan")
        save_file(t, weights)
    elif harm == "huge":
        cfg["d_sae"] = 1 << 24
        cfg["d_in"] = 1 << 20
        cfg_path.write_text(json.dumps(cfg))
    else:
        cfg_path.write_text("{ not json")
    assert not tab.open_folder(bad)
    line = tab.status.text()
    assert line.startswith("Not opened:") and "\n" not in line and len(line) < 300
    assert tab.state.folder == str(good)
    assert tab.eval_page.evaluate()  # the SAE shown still works
    qtbot.waitUntil(lambda: tab.state.current("eval"), timeout=TIMEOUT)


def test_a_run_stopped_by_closing_the_app_resumes_in_a_new_window_from_its_folder(
    qtbot, features_tab, tmp_path
):
    from app.views.features.tab import FeaturesTab

    tab, s = features_tab, features_tab.session
    page = tab.train_page
    page.layer_spin.setValue(1)
    page.site_box.setCurrentIndex(page.site_box.findData("mlp_out"))
    page.sparsity_box.setCurrentIndex(page.sparsity_box.findData("standard"))
    page.expansion_spin.setValue(5)
    page.tokens_spin.setValue(160_000)
    page.folder_edit.setText(str(tmp_path / "run"))
    assert page.start(resume=False)
    qtbot.waitUntil(lambda: page.curve_points("l0") >= 2, timeout=TIMEOUT)
    tab.shutdown()  # the window closes: the run stops, its state saved in the folder
    assert not page.running
    qtbot.waitUntil(lambda: page.status.text().startswith("Stopped after"), timeout=5000)  # every step drawn
    saved = page.curve_points("l0")

    again = FeaturesTab(s)  # the app opened again
    qtbot.addWidget(again)
    assert again.open_folder(tmp_path / "run")  # the SAE as far as it got, and its run
    p2 = again.train_page
    assert p2.site_box.currentData() == "mlp_out" and p2.sparsity_box.currentData() == "standard"
    assert p2.expansion_spin.value() == 5 and p2.curve_points("l0") == saved and p2.resume_button.isEnabled()
    with qtbot.waitSignal(p2.trained, timeout=TIMEOUT * 3):
        assert p2.start(resume=True)
    assert p2.loop.trained.resumed_at == saved and p2.curve_points("l0") == p2.loop.trained.steps
    assert not p2.resume_button.isEnabled()
    again.shutdown()


def test_the_default_corpus_is_the_data_a_checkpoint_names_never_the_kind_of_file_it_was():
    from types import SimpleNamespace

    from app.views.features.eval_page import default_corpus
    from app.widgets.corpus_box import FALLBACK_CORPUS

    def session(meta):
        return SimpleNamespace(checkpoint_meta=meta, source=None, tokenizer=None, source_spec="")

    assert default_corpus(session({"source": "task:induction"})) == "task:induction"  # the starter's
    assert default_corpus(session({"source": "gguf"})) == FALLBACK_CORPUS  # a GGUF file's meta
    assert default_corpus(session({})) == FALLBACK_CORPUS


def test_an_sae_announced_elsewhere_is_shown_when_the_tab_shows_none(features_tab, tmp_path):
    """An SAE another page opened (SAEChosen) is taken up by a tab that shows none, never in place of
    the one it shows."""
    from app.session.messages import SAEChosen

    tab, s = features_tab, features_tab.session
    first, second = _sae_folder(s, tmp_path / "a", seed=0), _sae_folder(s, tmp_path / "b", seed=1)
    assert tab.state.folder in ("", None)
    s.hub.publish(SAEChosen(str(first)))
    assert tab.state.folder == str(first) and tab.state.sae is not None
    s.hub.publish(SAEChosen(str(second)))
    assert tab.state.folder == str(first)
