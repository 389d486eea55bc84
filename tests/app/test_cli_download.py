"""`attention-lab download` and `--checkpoint hf:REPO`, against the fake Hub on 127.0.0.1."""

import numpy as np

from app.cli import main

REPO = "tiny/gpt2"


def test_download_then_inspect_offline(fake_hub, tiny_gpt2_repo_files, capsys, monkeypatch, tmp_path):
    commit = fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    assert main(["download", REPO]) == 0
    out, err = capsys.readouterr()
    assert f"{REPO}: in the cache at" in out and commit in out
    assert "100%" in err and ("KiB" in err or "MiB" in err)  # the progress line: bytes of total
    n = len(fake_hub.requests)

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    att = tmp_path / "att.npz"
    assert main(["inspect", "--checkpoint", "hf:" + REPO, "--prompt", "the cat sat", "--out", str(att)]) == 0
    assert np.load(att, allow_pickle=False)["weights"].shape[:2] == (2, 4)
    assert (
        main(["generate", "--checkpoint", f"hf:{REPO}@main", "--prompt", "the", "--max-new-tokens", "3"]) == 0
    )
    assert len(fake_hub.requests) == n  # offline: nothing asked of the Hub


def test_download_errors_are_one_line(fake_hub, tiny_gpt2_repo_files, capsys):
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    fake_hub.status["broken/repo"] = 503
    for repo, says in (("nobody/nothing", "not found on the Hub (404)"), ("broken/repo", "answered 503")):
        assert main(["download", repo]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and err.startswith("attention-lab download: error:") and "\n" not in err
    assert main(["inspect", "--checkpoint", "hf:nobody/nothing", "--prompt", "x", "--out", "x.npz"]) == 2
    assert "not found on the Hub" in capsys.readouterr().err


def test_download_list_names_the_catalogue(capsys):
    assert main(["download", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("gpt2", "distilgpt2", "EleutherAI/pythia-70m", "Qwen/Qwen2.5-0.5B", "TinyLlama"):
        assert name in out
    assert "GPT-NeoX" in out and "GiB" in out
