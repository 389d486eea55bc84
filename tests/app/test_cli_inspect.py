"""`attention-lab inspect` writes the documented .npz, and user mistakes are one line + exit 2."""

import json
import subprocess
import sys

import numpy as np
import pytest

from app.cli import main
from model.interp.export import load_inspection


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"n_layers": 2, "d_model": 32, "n_heads": 4, "context_length": 64}))
    return path


def test_inspect_fresh_model_writes_every_array(tmp_path, config_file, capsys):
    out = tmp_path / "att.npz"
    prompt = "héllo wörld\n"
    assert (
        main(["inspect", "--config", str(config_file), "--prompt", prompt, "--out", str(out), "--seed", "1"])
        == 0
    )
    data = load_inspection(out)
    T = len(prompt.encode("utf-8"))
    assert data["tokens"].shape == (T,) and data["tokens"][0] == "h"
    for key in ("weights", "scores_raw", "scores_scaled"):
        assert data[key].shape == (2, 4, T, T), key
    assert data["mask"].shape == (T, T) and data["mask"].dtype == bool
    assert np.array_equal(data["mask"], np.tril(np.ones((T, T), dtype=bool)))
    w = data["weights"]
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    assert (w[..., ~data["mask"]] == 0).all()
    np.testing.assert_allclose(data["scores_scaled"], data["scores_raw"] / np.sqrt(8), rtol=1e-5, atol=1e-6)
    assert list(data["resid_points"]) == ["embed", "L0.mid", "L0.post", "L1.mid", "L1.post"]
    assert data["resid_norms"].shape == (5, T)
    assert data["logits"].shape == (T, 256)
    assert json.loads(str(data["config"]))["n_layers"] == 2
    assert "2 layers × 4 heads" in capsys.readouterr().out


def test_seed_makes_it_reproducible(tmp_path, config_file):
    a, b, c = (tmp_path / f"{n}.npz" for n in "abc")
    for path, seed in ((a, "3"), (b, "3"), (c, "4")):
        main(["inspect", "--config", str(config_file), "--prompt", "abc", "--out", str(path), "--seed", seed])
    assert np.array_equal(load_inspection(a)["logits"], load_inspection(b)["logits"])
    assert not np.array_equal(load_inspection(a)["logits"], load_inspection(c)["logits"])


def test_long_prompt_is_cropped_with_a_warning(tmp_path, config_file, capsys):
    out = tmp_path / "long.npz"
    assert main(["inspect", "--config", str(config_file), "--prompt", "x" * 100, "--out", str(out)]) == 0
    assert "keeping the last 64" in capsys.readouterr().err
    assert load_inspection(out)["weights"].shape[-1] == 64


@pytest.mark.parametrize(
    "args, message",
    [
        (["--config", "{cfg}", "--prompt", "", "--out", "{out}"], "--prompt is empty"),
        (["--config", "{missing}", "--prompt", "a", "--out", "{out}"], "does not exist"),
        (
            ["--config", "{bad}", "--prompt", "a", "--out", "{out}"],
            "d_model=30 is not divisible by n_heads=4",
        ),
        (["--checkpoint", "{missing}", "--prompt", "a", "--out", "{out}"], "does not exist"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, config_file, args, message, capfd):
    """In this process (a subprocess paid torch's import again for the missing checkpoint, ~3 s)."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"d_model": 30, "n_heads": 4}))
    fill = {"cfg": config_file, "out": tmp_path / "o.npz", "missing": tmp_path / "nope", "bad": bad}
    argv = [a.format(**fill) for a in args]
    code = main(["inspect", *argv])
    err = capfd.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert message in lines[0]
    assert not (tmp_path / "o.npz").exists()


def test_an_inspection_that_cannot_fit_is_refused_before_torch_is_imported(tmp_path):
    """12 layers × 12 heads at 4096 tokens in 0.5 GB (not even streamed: 0.8 GB with the model): refused
    with the numbers, and since torch is not even imported (a second and a half), in a fraction of a
    second."""
    cfg = tmp_path / "big.json"
    cfg.write_text(json.dumps({"n_layers": 12, "n_heads": 12, "d_model": 768, "context_length": 4096}))
    argv = ["inspect", "--config", str(cfg), "--prompt", "abcd efgh " * 410, "--out", str(tmp_path / "a.npz")]
    code = (
        "import sys\nfrom app.cli import main\n"
        f"rc = main({[*argv, '--max-memory', '0.5']!r})\n"
        "print(rc, 'torch' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["2", "False"], (r.stdout, r.stderr)
    assert "needs about" in r.stderr and "512.00 MiB" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "a.npz").exists()


def test_the_npz_is_written_uncompressed_unless_asked_and_its_size_said_first(tmp_path, config_file, capsys):
    """Deflating a long prompt's patterns took minutes for little gain: the default is a plain .npz,
    its size said before it is written; --compress deflates."""
    import zipfile

    plain, packed = tmp_path / "plain.npz", tmp_path / "packed.npz"
    base = ["inspect", "--config", str(config_file), "--prompt", "abcabcabc" * 4]
    assert main([*base, "--out", str(plain)]) == 0
    said = capsys.readouterr().out
    assert f"writing {plain}:" in said and said.index("writing") < said.index("wrote")
    assert main([*base, "--out", str(packed), "--compress"]) == 0
    with zipfile.ZipFile(plain) as z, zipfile.ZipFile(packed) as y:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
        assert {i.compress_type for i in y.infolist()} == {zipfile.ZIP_DEFLATED}
    for key, value in load_inspection(plain).items():
        assert np.array_equal(value, load_inspection(packed)[key]), key


def test_a_file_the_user_did_not_name_is_never_replaced(tmp_path, config_file, capsys):
    folder = tmp_path / "runs"
    folder.mkdir()
    theirs = folder / "inspection.npz"
    theirs.write_bytes(b"the user's own file")
    base = ["inspect", "--config", str(config_file), "--prompt", "abc"]
    assert main([*base, "--out", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert "already holds inspection.npz" in err and "\n" not in err
    assert theirs.read_bytes() == b"the user's own file"
    assert main([*base, "--out", "/dev/null"]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    assert main([*base, "--out", str(theirs)]) == 0  # named: replaced
    assert load_inspection(theirs)["weights"].shape[-1] == 3


def test_a_cut_prompt_says_where_and_the_file_keeps_each_tokens_place(tmp_path, config_file, capsys):
    out = tmp_path / "long.npz"
    assert main(["inspect", "--config", str(config_file), "--prompt", "ab" * 50, "--out", str(out)]) == 0
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and "leaving out its tokens 0 to 35" in warning[0]
    assert "the prompt is 100 tokens, longer than the model's context of 64" in warning[0]
    data = load_inspection(out)
    assert int(data["dropped"]) == 36 and data["positions"].tolist() == list(range(36, 100))
    assert "".join(data["tokens"]) == ("ab" * 50)[36:]


def free_disk(monkeypatch, free: int) -> None:
    """The disk of every folder has ``free`` bytes free, as ``shutil.disk_usage`` says."""
    import shutil

    monkeypatch.setattr(
        shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10 * free, 9 * free, free)
    )


def test_heads_whose_file_does_not_fit_on_disk_are_streamed_whole_not_cut_to_fewer_layers(
    tmp_path, capsys, monkeypatch
):
    """8 layers × 4 heads of 512 tokens on a disk with 16.7 MiB free (the float16 weights alone take
    16.8 MiB, the streamed file 16.6): no layer is left out; the file
    holds every head pooled and what recomputes each of them, equal to the weights of an export that
    held them."""
    from model.interp.export import streamed_head

    cfg = tmp_path / "deep.json"
    cfg.write_text(json.dumps({"n_layers": 8, "d_model": 16, "n_heads": 4, "context_length": 512}))
    base = ["inspect", "--config", str(cfg), "--prompt", "abcd" * 128]
    held, streamed = tmp_path / "held.npz", tmp_path / "streamed.npz"
    assert main([*base, "--out", str(held)]) == 0
    capsys.readouterr()
    free_disk(monkeypatch, int(16.7 * 2**20))
    assert main([*base, "--out", str(streamed)]) == 0
    said = capsys.readouterr()
    assert "writing the streamed form" in said.err and "8 layers × 4 heads × 512 tokens, streamed" in said.out
    assert "on a disk with 16.70 MiB free" in said.err
    data, weights = load_inspection(streamed), load_inspection(held)["weights"]
    assert bool(data["streamed"]) and "weights" not in data and data["q"].shape[:3] == (8, 4, 512)
    for layer, head in ((0, 0), (3, 2), (7, 3)):
        np.testing.assert_allclose(streamed_head(data, layer, head), weights[layer, head], atol=2e-6)
    assert data["overview"].shape[:2] == (8, 4)


def test_the_disk_decides_float16_then_the_weights_alone_and_memory_only_what_is_held(
    tmp_path, capsys, monkeypatch
):
    """The squares go to the file as they are computed: a memory budget far below the three float32
    squares [8, 4, 512, 512] (96 MiB) still writes them all; a disk too small for them keeps float16,
    then the weights alone (float32, then float16), saying why; a disk too small even for the streamed
    file is refused in one
    line naming the disk, before a file is made."""
    cfg = tmp_path / "deep.json"
    cfg.write_text(json.dumps({"n_layers": 8, "d_model": 16, "n_heads": 4, "context_length": 512}))
    base = ["inspect", "--config", str(cfg), "--prompt", "abcd" * 128]
    out = tmp_path / "a.npz"
    assert main([*base, "--out", str(out), "--max-memory", str(16 / 1024)]) == 0
    data = load_inspection(out)
    assert {k: (data[k].dtype, data[k].shape) for k in ("weights", "scores_raw", "scores_scaled")} == {
        k: (np.dtype(np.float32), (8, 4, 512, 512)) for k in ("weights", "scores_raw", "scores_scaled")
    }
    for free, kept, dtype in (
        (60 * 2**20, {"weights", "scores_raw", "scores_scaled"}, np.float16),
        (40 * 2**20, {"weights"}, np.float32),
        (20 * 2**20, {"weights"}, np.float16),
    ):
        capsys.readouterr()
        free_disk(monkeypatch, free)
        assert main([*base, "--out", str(out)]) == 0
        data = load_inspection(out)
        assert {k for k in ("weights", "scores_raw", "scores_scaled") if k in data} == kept
        assert data["weights"].dtype == dtype and data["weights"].shape == (8, 4, 512, 512)
        assert f"on a disk with {free / 2**20:.2f} MiB free" in capsys.readouterr().err
    free_disk(monkeypatch, 2**20)
    out.unlink()
    assert main([*base, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "disk has 1.00 MiB free" in err and "writes a file of about" in err
    assert list(tmp_path.iterdir()) == [cfg]


def test_a_refusal_names_the_prompt_the_user_gave_not_only_the_context(tmp_path, config_file, capsys):
    argv = ["inspect", "--config", str(config_file), "--prompt", "ab" * 50, "--out", str(tmp_path / "a.npz")]
    assert main([*argv, "--max-memory", "0.000001"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "the last 64 of the prompt's 100 tokens" in err and "lower the prompt's 100 tokens" in err
