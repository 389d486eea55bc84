"""The History tab's Qt-free state: the plot's lines and the log axis's ticks."""

import math

import numpy as np

from app.views.history.state import HistoryState, plot_x, step_ticks
from model.io.history.traced import Snapshot


class _Hist:
    def __init__(self, snaps):
        self._snaps = snaps

    def in_memory(self):
        return self._snaps

    snapshots = in_memory


def _snap(step, induction):
    ind = np.asarray(induction, dtype=np.float32).reshape(1, 2)
    metrics = {"induction": ind, "prev_token": ind * 0, "sink": ind * 0 + 0.5, "entropy_norm": 1 - ind}
    w = np.zeros((1, 2, 1, 1), np.float16)
    return Snapshot(
        step=step, label=f"step{step}", key="k", prompt="p", labels=["a"], weights=w, metrics=metrics
    )


def test_series_are_the_best_head_of_each_kind_or_every_head():
    st = HistoryState()
    assert st.series() == []
    st.history = _Hist([_snap(0, [0.1, 0.3]), _snap(1000, [0.7, 0.2])])
    lines = {name: (x, y) for name, x, y in st.series()}
    assert set(lines) == {"induction", "previous-token", "sink", "entropy"}
    np.testing.assert_allclose(lines["induction"][1], [0.3, 0.7])
    np.testing.assert_allclose(lines["entropy"][1], [0.7, 0.3])  # the most focused head: lowest entropy
    st.plot = "induction"
    heads = {name: y for name, _, y in st.series()}
    assert set(heads) == {"L0H0", "L0H1"} and list(heads["L0H1"]) == [np.float32(0.3), np.float32(0.2)]
    assert "induction 0.70 (L0H0)" in st.describe(st.history.snapshots()[1])


def test_log_axis_ticks_name_step_zero_and_1_2_5_steps():
    ticks = dict((round(10**x, 3), t) for x, t in step_ticks([0, 1, 4, 143000]))
    assert ticks[0.5] == "0" and ticks[1] == "1" and ticks[100000] == "100k" and ticks[2000] == "2k"
    assert plot_x(0) == 0.5 and plot_x(20) == 20
    assert [t for _, t in step_ticks([20, 200])] == ["20", "50", "100", "200"]
    assert all(math.isfinite(x) for x, _ in step_ticks([0]))
