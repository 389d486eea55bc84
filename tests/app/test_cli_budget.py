"""`attention-lab budget`: the table, --json, --list-presets, overrides and one-line errors (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import app.cli as cli
from app.commands.budget import parse_amount
from model.budget import arithmetic as budget
from model.budget import presets
from model.budget.bounds import CONFIG_BOUNDS, SETTING_BOUNDS
from model.config import GPTConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(monkeypatch, capsys):
    """Run the real dispatcher with only the budget command registered (the others may import torch)."""
    monkeypatch.setattr(cli, "COMMANDS", {"budget": cli.COMMANDS["budget"]})

    def go(*argv: str) -> tuple[int, str, str]:
        try:
            rc = cli.main(["budget", *argv])
        except SystemExit as exc:  # argparse's own errors
            rc = exc.code
        out, err = capsys.readouterr()
        return rc, out, err

    return go


def test_json_for_llama2_7b(run):
    rc, out, err = run(
        "--preset",
        "llama2-7b",
        "--seq-len",
        "4096",
        "--tokens",
        "2T",
        "--peak-tflops",
        "312",
        "--mfu",
        "0.4",
        "--json",
    )
    assert rc == 0, err
    rep = json.loads(out)
    cfg = presets.get("llama2-7b").gpt_config()
    p = budget.parameters(cfg)
    assert rep["params"]["total"] == p.total == 6_738_415_616
    assert rep["params"]["non_embedding"] == p.non_embedding
    assert rep["params"]["components"] == p.counts()
    assert rep["flops"]["forward_per_token"] == 2 * p.matmul
    assert rep["flops"]["train_per_token"] == 6 * p.matmul
    assert rep["flops"]["attention_forward_per_token"] == 4 * 32 * 4096 * 4096
    assert rep["kv_cache"]["bytes"] == 2 * 2**30
    assert rep["training"]["flops"] == 6 * p.total * 2e12
    assert rep["training"]["gpu_hours"] == pytest.approx(180_000, rel=0.01)
    # the preset's public figures travel with it: the paper's 184,320 GPU-hours
    assert rep["training"]["gpu_hours"] == pytest.approx(rep["preset"]["reported_gpu_hours"], rel=0.03)


def test_table_has_formulas(run):
    rc, out, _ = run("--preset", "llama2-7b")
    assert rc == 0
    assert "L·3·d·d_ff" in out and "135,266,304" in out and "6,738,415,616" in out
    assert "training on" not in out  # no tokens given
    rc, out, _ = run("--preset", "llama2-7b", "--tokens", "2T", "--peak-tflops", "312", "--gpus", "2048")
    assert "GPU-hours" in out and "reported for Llama 2 7B" in out and "2,048 GPUs" in out


def test_custom_flags_build_gpt2_small(run):
    rc, out, err = run(
        "--layers",
        "12",
        "--d-model",
        "768",
        "--heads",
        "12",
        "--vocab",
        "50257",
        "--context",
        "1024",
        "--tied",
        "--json",
    )
    assert rc == 0, err
    assert json.loads(out)["params"]["total"] == budget.parameters(presets.get("gpt2").gpt_config()).total


def test_flags_override_a_preset(run):
    base = json.loads(run("--preset", "llama2-7b", "--json")[1])
    rc, out, _ = run("--preset", "llama2-7b", "--kv-heads", "8", "--json")
    assert rc == 0
    gqa = json.loads(out)
    assert gqa["config"]["n_kv_heads"] == 8
    assert gqa["kv_cache"]["bytes"] * 4 == base["kv_cache"]["bytes"]
    assert gqa["params"]["total"] < base["params"]["total"]


def test_config_file_and_checkpoint_folder(run, tmp_path):
    cfg = GPTConfig(vocab_size=65, n_layers=3, d_model=64, n_heads=4)
    (tmp_path / "c.json").write_text(cfg.to_json())
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(cfg.to_json())
    for where in (tmp_path / "c.json", tmp_path / "ckpt"):
        rc, out, err = run("--config", str(where), "--json")
        assert rc == 0, err
        assert json.loads(out)["params"]["total"] == budget.parameters(cfg).total


def test_list_presets(run):
    rc, out, _ = run("--list-presets")
    assert rc == 0
    for name in presets.names():
        assert name in out
    rc, out, _ = run("--list-presets", "--json")
    listed = json.loads(out)
    assert [p["name"] for p in listed] == presets.names()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (("--d-model", "100", "--heads", "3", "--vocab", "10"), "n_heads=3"),
        (("--layers", "-4", "--vocab", "10"), "n_layers=-4"),
        (("--preset", "gpt2", "--mfu", "1.5"), "mfu=1.5"),
        (("--preset", "gpt2", "--tokens", "-5"), "tokens=-5"),
        (("--preset", "gpt2", "--seq-len", "4096"), "context_length=1024"),
        (("--layers", "2"), "--vocab"),
        (("--preset", "llama2-7", "--json"), "did you mean 'llama2-7b'"),
        (
            (
                "--config",
                "no/such/file.json",
            ),
            "does not exist",
        ),
        (("--preset", "gpt2", "--precision", "fp7"), "precision='fp7'"),
        (("--preset", "gpt2", "--kv-heads", "5"), "n_kv_heads=5"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(run, argv, needle):
    rc, out, err = run(*argv)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and needle in err
    assert "Traceback" not in err


BIG = "9" * 26


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ("--layers", BIG, "--vocab", "10"),
            f"n_layers={BIG} (--layers) must be a whole number from 1 to 10,000",
        ),
        (
            ("--preset", "gpt2", "--layers", "0"),
            "n_layers=0 (--layers) must be a whole number from 1 to 10,000",
        ),
        (
            ("--preset", "gpt2", "--d-model", "100000000000"),
            f"d_model=100000000000 (--d-model) must be {CONFIG_BOUNDS['d_model'].rule()}",
        ),
        (
            ("--preset", "gpt2", "--vocab", "-5"),
            f"vocab_size=-5 (--vocab) must be {CONFIG_BOUNDS['vocab_size'].rule()}",
        ),
        (
            ("--preset", "gpt2", "--batch", "0"),
            "batch=0 (--batch) must be a whole number from 1 to 1,000,000",
        ),
        (("--preset", "gpt2", "--gpus", BIG), f"gpus={BIG} (--gpus) must be {SETTING_BOUNDS['gpus'].rule()}"),
        (
            ("--preset", "gpt2", "--seq-len", "100000000000"),
            f"seq_len=100000000000 (--seq-len) must be {SETTING_BOUNDS['seq_len'].rule()}",
        ),
        (("--preset", "gpt2", "--tokens", "1e30"), "tokens=1e30 (--tokens) must be a number from 1 to 1e18"),
        (
            ("--preset", "gpt2", "--peak-tflops", "1e9"),
            "peak_tflops=1e9 (--peak-tflops) must be a number from 0.001 to 100,000 TFLOP/s",
        ),
        (("--preset", "gpt2", "--mfu", "0"), "mfu=0 (--mfu) must be a number from 0.001 to 1"),
    ],
)
def test_counts_and_settings_out_of_bounds_name_the_option_the_value_and_the_limit(run, argv, needle):
    """A count past its bound is refused in one line (it was printed as a 30-digit figure)."""
    rc, out, err = run(*argv)
    assert (rc, out) == (2, "")
    assert err.count("\n") == 1 and needle in err, err


def test_a_config_files_counts_are_bounded_and_name_the_file(run, tmp_path):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"n_layers": 99_999_999_999, "vocab_size": 10**12}))
    rc, out, err = run("--config", str(path))
    assert (rc, out) == (2, "") and err.count("\n") == 1
    assert (
        f"n_layers=99999999999 (in {path}; --layers overrides it) must be a whole number from 1 to 10,000"
        in err
    )
    assert (
        f"vocab_size=1000000000000 (in {path}; --vocab overrides it) "
        f"must be {CONFIG_BOUNDS['vocab_size'].rule()}" in err
    )
    rc, out, err = run("--config", str(path), "--layers", "12", "--vocab", "50257")  # flags override the file
    assert rc == 0 and "L=12" in out, err


def test_several_problems_in_one_line(run):
    rc, _, err = run("--d-model", "100", "--heads", "3", "--layers", "-1", "--vocab", "10", "--mfu", "2")
    assert rc == 2 and err.count("\n") == 1
    assert "n_heads=3" in err and "n_layers=-1" in err and "mfu=2" in err
    assert "(--heads)" in err or "(--d-model)" in err  # the flag to change is named


def test_amounts_accept_suffixes():
    assert parse_amount("2T") == 2 * 10**12
    assert parse_amount("300B") == 300 * 10**9
    assert parse_amount("1.5e9") == 1.5e9
    assert parse_amount("0.5") == 0.5


def test_budget_command_does_not_import_torch():
    code = (
        "import sys, app.cli as cli; cli.COMMANDS = {'budget': cli.COMMANDS['budget']}; "
        "rc = cli.main(['budget', '--preset', 'llama3-70b', '--tokens', '15T', '--peak-tflops', '989', "
        "'--json']); "
        "assert rc == 0 and 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["training"]["gpu_hours"] > 0


def test_config_reads_any_model_the_app_opens(run, tmp_path, write_hf_family, smollm2_path):
    """A Hugging Face folder (its config.json, without a weight read), a GGUF file's header and our own
    checkpoint folder all give their budget; the count is the model's."""
    from model.io.gguf.file import read_header
    from model.io.gguf.load import gguf_config
    from model.io.hf.families import family_config

    folder = tmp_path / "qwen3"
    write_hf_family(folder, "qwen3", hidden_size=64, intermediate_size=96, head_dim=32)
    (folder / "model.safetensors").write_bytes(b"not read")  # no weight is read: a broken file is fine
    hf = json.loads((folder / "config.json").read_text())
    for path in (folder, folder / "config.json"):
        rc, out, err = run("--config", str(path), "--json")
        assert rc == 0, err
        assert json.loads(out)["params"]["total"] == budget.parameters(family_config(hf)).total
    rc, out, err = run("--config", str(smollm2_path), "--json")
    assert rc == 0, err
    assert json.loads(out)["params"]["total"] == 134_515_008
    assert budget.parameters(gguf_config(read_header(smollm2_path))[2]).total == 134_515_008
    rc, out, err = run("--config", str(tmp_path))  # a folder holding no model
    assert rc == 2 and "holds no model" in err and len(err.strip().splitlines()) == 1
