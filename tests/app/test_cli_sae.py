"""`attention-lab sae train | eval`: an SAE trained into a folder SAELens reads, evaluated from it; Ctrl+C
stops at a step with the state saved and the same command resumes; bad input is one line and exit 2
before the model is opened."""

from __future__ import annotations

import json
import os
import signal

import pytest

import app.commands.sae as sae_command
from app.cli import main
from model.interp.sae import train as train_module
from model.interp.sae.format import CFG_FILE, WEIGHTS_FILE
from model.interp.sae.train import STATE_FILE


def _train(starter, out, *args: str) -> list[str]:
    return ["sae", "train", "--checkpoint", str(starter), "--site", "z", "--layer", "1",
            "--corpus", "task:induction", "--features", "512", "--tokens", "4096", "--batch", "1024",
            "--seq-len", "33", "--k", "16", "--lr", "1e-3", "--out", str(out), *args]  # fmt: skip


def test_train_then_eval(shipped_starter, tmp_path, capsys):
    out = tmp_path / "sae"
    assert main(_train(shipped_starter, out)) == 0
    captured = capsys.readouterr()
    assert "step 4 of 4 · 4,096 tokens" in captured.err and "4096 of 4096 tokens" in captured.err
    assert "512 features (topk, k=16), 4,096 tokens of task:induction in 4 steps" in captured.out
    assert {p.name for p in out.iterdir()} == {CFG_FILE, WEIGHTS_FILE, STATE_FILE}
    assert json.loads((out / CFG_FILE).read_text())["metadata"]["hook_name"] == "blocks.1.attn.hook_z"
    report = tmp_path / "eval.json"
    assert main(["sae", "eval", "--checkpoint", str(shipped_starter), "--sae", str(out), "--tokens", "1024",
                 "--out", str(report)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "over task:induction" in printed and "loss recovered" in printed  # the corpus it was trained on
    record = json.loads(report.read_text())
    assert record["tokens"] == 1024 and len(record["density"]) == 512
    assert 0 < record["variance_explained"] < 1 and record["l0"] <= 16
    assert f"variance explained   {record['variance_explained']:.4f}" in printed


def test_ctrl_c_stops_at_a_step_and_the_same_command_resumes(shipped_starter, tmp_path, capsys, monkeypatch):
    take_step = train_module._Run.take_step

    def interrupted(run, x, steps):
        got = take_step(run, x, steps)
        if run.step == 2:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl+C sends
        return got

    monkeypatch.setattr(train_module._Run, "take_step", interrupted)
    out = tmp_path / "sae"
    assert main(_train(shipped_starter, out)) == sae_command.INTERRUPTED_STATUS
    assert "the same command resumes it" in capsys.readouterr().err
    assert (out / STATE_FILE).is_file()
    monkeypatch.setattr(train_module._Run, "take_step", take_step)
    assert main(_train(shipped_starter, out)) == 0
    assert "resumed at step 2" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


@pytest.mark.parametrize(
    "args, says",
    [
        (["--layer", "2"], "the model has layers 0 to 1"),
        (["--features", "100"], "--features 100: give a whole number from 512 to 4,096"),
        (["--k", "0"], "--k 0"),
        (["--tokens", "0"], "--tokens 0"),
        (["--seq-len", "65"], "--seq-len 65"),
        (["--lr", "nan"], "--lr nan"),
        (["--architecture", "gated"], "invalid choice: 'gated'"),
        (["--site", "q"], "invalid choice: 'q'"),
        (["--corpus", "builtin:nowhere"], "unknown built-in corpus 'nowhere'"),
    ],
)
def test_bad_train_flags_are_one_line_before_the_model_opens(
    shipped_starter, tmp_path, capsys, monkeypatch, args, says
):
    monkeypatch.setattr(sae_command, "open_checkpoint", lambda *a, **k: pytest.fail("the model was opened"))
    assert main(_train(shipped_starter, tmp_path / "sae", *args)) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert not (tmp_path / "sae").exists()


def test_an_out_folder_of_other_files_is_refused(shipped_starter, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(_train(shipped_starter, tmp_path)) == 2
    assert "holds other files" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_eval_of_an_sae_of_another_width_is_refused_before_the_model_opens(shipped_starter, tmp_path, capsys,
                                                                          monkeypatch):  # fmt: skip
    from model.interp.sae.format import save_sae
    from model.interp.sae.sae import SAEConfig, SparseAutoencoder
    from model.interp.sae.site import Site

    save_sae(SparseAutoencoder(SAEConfig(Site("mlp_out", 0), 64, 256)), tmp_path / "other")
    monkeypatch.setattr(sae_command, "open_checkpoint", lambda *a, **k: pytest.fail("the model was opened"))
    args = ["sae", "eval", "--checkpoint", str(shipped_starter), "--sae", str(tmp_path / "other"), "--corpus",
            "task:induction"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "d_in is 64 but the model's MLP out, layer 0 is 128 wide" in err and err.count("\n") == 1
    assert main([*args[:-2], "--out", "x.txt"]) == 2
    assert "write a .json file" in capsys.readouterr().err


def test_an_action_is_required(capsys):
    assert main(["sae"]) == 2
    assert "ACTION" in capsys.readouterr().err
