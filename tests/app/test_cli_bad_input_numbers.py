"""The command line's bad numbers and data tasks: flags that mean nothing without another, RoPE values
that trained into NaN, sampling values greedy decoding let through, task parameters and GPT-2 tokenizer
files too large to build. Each is one line on stderr and exit code 2, fast, before a run folder exists or
anything large is allocated (as in tests/app/test_cli_bad_input.py)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from model.text.bpe import MAX_VOCAB_ENTRIES, MAX_VOCAB_FILE_BYTES
from tests.app.test_cli_bad_input import TASK, TINY, assert_refused, one_thread, world  # noqa: F401

ROPE = ["--positions", "rope"]
GEN = ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--max-new-tokens", "3"]
OUT = ["--out", "{n}/o"]
TINY_64 = [*TINY[:6], "--context-length", "64", "--threads", "1"]  # TINY with a context of 64


@pytest.fixture(scope="module")
def numbers(tmp_path_factory, write_hf_gpt2_skeleton):
    """Config files with hostile numbers, and GPT-2 folders whose tokenizer files are too large."""
    root = tmp_path_factory.mktemp("numbers")
    cfgs = {
        "factor_inf": {"positions": "rope", "rope_scaling": "yarn", "rope_factor": float("inf")},
        "factor_nan": {"positions": "rope", "rope_scaling": "linear", "rope_factor": float("nan")},
        "softcap_tiny": {"attn_softcap": 1e-300},
    }
    for name, cfg in cfgs.items():
        (root / f"{name}.json").write_text(json.dumps(cfg))  # json writes Infinity / NaN as such
    big = write_hf_gpt2_skeleton(root / "hf_big_vocab")
    with open(big / "vocab.json", "r+b") as fh:  # sparse: ten million entries' worth, never written
        fh.truncate(10 * MAX_VOCAB_FILE_BYTES)
    many = write_hf_gpt2_skeleton(root / "hf_many_entries")
    n = MAX_VOCAB_ENTRIES + 1
    (many / "vocab.json").write_bytes(b"{" + b",".join(b'"t%x":%d' % (i, i) for i in range(n)) + b"}")
    merges = write_hf_gpt2_skeleton(root / "hf_many_merges")
    (merges / "merges.txt").write_bytes(b"#version: 0.2\n" + b"a b\n" * n)
    return root


CASES = {
    # train: a flag the model would ignore, and RoPE values that trained into NaN or broke the save
    "rope_factor without rope_scaling": (
        ["train", *TASK, *TINY, *ROPE, "--rope-factor", "4", *OUT],
        "--rope-factor only means something with --rope-scaling",
    ),
    "rope_factor without rope positions": (
        ["train", *TASK, *TINY, "--rope-factor", "4", *OUT],
        "--rope-factor only means",
    ),
    "yarn's beta_fast with linear scaling": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "linear", "--rope-beta-fast", "8", *OUT],
        "--rope-beta-fast only means something with --rope-scaling yarn",
    ),
    "yarn's attention factor with llama3": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "llama3", "--rope-attn-factor", "1.2", *OUT],
        "--rope-attn-factor only means",
    ),
    "no-rope-truncate without yarn": (
        ["train", *TASK, *TINY, *ROPE, "--no-rope-truncate", *OUT],
        "--rope-truncate only means",
    ),
    "llama3's low_freq_factor with yarn": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "yarn", "--rope-low-freq-factor", "2", *OUT],
        "--rope-low-freq-factor only means something with --rope-scaling llama3",
    ),
    "original context with linear": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "linear", "--rope-original-context", "64", *OUT],
        "--rope-original-context only means",
    ),
    "rope_base with learned positions": (
        ["train", *TASK, *TINY, "--rope-base", "500", *OUT],
        "--rope-base only means something with --positions rope",
    ),
    "router_aux_loss without experts": (
        ["train", *TASK, *TINY, "--router-aux-loss", "0.01", *OUT],
        "--router-aux-loss only means something with --n-experts",
    ),
    "rope_factor nan": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "linear", "--rope-factor", "nan", *OUT],
        "rope_factor=nan must be a number from 1 to 10,000",
    ),
    "rope_factor 1e-300": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "linear", "--rope-factor", "1e-300", *OUT],
        "rope_factor=1e-300 must be",
    ),
    "rope_factor inf": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "yarn", "--rope-factor", "inf", *OUT],
        "rope_factor=inf must be",
    ),
    "rope_attn_factor 1e300": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "yarn", "--rope-attn-factor", "1e300", *OUT],
        "rope_attn_factor=1e+300",
    ),
    "rope_beta_slow 1e-300": (
        ["train", *TASK, *TINY, *ROPE, "--rope-scaling", "yarn", "--rope-beta-slow", "1e-300", *OUT],
        "rope_beta_slow=1e-300",
    ),
    "rope_original_context 10**12": (
        [
            "train",
            *TASK,
            *TINY,
            *ROPE,
            "--rope-scaling",
            "llama3",
            "--rope-original-context",
            "1000000000000",
            *OUT,
        ],
        "rope_original_context=1000000000000 must be a whole number from 1 to 1,000,000,000",
    ),
    "rope_base 1e300": (["train", *TASK, *TINY, *ROPE, "--rope-base", "1e300", *OUT], "rope_base=1e+300"),
    "norm_eps 1e-300": (["train", *TASK, *TINY, "--norm-eps", "1e-300", *OUT], "norm_eps=1e-300"),
    "attn_softcap 1e-300": (["train", *TASK, *TINY, "--attn-softcap", "1e-300", *OUT], "attn_softcap"),
    "config rope_factor Infinity": (
        ["train", *TASK, *TINY, "--config", "{n}/factor_inf.json", *OUT],
        "rope_factor=inf",
    ),
    "config rope_factor NaN": (
        ["train", *TASK, *TINY, "--config", "{n}/factor_nan.json", *OUT],
        "rope_factor=nan",
    ),
    "budget rope_factor Infinity": (["budget", "--config", "{n}/factor_inf.json"], "rope_factor=inf"),
    "budget attn_softcap 1e-300": (["budget", "--config", "{n}/softcap_tiny.json"], "attn_softcap=1e-300"),
    "inspect rope_factor NaN": (
        ["inspect", "--config", "{n}/factor_nan.json", "--prompt", "ab", "--out", "{n}/a.npz"],
        "rope_factor=nan",
    ),
    # generate: greedy decoding ignores the temperature, but not a temperature that is no number
    "greedy temperature nan": ([*GEN, "--greedy", "--temperature", "nan"], "temperature=nan"),
    "greedy temperature inf": ([*GEN, "--greedy", "--temperature", "inf"], "temperature=inf"),
    "greedy temperature -1": ([*GEN, "--greedy", "--temperature", "-1"], "temperature=-1"),
    # tasks: every parameter bounded when the spec is parsed, and sequences that cannot hold a target
    "task sort max_len 10**8": (
        ["train", "--corpus", "task:sort:max_len=100000000", *TINY, *OUT],
        "max_len=100000000: must be a whole number between 1 and 4,096",
    ),
    "task induction max_gap 10**9": (
        ["train", "--corpus", "task:induction:max_gap=1000000000", *TINY, *OUT],
        "max_gap=1000000000: must be a whole number between 0 and 4,096",
    ),
    "task induction max_len 10**8": (
        ["train", "--corpus", "task:induction:max_len=100000000", *TINY, *OUT],
        "max_len=100000000: must be",
    ),
    "task copy max_len of 5000 digits": (
        ["train", "--corpus", "task:copy:max_len=" + "9" * 5000, *TINY, *OUT],
        "max_len='999",
    ),
    "task longer than the context": (
        ["train", "--corpus", "task:copy:min_len=100,max_len=100", *TINY, *OUT],
        "seq_len=16 is too short for task:copy:min_len=100,max_len=100, whose first scored target is "
        "token 101",
    ),
    "task longer than --seq-len": (
        [
            "train",
            "--corpus",
            "task:induction:min_len=30,max_len=30",
            *TINY_64,
            "--seq-len",
            "8",
            *OUT,
        ],
        "seq_len=8 is too short",
    ),
    # GPT-2 tokenizer files refused from their size and entry count, before they are parsed
    "vocab.json of 640 MiB": (
        ["generate", "--checkpoint", "{n}/hf_big_vocab", "--prompt", "ab"],
        "vocab.json is 671,088,640 bytes: larger than any tokenizer's",
    ),
    "vocab.json of a million and one entries": (
        ["generate", "--checkpoint", "{n}/hf_many_entries", "--prompt", "ab"],
        "vocab.json holds about 1,000,001 entries",
    ),
    "merges.txt of a million and one lines": (
        ["generate", "--checkpoint", "{n}/hf_many_merges", "--prompt", "ab"],
        "merges.txt holds about 1,000,002 lines",  # with its #version line
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_numbers_are_one_line_exit_2_fast_and_small(world, numbers, capsys, name):  # noqa: F811
    argv, message = CASES[name]
    argv = [a.replace("{n}", str(numbers)) for a in argv]
    out = assert_refused(argv, message, capsys, folder=world)
    assert "training" not in out  # refused before the run began
    assert not (numbers / "o").exists() and not (numbers / "a.npz").exists()


def test_a_tiny_top_p_samples_the_likeliest_token(world, capsys):  # noqa: F811
    """``--top-p 1e-300`` is in (0, 1]: it keeps only the likeliest token (it ended in a traceback)."""
    argv = [a.replace("{w}", str(world)) for a in GEN]
    assert main([*argv, "--greedy"]) == 0
    greedy = capsys.readouterr().out
    assert main([*argv, "--top-p", "1e-300", "--seed", "3"]) == 0
    assert capsys.readouterr().out == greedy


def test_a_flag_given_with_the_setting_it_needs_from_the_config_file_is_kept(tmp_path, capsys):
    """``--rope-factor`` is refused only when the model would ignore it, not when --config scales RoPE."""
    cfg = tmp_path / "llama3.json"
    cfg.write_text(json.dumps({"positions": "rope", "rope_scaling": "llama3", "rope_original_context": 8}))
    argv = ["train", *TASK, *TINY, "--config", str(cfg), "--rope-factor", "4", "--rope-high-freq-factor", "8"]
    argv += ["--steps", "1", "--batch-size", "2", "--seq-len", "8", "--out", str(tmp_path / "run")]
    assert main(argv) == 0, capsys.readouterr().err
    saved = json.loads((tmp_path / "run" / "checkpoint" / "config.json").read_text())
    assert saved["rope_factor"] == 4.0 and saved["rope_high_freq_factor"] == 8.0
    assert main([*argv[:-2], "--no-rope-truncate", "--out", str(tmp_path / "run2")]) == 2
    assert "--rope-truncate only means something with --rope-scaling yarn" in capsys.readouterr().err
