"""The command line's bad-input catalogue: every case is one line on stderr and exit code 2, in-process,
fast, and refused before anything large is allocated (the resident memory barely moves)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
import torch

from app.cli import main

TINY = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--context-length", "16", "--threads", "1"]
TASK = ["--corpus", "task:copy"]
#: Resident memory a refusal may add (imports already done): far below any model it refuses.
MAX_GROWTH = 300 * 1024**2


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def world(tmp_path_factory, write_hf_gpt2_skeleton):
    """Files the cases point at: a tiny trained checkpoint and broken copies of it, FIFOs, configs."""
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("bad")
    run = root / "run"
    argv = ["train", *TINY, *TASK, "--steps", "2", "--batch-size", "2", "--seq-len", "8", "--out", str(run)]
    assert main(argv) == 0
    ckpt = run / "checkpoint"  # the run folder's checkpoint, a plain checkpoint folder

    def variant(name: str, edit) -> None:
        dst = root / name
        shutil.copytree(ckpt, dst)
        edit(dst)

    def lie(dst, **fields):
        cfg = json.loads((dst / "config.json").read_text())
        cfg.update(fields)
        (dst / "config.json").write_text(json.dumps(cfg))

    variant("lying", lambda d: lie(d, d_model=8192))
    variant("lying_layers", lambda d: lie(d, n_layers=10**7))
    variant(
        "lying_rope",
        lambda d: (d / "config.json").write_text(
            (d / "config.json").read_text().replace('"rope_base": 10000.0', '"rope_base": Infinity')
        ),
    )

    def bad_moment(dst):
        path = dst / "optimizer.safetensors"
        tensors = load_file(path)
        key = next(k for k in sorted(tensors) if k.endswith("/exp_avg") and tensors[k].dim() == 2)
        tensors[key] = torch.zeros(tensors[key].shape[0] + 1, tensors[key].shape[1])
        save_file(tensors, path)
        meta = json.loads((dst / "meta.json").read_text())
        meta["files"].pop("optimizer.safetensors")
        (dst / "meta.json").write_text(json.dumps(meta))

    variant("bad_optimizer", bad_moment)

    fifo = root / "fifo"
    os.mkfifo(fifo)
    cfgs = {
        "vocab0": {"vocab_size": 0},
        "vocab10": {"vocab_size": 10},
        "rope_inf": {"positions": "rope", "rope_base": float("inf")},
        "rope_nan": {"positions": "rope", "rope_base": float("nan")},
        "dropout_nan": {"dropout": float("nan")},
        "eps_nan": {"norm_eps": float("nan")},
        "huge_d": {"d_model": 10**6, "n_heads": 8},
        "huge_layers": {"n_layers": 10**7, "d_model": 16, "n_heads": 2},
        "huge_ctx": {"context_length": 10**10, "d_model": 16, "n_heads": 2},
        "long": {"n_layers": 12, "n_heads": 12, "d_model": 48, "context_length": 4096},
    }
    for name, cfg in cfgs.items():
        (root / f"{name}.json").write_text(json.dumps(cfg))  # json writes Infinity / NaN as such

    hf = write_hf_gpt2_skeleton(root / "hf_escape")
    (hf / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"wte.weight": "../../../../../../etc/passwd"}})
    )
    hf_huge = root / "hf_huge"
    shutil.copytree(hf, hf_huge)
    (hf_huge / "config.json").write_text(
        json.dumps(
            {
                "model_type": "gpt2",
                "n_layer": 10**7,
                "n_head": 2,
                "n_embd": 64,
                "n_positions": 16,
                "vocab_size": 300,
            }
        )
    )
    nano = root / "nano.pt"
    args = {
        "n_layer": 10**6,
        "n_head": 16,
        "n_embd": 4096,
        "block_size": 1024,
        "vocab_size": 65,
        "bias": True,
    }
    torch.save({"model_args": args, "model": {}}, nano)
    (root / "notes").mkdir()
    deep = "[" * 100_000 + "]" * 100_000
    (root / "deep.json").write_text(deep)
    (root / "list.json").write_text("[1, 2]")
    (root / "unknown.json").write_text(json.dumps({"d_modle": 64}))
    (root / "float_d.json").write_text(json.dumps({"d_model": 64.5}))
    (root / "random").mkdir()
    (root / "random" / "random.bin").write_bytes(bytes(range(256)) * 64)
    variant("deep_config", lambda d: (d / "config.json").write_text(deep))
    variant("deep_tokenizer", lambda d: (d / "tokenizer.json").write_text(deep))

    def truncate(dst):
        data = (dst / "model.safetensors").read_bytes()
        (dst / "model.safetensors").write_bytes(data[: len(data) // 2])

    variant("truncated", truncate)
    variant("bad_header", lambda d: (d / "model.safetensors").write_bytes(b"\xff" * 8 + b"{}"))
    from model.config import GPTConfig
    from model.io.checkpoint.saved import save_checkpoint
    from model.nn.gpt import init_model
    from model.text.tokens import ByteTokenizer

    endless = GPTConfig(
        vocab_size=256, n_layers=1, d_model=16, n_heads=2, positions="none", context_length=10**9
    )
    save_checkpoint(root / "endless", init_model(endless, seed=0), ByteTokenizer())
    return root


CASES = {
    # train: sizes from flags refused before allocation, naming the value to lower
    "d_model huge": (
        ["train", *TASK, "--d-model", "10000000", "--n-heads", "1", "--out", "{w}/o"],
        "d_model",
    ),
    "n_layers 10**7": (["train", *TASK, "--n-layers", "10000000", "--out", "{w}/o"], "n_layers=10000000"),
    "d_ff huge": (["train", *TASK, "--d-ff", "1000000000", "--out", "{w}/o"], "d_ff=1000000000"),
    "head_dim huge": (["train", *TASK, "--head-dim", "10000000", "--out", "{w}/o"], "head_dim=10000000"),
    "context huge": (["train", *TASK, "--context-length", "10000000000", "--out", "{w}/o"], "context_length"),
    "batch 1e9": (["train", *TASK, *TINY, "--batch-size", "1000000000", "--out", "{w}/o"], "--batch-size"),
    "batch 1e12": (["train", *TASK, *TINY, "--batch-size", "1000000000000", "--out", "{w}/o"], "batch_size"),
    "steps 1e12": (["train", *TASK, *TINY, "--steps", "1000000000000", "--out", "{w}/o"], "steps"),
    "seq_len 1e12": (["train", *TASK, *TINY, "--seq-len", "1000000000000", "--out", "{w}/o"], "seq_len"),
    "seed 10**23": (["train", *TASK, *TINY, "--seed", str(10**23), "--out", "{w}/o"], "seed"),
    "seed -1": (["train", *TASK, *TINY, "--seed", "-1", "--out", "{w}/o"], "seed"),
    "threads 100000": (
        ["train", *TASK, "--n-layers", "1", "--threads", "100000", "--out", "{w}/o"],
        "threads",
    ),
    "threads -3": (["train", *TASK, "--n-layers", "1", "--threads", "-3", "--out", "{w}/o"], "threads"),
    "lr nan": (["train", *TASK, *TINY, "--lr", "nan", "--out", "{w}/o"], "lr=nan"),
    "lr inf": (["train", *TASK, *TINY, "--lr", "inf", "--out", "{w}/o"], "lr=inf"),
    "min_lr nan": (["train", *TASK, *TINY, "--min-lr", "nan", "--out", "{w}/o"], "min_lr"),
    "weight_decay inf": (["train", *TASK, *TINY, "--weight-decay", "inf", "--out", "{w}/o"], "weight_decay"),
    "grad_clip nan": (["train", *TASK, *TINY, "--grad-clip", "nan", "--out", "{w}/o"], "grad_clip"),
    "eval_batches 1e12": (
        ["train", *TASK, *TINY, "--eval-batches", "10" * 6, "--out", "{w}/o"],
        "eval_batches",
    ),
    "warmup 1e12": (["train", *TASK, *TINY, "--warmup", "1000000000000", "--out", "{w}/o"], "warmup"),
    "dropout 1": (["train", *TASK, *TINY, "--dropout", "1", "--out", "{w}/o"], "dropout"),
    "rope_base inf flag": (
        ["train", *TASK, *TINY, "--positions", "rope", "--rope-base", "inf", "--out", "{w}/o"],
        "rope_base",
    ),
    "rope_base nan flag": (
        ["train", *TASK, *TINY, "--positions", "rope", "--rope-base", "nan", "--out", "{w}/o"],
        "rope_base",
    ),
    "norm_eps nan flag": (["train", *TASK, *TINY, "--norm-eps", "nan", "--out", "{w}/o"], "norm_eps"),
    "log_every 0": (["train", *TASK, *TINY, "--log-every", "0", "--out", "{w}/o"], "--log-every"),
    "log_every 1e12": (
        ["train", *TASK, *TINY, "--log-every", "1000000000000", "--out", "{w}/o"],
        "--log-every",
    ),
    "save_every 0": (["train", *TASK, *TINY, "--save-every", "0", "--out", "{w}/o"], "--save-every"),
    "corpus /dev/zero": (["train", "--corpus", "/dev/zero", "--out", "{w}/o"], "not a regular file"),
    "corpus FIFO": (["train", "--corpus", "{w}/fifo", "--out", "{w}/o"], "not a regular file"),
    "corpus folder": (["train", "--corpus", "{w}/notes", "--out", "{w}/o"], "holds no UTF-8 text file"),
    "config FIFO": (["train", *TASK, "--config", "{w}/fifo", "--out", "{w}/o"], "not a regular file"),
    "config /dev/zero": (["train", *TASK, "--config", "/dev/zero", "--out", "{w}/o"], "not a regular file"),
    "config vocab 0": (["train", *TASK, "--config", "{w}/vocab0.json", "--out", "{w}/o"], "vocab_size=0"),
    "config vocab 10": (["train", *TASK, "--config", "{w}/vocab10.json", "--out", "{w}/o"], "vocab_size=10"),
    "config rope Infinity": (
        ["train", *TASK, "--config", "{w}/rope_inf.json", "--out", "{w}/o"],
        "rope_base",
    ),
    "config rope NaN": (["train", *TASK, "--config", "{w}/rope_nan.json", "--out", "{w}/o"], "rope_base"),
    "config dropout NaN": (["train", *TASK, "--config", "{w}/dropout_nan.json", "--out", "{w}/o"], "dropout"),
    "config norm_eps NaN": (["train", *TASK, "--config", "{w}/eps_nan.json", "--out", "{w}/o"], "norm_eps"),
    "config d_model 10**6": (["train", *TASK, "--config", "{w}/huge_d.json", "--out", "{w}/o"], "d_model"),
    "config n_layers 10**7": (
        ["train", *TASK, "--config", "{w}/huge_layers.json", "--out", "{w}/o"],
        "n_layers",
    ),
    "config context 10**10": (
        ["train", *TASK, "--config", "{w}/huge_ctx.json", "--out", "{w}/o"],
        "context_length",
    ),
    "out read-only": (
        ["train", *TASK, *TINY, "--out", "/proc/attention-lab-out"],
        "read-only or no permission",
    ),
    "resume lying config": (
        ["train", "--resume", "{w}/lying", "--steps", "5", "--out", "{w}/o"],
        "does not match",
    ),
    "resume lying n_layers": (["train", "--resume", "{w}/lying_layers", "--out", "{w}/o"], "n_layers"),
    "resume rope Infinity": (["train", "--resume", "{w}/lying_rope", "--out", "{w}/o"], "rope_base"),
    "resume optimizer shapes": (
        ["train", "--resume", "{w}/bad_optimizer", "--steps", "5", "--out", "{w}/o"],
        "optimizer state shapes",
    ),
    "resume batch 1e9": (
        ["train", "--resume", "{w}/run", "--batch-size", "1000000000", "--out", "{w}/o"],
        "--batch-size 1000000000",
    ),
    "config nested 10**5 deep": (
        ["train", *TASK, "--config", "{w}/deep.json", "--out", "{w}/o"],
        "nested too deeply",
    ),
    "config a JSON list": (["train", *TASK, "--config", "{w}/list.json", "--out", "{w}/o"], "JSON object"),
    "config unknown field": (["train", *TASK, "--config", "{w}/unknown.json", "--out", "{w}/o"], "d_model"),
    "config d_model 64.5": (
        ["train", *TASK, "--config", "{w}/float_d.json", "--out", "{w}/o"],
        "whole number",
    ),
    "n_heads 0": (["train", *TASK, "--n-heads", "0", "--out", "{w}/o"], "n_heads=0"),
    "n_kv_heads 3 of 4": (["train", *TASK, "--n-kv-heads", "3", "--out", "{w}/o"], "n_kv_heads=3"),
    "device tpu": (["train", *TASK, *TINY, "--device", "tpu", "--out", "{w}/o"], "tpu"),
    "corpus task:nope": (["train", "--corpus", "task:nope", "--out", "{w}/o"], "nope"),
    "corpus empty": (["train", "--corpus", " ", "--out", "{w}/o"], "--corpus is empty"),
    "checkpoint a device": (["generate", "--checkpoint", "/dev/zero", "--prompt", "ab"], "a device"),
    "inspect out empty": (
        ["inspect", "--config", "{w}/deep.json", "--prompt", "ab", "--out", ""],
        "--out is empty",
    ),
    "corpus binary file": (["train", "--corpus", "{w}/random/random.bin", "--out", "{w}/o"], "binary"),
    "resume nested config.json": (
        ["train", "--resume", "{w}/deep_config", "--out", "{w}/o"],
        "nested too deeply",
    ),
    # generate: sampling values
    "temperature nan": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--temperature", "nan"],
        "temperature",
    ),
    "temperature inf": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--temperature", "inf"],
        "temperature",
    ),
    "temperature 1e-300": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--temperature", "1e-300"],
        "temperature",
    ),
    "temperature -1": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--temperature", "-1"],
        "temperature",
    ),
    "gen seed 10**23": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--seed", str(10**23)],
        "seed",
    ),
    "gen seed -5": (["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--seed", "-5"], "seed"),
    "top_p nan": (["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--top-p", "nan"], "top_p"),
    "top_p inf": (["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--top-p", "inf"], "top_p"),
    "top_p 0": (["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--top-p", "0"], "top_p"),
    "top_k 1e12": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--top-k", "10" * 6],
        "too many",
    ),
    "max_new_tokens 1e12": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--max-new-tokens", "1000000000000"],
        "too many",
    ),
    "gen lying config": (["generate", "--checkpoint", "{w}/lying", "--prompt", "ab"], "does not match"),
    "gen lying n_layers": (["generate", "--checkpoint", "{w}/lying_layers", "--prompt", "ab"], "n_layers"),
    "gen shard escapes": (
        ["generate", "--checkpoint", "{w}/hf_escape", "--prompt", "ab"],
        "outside the model folder",
    ),
    "gen hf n_layer 10**7": (
        ["generate", "--checkpoint", "{w}/hf_huge", "--prompt", "ab"],
        "n_layers=10000000",
    ),
    "gen nanogpt huge": (["generate", "--checkpoint", "{w}/nano.pt", "--prompt", "ab"], "n_layers=1000000"),
    "gen kv cache of 10**9 positions": (
        ["generate", "--checkpoint", "{w}/endless", "--prompt", "ab"],
        "--no-cache",
    ),
    "gen nested tokenizer.json": (
        ["generate", "--checkpoint", "{w}/deep_tokenizer", "--prompt", "ab"],
        "nested too deeply",
    ),
    "gen truncated weights": (["generate", "--checkpoint", "{w}/truncated", "--prompt", "ab"], "truncated"),
    "gen bad header": (["generate", "--checkpoint", "{w}/bad_header", "--prompt", "ab"], "header length"),
    "gen a random file": (
        ["generate", "--checkpoint", "{w}/random/random.bin", "--prompt", "ab"],
        "no model",
    ),
    "gen unknown characters": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "日本"],
        "cannot be encoded",
    ),
    "gen empty prompt": (["generate", "--checkpoint", "{w}/run", "--prompt", ""], "--prompt is empty"),
    "gen top_k 0": (["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--top-k", "0"], "at least 1"),
    "gen max_new_tokens -1": (
        ["generate", "--checkpoint", "{w}/run", "--prompt", "ab", "--max-new-tokens", "-1"],
        "at least 1",
    ),
    # inspect: sizes and the inspection budget
    "inspect 12x12 at 4096": (
        [
            "inspect",
            "--config",
            "{w}/long.json",
            "--prompt",
            "ab" * 2048,
            "--out",
            "{w}/a.npz",
            "--max-memory",
            "0.1",
        ],
        "inspecting 4096 tokens",
    ),
    "inspect seed 10**23": (
        [
            "inspect",
            "--config",
            "{w}/long.json",
            "--prompt",
            "ab",
            "--out",
            "{w}/a.npz",
            "--seed",
            str(10**23),
        ],
        "--seed",
    ),
    "inspect nested config": (
        ["inspect", "--config", "{w}/deep.json", "--prompt", "ab", "--out", "{w}/a.npz"],
        "nested too deeply",
    ),
    "inspect empty prompt": (
        ["inspect", "--config", "{w}/long.json", "--prompt", "", "--out", "{w}/a.npz"],
        "--prompt is empty",
    ),
    "inspect max-memory nan": (
        [
            "inspect",
            "--config",
            "{w}/long.json",
            "--prompt",
            "ab",
            "--out",
            "{w}/a.npz",
            "--max-memory",
            "nan",
        ],
        "--max-memory",
    ),
    "inspect max-memory -1": (
        [
            "inspect",
            "--config",
            "{w}/long.json",
            "--prompt",
            "ab",
            "--out",
            "{w}/a.npz",
            "--max-memory",
            "-1",
        ],
        "--max-memory",
    ),
    "inspect d_model 10**6": (
        ["inspect", "--config", "{w}/huge_d.json", "--prompt", "ab", "--out", "{w}/a.npz"],
        "d_model",
    ),
    "inspect n_layers 10**7": (
        ["inspect", "--config", "{w}/huge_layers.json", "--prompt", "ab", "--out", "{w}/a.npz"],
        "n_layers",
    ),
    "inspect config FIFO": (
        ["inspect", "--config", "{w}/fifo", "--prompt", "ab", "--out", "{w}/a.npz"],
        "not a regular file",
    ),
    "inspect rope NaN": (
        ["inspect", "--config", "{w}/rope_nan.json", "--prompt", "ab", "--out", "{w}/a.npz"],
        "rope_base",
    ),
    "inspect lying config": (
        ["inspect", "--checkpoint", "{w}/lying", "--prompt", "ab", "--out", "{w}/a.npz"],
        "does not match",
    ),
    "inspect shard escapes": (
        ["inspect", "--checkpoint", "{w}/hf_escape", "--prompt", "ab", "--out", "{w}/a.npz"],
        "outside the model folder",
    ),
}


def assert_refused(argv: list[str], message: str, capture, *, folder) -> str:
    """Run ``argv`` in-process (``{w}`` is ``folder``): it must exit 2 with one stderr line holding
    ``message`` and no traceback, within 5 s and ``MAX_GROWTH`` of resident memory, writing neither
    ``folder/o`` nor ``folder/a.npz``. ``capture`` is pytest's ``capsys`` or ``capfd`` (fd level: a
    Rust panic printed by a library shows); returns what went to stdout."""
    argv = [a.replace("{w}", str(folder)) for a in argv]
    capture.readouterr()
    before, t0 = rss(), time.perf_counter()
    try:
        rc = main(argv)
    except SystemExit as exc:  # pragma: no cover - main turns argparse's exits into return codes
        rc = exc.code
    elapsed, grown = time.perf_counter() - t0, rss() - before
    out, err = capture.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert message in lines[0] and len(lines[0]) < 400, lines[0]
    assert elapsed < 5.0, f"{argv[0]}: {elapsed:.1f} s"
    assert grown < MAX_GROWTH, f"resident memory grew by {grown / 2**20:.0f} MiB"
    assert not (folder / "o").exists() and not (folder / "a.npz").exists()
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_2_fast_and_small(world, capsys, name):
    assert_refused(*CASES[name], capsys, folder=world)


def test_the_12x12_model_at_4096_tokens_is_refused_within_a_second(world, capsys):
    argv = [
        "inspect",
        "--config",
        str(world / "long.json"),
        "--prompt",
        "ab" * 2048,
        "--out",
        str(world / "a.npz"),
        "--max-memory",
        "0.1",
    ]
    t0 = time.perf_counter()
    assert main(argv) == 2  # even streamed: its 4096 tokens' queries, keys and overviews take 160 MiB
    assert time.perf_counter() - t0 < 1.0
    err = capsys.readouterr().err
    assert "this machine has 102.40 MiB available (the inspection budget)" in err


def test_no_size_check_overrides_the_refusal(world, capsys):
    argv = [
        "inspect",
        "--config",
        str(world / "long.json"),
        "--prompt",
        "abc",
        "--out",
        str(world / "b.npz"),
        "--max-memory",
        "0.000001",
    ]
    assert main(argv) == 2 and "the inspection budget" in capsys.readouterr().err
    assert main([*argv, "--no-size-check"]) == 0
    assert (world / "b.npz").is_file()
    assert "ATTENTION_LAB_NO_SIZE_CHECK" not in os.environ  # restored after the command
