"""The Attention tab's SAE page (key ``features``) on the starter model with an SAE of its layer-1
``z`` (built by hand, saved in SAELens's format): the features active at each position are those the
SAE gives on the tab's prompt, the logit's bars add up with the error term to the site's direct
contribution, a click on a feature asks for its dashboard (or says it here when no Features tab is
open), a new prompt greys the old reading until the new one is in, and an SAE of another model is
refused in one line."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from tests.model.sae_hand import hand_sae

TIMEOUT = 30_000
PROMPT = "vsqyrnmezgcovsqyrnmezgco"  # the starter's own probe prompt: a repeated random block


def _save(sae, folder):
    from model.interp.sae.format import save_sae

    return str(save_sae(sae, folder))


@pytest.fixture
def features(window_of_one_tab, qtbot, shipped_starter, tmp_path):
    """(tab, page, the SAE, its folder): the page in view, reading the SAE announced on the hub."""
    from app.session.messages import SAEChosen

    win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 750))
    assert win.session.open_starter()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt(PROMPT)
    sae = hand_sae(k=8)
    folder = _save(sae, tmp_path / "z1")
    win.session.hub.publish(SAEChosen(folder))  # as the Features tab announces one it trained
    page = tab.show_page("features")
    _wait_reading(qtbot, page, PROMPT)
    return tab, page, sae, folder


def _wait_reading(qtbot, page, prompt: str) -> None:
    """Until the page draws a reading of ``prompt`` for its current inputs."""

    def drawn() -> bool:
        r = page.drawn
        return (
            r is not None and r.prompt == prompt and page.features.reading() is r and not page.job_bar.stale
        )

    qtbot.waitUntil(drawn, timeout=TIMEOUT)


def test_the_map_is_the_strongest_features_the_sae_gives_on_the_prompt(qtbot, features):
    from model.interp.sae import site_activations
    from model.interp.sae.readout import feature_logits

    tab, page, sae, folder = features
    model, tok = tab.session.model, tab.session.tokenizer
    ids = tab.state.inspection.ids
    assert page.features.chosen == folder and page.sae_box.currentData() == folder
    with torch.no_grad():  # the SAE run by hand on the site's activations
        f = sae.encode(site_activations(model, sae.config.site, torch.tensor([ids]))[0]).numpy()  # [T, F]
    n = page.shown_spin.value()
    # ranked by the largest activation after the first token (its massive activation left out) ...
    assert page.skip_box.isChecked()
    best = f[1:].max(axis=0)
    want = sorted(np.flatnonzero(best > 0), key=lambda i: (-best[i], i))[:n]
    r = page.drawn
    assert r.shown.tolist() == want
    np.testing.assert_allclose(page.map.matrix, f[:, want].T, rtol=1e-5, atol=1e-6)  # every position
    # ... or over every position
    page.skip_box.setChecked(False)
    _wait_reading(qtbot, page, PROMPT)
    best = f.max(axis=0)
    want = sorted(np.flatnonzero(best > 0), key=lambda i: (-best[i], i))[:n]
    r = page.drawn
    assert r.shown.tolist() == want
    np.testing.assert_allclose(page.map.matrix, f[:, want].T, rtol=1e-5, atol=1e-6)
    for t in range(len(ids)):  # the per-position lists: every feature on there, strongest first
        assert sorted(r.active.features[t].tolist()) == np.flatnonzero(f[t] > 0).tolist()
    top = feature_logits(model, sae, want, k=1).top_ids[:, 0]
    labels = [f"#{i} ‘{tok.token_strings([int(t)])[0]}’" for i, t in zip(want, top, strict=True)]
    assert page.map.row_labels == labels  # each named by index and the token it promotes most
    # hover reads token, feature and activation
    row, col = 0, int(np.argmax(f[:, want[0]]))
    page.map.hover_at(row, col)
    text = page.map.readout.text()
    assert (
        f"position {col} ‘{r.labels[col]}’" in text and labels[0] in text and f"{f[col, want[0]]:.3f}" in text
    )


def test_the_bars_add_up_with_the_error_term_to_the_sites_contribution(qtbot, features, tmp_path):
    from model.interp.causal import one_token
    from model.interp.sae.prompt import feature_logit_attribution

    tab, page, sae, _ = features
    model, tok = tab.session.model, tab.session.tokenizer
    ids = tab.state.inspection.ids
    direct = feature_logit_attribution(model, sae, ids)  # the last position, the top prediction
    values = page.bars.values
    labels = [b.label for b in page.bars.bars]
    assert labels[-2:] == ["b_dec", "error ε"] and values[-1] == pytest.approx(direct.error, abs=1e-9)
    assert abs(values.sum() - direct.site) < 1e-4
    assert abs(direct.site - direct.logit) > 1e-2  # the site is a part of the logit, not all of it
    assert (
        f"sum = site's direct contribution to the logit: {direct.site:.4f} (exact)" in page.sum_label.text()
    )
    # "This page's numbers": the bars as CSV add up the same; the arrays keep the site's sum
    written = tab.export_numbers(tmp_path / "features.csv")
    assert sorted(Path(w).name for w in written) == ["features-active.csv", "features-attribution.csv"]
    with open(tmp_path / "features-attribution.csv", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    assert [r[0] for r in rows] == labels and abs(sum(float(r[1]) for r in rows) - direct.site) < 1e-4
    tab.export_numbers(tmp_path / "features.npz")
    with np.load(tmp_path / "features.npz", allow_pickle=False) as z:
        assert float(z["site"]) == pytest.approx(direct.site, abs=1e-9)
    # another token at another position: the same sum, of that logit
    page.token_edit.setText("e")
    page.position_spin.setValue(5)
    page._setup_changed()
    _wait_reading(qtbot, page, PROMPT)
    other = feature_logit_attribution(model, sae, ids, position=5, token=one_token(tok, "e"))
    assert page.drawn.attribution.position == 5 and page.drawn.attribution.token == other.token
    assert abs(page.bars.values.sum() - other.site) < 1e-4
    assert f"{other.site:.4f}" in page.sum_label.text()


def test_clicking_a_feature_asks_the_features_tab_for_it(qtbot, features):
    from app.session.messages import OpenFeature

    tab, page, _, folder = features
    asked: list[OpenFeature] = []
    sub = tab.session.hub.subscribe(OpenFeature, asked.append)  # the Features tab, as a recorder
    r = page.drawn
    qtbot.mouseClick(page.map.view.viewport(), Qt.MouseButton.LeftButton, pos=page.map.widget_pos_of(2, 3))
    assert asked == [OpenFeature(sae=folder, feature=int(r.shown[2]))]
    sub.cancel()
    # no Features tab: the feature's promoted tokens are said here, and that the tab is not open
    feature = int(r.shown[1])
    assert page.open_feature(feature) is False and len(asked) == 1
    text = page.feature_label.text()
    assert "Features tab is not open" in text
    assert all(t in text for t in r.promoted[feature]) and r.name(feature).split()[0] in text


def test_a_new_prompt_greys_the_old_reading_until_the_new_one_is_in(qtbot, features):
    tab, page, _, _ = features
    old = page.drawn
    seen = []  # the page the moment the new run is drawn (the reading's job has just been asked for)
    tab.inspected.connect(lambda _res: seen.append((page.drawn, page.job_bar.stale, page.job_bar.stale_note)))
    new = "abcdabcdabcd"
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt(new)
    drawn, stale, note = seen[0]
    assert drawn is old and stale and "previous prompt" in note and PROMPT[:10] in note
    _wait_reading(qtbot, page, new)
    assert page.drawn is not old and len(page.drawn.labels) == len(tab.state.inspection.ids)
    assert page.map.matrix.shape[1] == len(tab.state.inspection.ids)


def test_an_sae_of_another_model_is_refused_in_one_line(qtbot, features, tmp_path):
    from model.interp.sae import Site

    _, page, _, folder = features
    drawn = page.drawn
    wide = _save(hand_sae(Site("resid_pre", 1), d_in=64), tmp_path / "other")  # the starter's stream is 128
    assert page.choose_sae(wide) is False
    line = page.status_label.text()
    assert "another model" in line and "64" in line and "<br" not in line and "\n" not in line
    assert page.features.chosen == folder and page.drawn is drawn  # the choice and the reading stay
    deep = _save(hand_sae(Site("z", 5)), tmp_path / "deep")  # a layer the starter does not have
    assert page.choose_sae(deep) is False
    assert "layer 5" in page.status_label.text() and page.features.chosen == folder
    assert wide not in page.features.folders and deep not in page.features.folders


@pytest.mark.parametrize("size", [(1024, 718), (1280, 750)])
def test_a_reading_fits_the_small_screens_whole(qtbot, features, size):
    from tests.app.fit_probe import fit_problems
    from tests.app.layout_probe import text_problems

    tab, page, _, _ = features
    win = tab.window()
    win.resize(*size)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == size, timeout=5000)

    def whole() -> None:  # once the layouts have run (the page tabs wrap in a pass of their own)
        page.grab()
        assert fit_problems(win) == [] and text_problems(page) == []

    qtbot.waitUntil(whole, timeout=5000)
    assert win._holders["attention"].scroll_area.horizontalScrollBar().maximum() == 0
