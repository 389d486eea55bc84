"""Worked example: the textbook numbers in the widget, recomputed live as the user edits."""

import numpy as np
import pytest

from model.interp.analysis.worked_example import attention_example


@pytest.fixture
def page(labs):
    tab, _ = labs
    return tab.show_page("worked-example")


def test_textbook_numbers_are_shown(page):
    assert page.weights_text() == ["0.401", "0.198", "0.401"]
    assert page.output_text() == "(1.604, 0.797)"
    assert page.table.item(0, 3).text() == "0.707" and page.table.item(1, 3).text() == "0.000"


def test_an_edit_recomputes_every_number(page):
    page.keys[1][1].setValue(2.0)  # k2 = (0, 2): still orthogonal to q, weights unchanged
    assert page.weights_text() == ["0.401", "0.198", "0.401"]
    page.q[1].setValue(1.0)  # q = (1, 1)
    ref = attention_example((1, 1), ((1, 0), (0, 2), (1, 1)), ((1, 0), (0, 2), (3, 1)))
    assert page.weights_text() == [f"{w:.3f}" for w in ref.weights]
    assert page.weights_text() != ["0.401", "0.198", "0.401"]
    assert page.output_text() == f"({ref.output[0]:.3f}, {ref.output[1]:.3f})"
    page.q[1].setValue(0.0)
    page.keys[1][1].setValue(1.0)
    assert page.weights_text() == ["0.401", "0.198", "0.401"]


def test_masking_a_key_and_dropping_the_scale(page):
    page.visible[2].setChecked(False)  # hide token 3: its score becomes −∞ and its weight 0
    assert page.table.item(2, 3).text() == "−∞" and page.weights_text()[2] == "0.000"
    w = np.exp([1 / np.sqrt(2), 0.0])
    assert page.weights_text()[:2] == [f"{x:.3f}" for x in w / w.sum()]
    page.visible[2].setChecked(True)
    page.scale_box.setChecked(False)  # unscaled: softmax(1, 0, 1)
    w = np.exp([1.0, 0.0, 1.0])
    assert page.weights_text() == [f"{x:.3f}" for x in w / w.sum()]
    page.reset()
    assert page.weights_text() == ["0.401", "0.198", "0.401"]
