"""The Attention tab's own widgets: attention lines, the head CSV, the head picker. (The shared
matrix widgets are tested in test_matrix_widgets.py, pooling in tests/model/test_pooling.py.)"""

from __future__ import annotations

import numpy as np


def test_line_segments_keep_the_strongest_lines_above_the_threshold():
    from app.views.attention.lines import line_segments

    rng = np.random.default_rng(0)
    w = rng.random((50, 50)).astype(np.float32) ** 4
    q, k, v = line_segments(w, 0.1, 200)
    assert len(v) == 200 and (v >= 0.1).all()
    np.testing.assert_array_equal(w[q, k], v)
    assert v.min() >= np.sort(w[w >= 0.1])[-200]  # no weaker line kept over a stronger one
    q, k, v = line_segments(w, 0.5, 10**6)
    assert len(v) == int((w >= 0.5).sum())


def test_head_picker_reports_one_change_per_action(qtbot):
    from app.views.attention.head_picker import HeadPicker

    p = HeadPicker()
    qtbot.addWidget(p)
    p.set_shape(3, 4)
    changes = []
    p.selectionChanged.connect(lambda: changes.append(p.selected()))
    p.button(1, 2).click()
    p.all_button.click()
    p._toggle_layer(0)
    p.none_button.click()
    assert changes == [
        [(1, 2)],
        [(l, h) for l in range(3) for h in range(4)],
        [(l, h) for l in (1, 2) for h in range(4)],
        [],
    ]
    p.set_selected([(2, 3)])
    p.set_shape(2, 2)  # (2, 3) no longer exists
    assert p.selected() == []
