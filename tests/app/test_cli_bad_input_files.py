"""The command line's bad-input catalogue for model and tokenizer files: each case one line on stderr
(read at the file descriptor, where a Rust panic would print), exit code 2, fast and small.

Broken copies of a tiny Hugging Face Llama folder: config.json numbers that divide by zero or are not
numbers, a key written twice, a number of 5,000 digits, layer_types a family does not apply, and
tokenizer.json files the ``tokenizers`` library rejects or panics on; and an empty ``--checkpoint``.
"""

from __future__ import annotations

import json
import shutil

import pytest

from app.cli import main
from tests.app.test_cli_bad_input import assert_refused, one_thread

__all__ = ["one_thread"]  # the imported fixture: one torch thread for the module


@pytest.fixture(scope="module")
def files(tmp_path_factory, write_hf_family):
    """name -> a broken copy of a tiny Llama folder ("llama": the intact one); "ours.json": our config
    JSON with a key written twice."""
    root = tmp_path_factory.mktemp("bad_files")
    llama = root / "llama"
    llama.mkdir()
    write_hf_family(llama, "llama")

    def variant(name, *, config=None, config_text=None, tokenizer=None):
        dst = root / name
        shutil.copytree(llama, dst)
        if config is not None:
            cfg = json.loads((dst / "config.json").read_text())
            cfg.update(config)
            (dst / "config.json").write_text(json.dumps(cfg))
        if config_text is not None:
            (dst / "config.json").write_text(config_text((dst / "config.json").read_text()))
        if tokenizer is not None:
            data = json.loads((dst / "tokenizer.json").read_text())
            tokenizer(data)
            (dst / "tokenizer.json").write_text(json.dumps(data))

    variant("heads0", config={"num_attention_heads": 0, "head_dim": 8})
    variant("rope_nan", config={"rope_theta": float("nan")})
    variant(
        "long_number", config_text=lambda t: t.replace('"vocab_size": 420', '"vocab_size": ' + "4" * 5000)
    )
    variant(
        "twice", config_text=lambda t: t.replace('"vocab_size": 420', '"vocab_size": 420, "vocab_size": 42')
    )
    variant(
        "mistral_all_global",
        config={"model_type": "mistral", "sliding_window": 4, "layer_types": ["full_attention"] * 2},
    )
    variant(
        "llama_some_sliding",
        config={"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
    )
    variant("unk", tokenizer=lambda d: d["model"].__setitem__("unk_token", "<nope>"))
    variant(
        "pp_id", tokenizer=lambda d: d["post_processor"]["special_tokens"]["<s>"].__setitem__("ids", [10**9])
    )
    variant("id_past_v", tokenizer=lambda d: d["model"]["vocab"].__setitem__("<0xFF>", 5000))
    variant(
        "stride",
        tokenizer=lambda d: d.__setitem__(
            "truncation", {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 5}
        ),
    )
    (root / "ours.json").write_text('{"n_layers": 1, "d_model": 16, "n_heads": 2, "n_layers": 2}')
    return root


def _inspect(folder: str) -> list[str]:
    return ["inspect", "--checkpoint", "{w}/" + folder, "--prompt", "ab", "--out", "{w}/a.npz"]


CASES = {
    "checkpoint empty": (["generate", "--checkpoint", "", "--prompt", "ab"], "the model path is empty"),
    "inspect checkpoint empty": (
        ["inspect", "--checkpoint", "", "--prompt", "ab", "--out", "{w}/a.npz"],
        "the model path is empty",
    ),
    "circuits checkpoint empty": (
        ["circuits", "--checkpoint", "", "--out", "{w}/a.npz"],
        "the model path is empty",
    ),
    "num_attention_heads 0": (_inspect("heads0"), "num_attention_heads=0 must be a positive whole number"),
    "rope_theta NaN": (_inspect("rope_nan"), "rope_theta=nan"),
    "5000 digits": (_inspect("long_number"), "number of 5000 digits at 'vocab_size'"),
    "key twice": (_inspect("twice"), "repeats the key 'vocab_size'"),
    "our config key twice": (
        ["inspect", "--config", "{w}/ours.json", "--prompt", "ab", "--out", "{w}/a.npz"],
        "repeats the key 'n_layers'",
    ),
    "mistral layer_types global": (_inspect("mistral_all_global"), "mistral's code slides every layer"),
    "llama layer_types sliding": (
        _inspect("llama_some_sliding"),
        "for llama, whose code has no sliding window",
    ),
    "unknown unk_token": (_inspect("unk"), "its unk_token '<nope>' is not in its vocabulary"),
    "post-processor id 1e9": (_inspect("pp_id"), "token id 1000000000 but config.json says vocab_size=420"),
    "vocabulary id past V": (_inspect("id_past_v"), "token id 5000 but config.json says vocab_size=420"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_files_are_one_line_exit_2_fast_and_small(files, capfd, name):
    assert_refused(*CASES[name], capfd, folder=files)


@pytest.mark.parametrize("folder", ["llama", "stride"])
def test_a_prompt_of_bytes_that_are_not_utf8_is_read_not_a_traceback(files, capfd, folder):
    """``--prompt $'ab\\xffcd'``: Python hands over "ab\\udcffcd"; it is read as "ab?cd", as the byte
    tokenizer reads it; a tokenizer.json whose truncation would panic in Rust runs without it."""
    out = files / f"{folder}.npz"
    argv = ["inspect", "--checkpoint", str(files / folder), "--prompt", "ab\udcffcd", "--out", str(out)]
    capfd.readouterr()
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "panicked" not in err, err
    assert out.is_file()
    argv = [
        "generate",
        "--checkpoint",
        str(files / folder),
        "--prompt",
        "ab\udcffcd",
        "--max-new-tokens",
        "2",
    ]
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "panicked" not in err, err
