"""`inspect` and `generate --checkpoint` open Hugging Face GPT-2 folders and nanoGPT files too; every
command that opens a model takes --keep-stored / --no-keep-stored."""

import torch

from app.cli import main
from model.interp.export import load_inspection
from model.io import pretrained
from model.io.pretrained import open_model


def test_inspect_and_generate_on_a_hugging_face_gpt2_folder(
    tmp_path, capsys, gpt2_tokenizer_dir, write_hf_gpt2
):
    model_dir = tmp_path / "gpt2"
    model_dir.mkdir()
    reference = write_hf_gpt2(model_dir, gpt2_tokenizer_dir)
    out = tmp_path / "att.npz"
    prompt = "the cat sat"
    assert main(["inspect", "--checkpoint", str(model_dir), "--prompt", prompt, "--out", str(out)]) == 0
    data = load_inspection(out)
    ids = open_model(model_dir).tokenizer.encode(prompt)
    assert data["weights"].shape == (2, 4, len(ids), len(ids))
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits[0].numpy()
    assert abs(data["logits"] - expected).max() < 1e-4
    capsys.readouterr()
    args = ["generate", "--checkpoint", str(model_dir), "--prompt", prompt, "--max-new-tokens", "5"]
    assert main([*args, "--greedy"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(prompt) and len(text) > len(prompt)


def test_inspect_and_generate_on_a_nanogpt_checkpoint(tmp_path, capsys, write_nanogpt, nanogpt_chars):
    write_nanogpt(tmp_path / "ckpt.pt")
    (tmp_path / "input.txt").write_text(nanogpt_chars, encoding="utf-8")
    out = tmp_path / "att.npz"
    assert (
        main(["inspect", "--checkpoint", str(tmp_path / "ckpt.pt"), "--prompt", "Hello", "--out", str(out)])
        == 0
    )
    assert load_inspection(out)["weights"].shape == (2, 4, 5, 5)
    capsys.readouterr()
    args = [
        "generate",
        "--checkpoint",
        str(tmp_path),
        "--prompt",
        "Hi",
        "--max-new-tokens",
        "4",
        "--seed",
        "1",
    ]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("Hi")


def test_the_commands_that_open_a_model_pass_keep_stored_on_and_say_where_it_does_not_apply(
    tmp_path, capsys, monkeypatch, write_hf_family, write_nanogpt, nanogpt_chars
):
    from tests.gguf_files import write_gguf

    folder = tmp_path / "hf"
    model = write_hf_family(folder, "llama", hidden_size=64, intermediate_size=128, num_attention_heads=4)
    gguf = write_gguf(tmp_path / "m.gguf", model, folder, "Q8_0")
    asked, load = [], pretrained.load_gguf

    def load_gguf(*args, **kwargs):  # the loader itself, watched: what each command asked of it
        asked.append(kwargs["stored"])
        return load(*args, **kwargs)

    monkeypatch.setattr(pretrained, "load_gguf", load_gguf)
    out = str(tmp_path / "att.npz")
    assert main(["inspect", "--checkpoint", str(gguf), "--keep-stored", "--prompt", "ab", "--out", out]) == 0
    generate = ["generate", "--checkpoint", str(gguf), "--prompt", "ab", "--max-new-tokens", "2"]
    assert main([*generate, "--greedy", "--no-keep-stored"]) == 0
    assert main(["circuits", "--checkpoint", str(gguf), "--keep-stored"]) == 0
    assert main(["circuits", "--checkpoint", str(gguf)]) == 0
    assert asked == [True, False, True, None]
    assert "note:" not in capsys.readouterr().err  # it applies to a GGUF file

    write_nanogpt(tmp_path / "ckpt.pt")
    (tmp_path / "input.txt").write_text(nanogpt_chars, encoding="utf-8")
    argv = ["inspect", "--checkpoint", str(tmp_path / "ckpt.pt"), "--prompt", "Hi", "--out", out]
    assert main([*argv, "--keep-stored"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "nanoGPT" in notes[0] and "read into float32" in notes[0]
