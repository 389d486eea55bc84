"""The scaled-vs-unscaled training lab's notice: its words follow the measured numbers, whichever
way the run came out."""

import math

import pytest

from model.interp.analysis.scaling_run import LEVEL, ScalingOutcome, final_loss, scaling_run_summary


def test_final_loss_is_the_mean_of_the_last_tenth():
    losses = [5.0] * 90 + [1.0, 2.0, 3.0] * 3 + [4.0]
    assert final_loss(losses) == pytest.approx(sum(losses[-10:]) / 10)  # 10% of 100 steps
    assert final_loss([3.0]) == 3.0
    with pytest.raises(ValueError):
        final_loss([])


V = 26
LN_V = math.log(V)


@pytest.mark.parametrize(
    ("scaled", "unscaled", "mw_scaled", "mw_unscaled", "gap_words", "peaked_words"),
    [
        (
            2.6,
            3.25,
            0.3,
            0.8,
            "nats behind, as the theory says",
            "the unscaled model's attention is the more",
        ),
        (
            2.9,
            2.5,
            0.6,
            0.4,
            "nats ahead: these settings do not show",
            "the scaled model's attention is the more",
        ),
        (LN_V, LN_V + 0.01, 0.9, 0.85, "end level", "the scaled model's attention is the more"),
    ],
)
def test_the_summary_follows_the_numbers_either_way(
    scaled, unscaled, mw_scaled, mw_unscaled, gap_words, peaked_words
):
    o = ScalingOutcome(scaled, unscaled, mw_scaled, mw_unscaled, V)
    text = scaling_run_summary(o)
    assert gap_words in text and peaked_words in text
    assert f"{scaled:.3f} nats" in text and f"{unscaled:.3f} nats" in text
    assert f"{mw_unscaled:.2f} unscaled against {mw_scaled:.2f} scaled" in text
    if abs(o.gap) > LEVEL:
        assert f"{abs(o.gap):.2f} nats" in text
    for name, loss in (("scaled", scaled), ("unscaled", unscaled)):
        learned = loss < LN_V - LEVEL
        assert (
            f"the {name} model ends at {loss:.3f} nats, no lower than ln V: it learned nothing" in text
        ) == (not learned)
        if learned:
            assert f"{LN_V - loss:.2f} below ln V" in text
