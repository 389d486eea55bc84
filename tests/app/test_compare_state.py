"""The Compare tab's state without Qt: what changes it, and the signals it emits."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from app.session.compare_runs import Run
from app.views.compare.state import CompareState
from model.compare import comparison as cmp
from model.config import GPTConfig
from model.interp.frame import AttentionFrame

CFG = GPTConfig(vocab_size=11, context_length=16, n_layers=2, d_model=16, n_heads=2)


def _run(name: str, kind: str = "variant", cfg: GPTConfig = CFG) -> Run:
    return Run(cmp.RunRecord(name=name, kind=kind, config=cfg.to_dict()))


def _snapshot(weights: np.ndarray, tokens: list[str] | None = None) -> AttentionFrame:
    T = weights.shape[-1]
    return AttentionFrame(prompt="ab", labels=tokens or [str(i) for i in range(T)], weights=weights)


class Recorder:
    """Connects to every signal of a state and records (signal name, args)."""

    NAMES = (
        "runs_changed",
        "history_changed",
        "attention_changed",
        "pair_changed",
        "prompt_changed",
        "base_changed",
        "training_changed",
        "message",
    )

    def __init__(self, state: CompareState):
        self.calls: list[tuple[str, tuple]] = []
        for name in self.NAMES:
            getattr(state, name).connect(lambda *args, name=name: self.calls.append((name, args)))

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]


def test_the_state_module_needs_no_qt():
    code = "import sys, app.views.compare.state; print(any(m.startswith('PySide6') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_adding_and_removing_runs_emit_and_keep_names_unique():
    st = CompareState()
    rec = Recorder(st)
    st.add(_run("base"))
    assert rec.names() == ["runs_changed", "pair_changed"]
    assert st.unique_name("base") == "base (2)"
    st.add(_run(st.unique_name("base"), kind="session"))
    assert st.names() == ["base", "base (2)"] and st.index(st.run("base (2)")) == 1
    with pytest.raises(KeyError):
        st.run("missing")
    st.set_training(True)
    assert not st.remove("base")  # a variant the group trains stays
    assert st.remove("base (2)") and st.names() == ["base"]
    assert rec.calls[-2:] == [("runs_changed", ()), ("pair_changed", ("", ""))]
    assert ("training_changed", (True,)) in rec.calls


def test_results_pick_a_pair_and_its_difference():
    st = CompareState()
    for name in ("A", "B", "C"):
        st.add(_run(name))
    assert st.pair == ("", "") and st.diff is None
    rec = Recorder(st)
    w = np.random.default_rng(0).random((2, 2, 3, 3)).astype(np.float32)
    problems = st.set_results(
        {
            "A": (_snapshot(w), None, None, None),
            "B": (_snapshot(w.copy()), None, None, None),
            "C": (None, None, None, "boom"),
        }
    )
    assert problems == ["C: boom"]
    assert "attention_changed" in rec.names() and rec.calls[-1] == ("pair_changed", ("A", "B"))
    assert [r.name for r in st.with_attention()] == ["A", "B"]
    assert st.diff.shape == (2, 2, 3, 3) and not np.any(st.diff)  # the same weights: exactly zero
    assert st.diff_summary.row_tv.shape == (2, 2) and st.pair_problem == ""
    # a run of another shape: no difference, and the reason
    st.set_results({"C": (_snapshot(np.ones((2, 4, 3, 3), np.float32)), None, None, None)})
    st.set_pair("A", "C")
    assert st.diff is None and "same shape" in st.pair_problem and "C 2×4 on 3" in st.pair_problem
    # the same shape on other tokens (another tokenizer)
    st.set_results({"C": (_snapshot(w, ["x", "y", "z"]), None, None, None)})
    st.set_pair("A", "C")
    assert st.diff is None and "different tokens" in st.pair_problem
    # the pair follows its runs: B removed, the next run with attention takes its place
    st.set_pair("A", "B")
    st.remove("B")
    assert st.pair == ("A", "C")


def test_history_prompt_messages_and_progress():
    st = CompareState()
    st.add(_run("a"))
    rec = Recorder(st)
    touched = st.add_history([("a", {"step": 1, "train_loss": 2.0, "lr": 1e-3}), ("gone", {"step": 1})])
    assert touched == {"a"} and rec.calls == [("history_changed", ({"a"},))]
    assert st.run("a").record.history == [
        {"step": 1, "train_loss": 2.0, "val_loss": None, "tokens_per_s": None}
    ]
    st.set_prompt("x\ny")
    st.set_prompt("x\ny")  # no change, no signal
    assert rec.names().count("prompt_changed") == 1 and st.prompt == "x\ny"
    st.say("file", "Saved")
    assert st.messages == {"file": "Saved"}
    st.set_base(CFG, "task:copy", True)
    assert st.base is CFG and st.has_model and rec.names()[-1] == "base_changed"


def test_a_comparison_round_trips_through_the_state(tmp_path):
    st = CompareState()
    st.add(_run("a"))
    st.add_history([("a", {"step": 1, "train_loss": 2.0})])
    w = np.full((2, 2, 3, 3), 1 / 3, np.float32)
    st.set_results({"a": (_snapshot(w), None, None, None)})
    comp = st.comparison(prompt="ab", source="task:copy", base=CFG)
    assert comp.title == "a" and comp.runs[0].summary["steps"] == 1  # the summary rows are up to date
    path = cmp.save_comparison(tmp_path / "c.comparison.json", comp)
    other = CompareState()
    rec = Recorder(other)
    other.replace(cmp.load_comparison(path), str(path))
    assert other.names() == ["a"] and other.prompt == "ab" and other.path == str(path)
    assert other.run("a").metrics is not None and other.run("a").status == "from file"
    assert other.pair == ("a", "a") and not np.any(other.diff)
    assert {"prompt_changed", "runs_changed", "pair_changed"} <= set(rec.names())
