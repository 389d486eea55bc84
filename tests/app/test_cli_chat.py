"""`attention-lab generate --chat`: the message read in the model's chat template (with --system), the
reply printed alone and ended by the end-of-turn token, which is not printed; a model without a
template, and --system without --chat, are refused in one line (exit status 2)."""

from __future__ import annotations

import json

import pytest
import torch

import model.nn.generate as gen
from app.cli import main

TEMPLATE = (
    "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory, write_hf_family):
    """A tiny random Llama folder whose tokenizer_config.json carries a chat template (EOS ``</s>``)."""
    folder = tmp_path_factory.mktemp("chat")
    write_hf_family(folder, "llama")
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return folder


def _scripted(monkeypatch, script: list[int]) -> list[str]:
    """Each sampled token is the next of ``script``; returns the prompts ``stream`` was given."""
    calls = iter(script)
    monkeypatch.setattr(gen, "sample_next", lambda logits, **_: torch.tensor([[next(calls)]]))
    prompts: list[str] = []
    real = gen.stream

    def stream(model, tokenizer, prompt, *a, **kw):
        prompts.append(prompt)
        return real(model, tokenizer, prompt, *a, **kw)

    monkeypatch.setattr(gen, "stream", stream)
    return prompts


def test_chat_prints_the_reply_without_its_end_token(chat_folder, monkeypatch, capsys):
    from model.io.pretrained import open_model

    tok = open_model(chat_folder).tokenizer
    end = tok.token_id("</s>")
    assert end in tok.stop_ids
    words = tok.encode("hello world")[1:3]  # after <s>
    prompts = _scripted(monkeypatch, [*words, end, *words])
    argv = ["generate", "--checkpoint", str(chat_folder), "--prompt", "Hi", "--chat", "--system", "Be brief."]
    assert main([*argv, "--max-new-tokens", "20"]) == 0
    out = capsys.readouterr().out
    assert out == tok.decode(words) + "\n" and "</s>" not in out
    assert prompts == ["[system]Be brief.</s>[user]Hi</s>[assistant]"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--chat"], "--chat needs a model with a chat template"),
        (["--system", "x"], "--system is the system prompt of a chat: add --chat"),
    ],
)
def test_chat_mistakes_are_one_line_and_exit_2(tmp_path, write_hf_family, capsys, extra, message):
    write_hf_family(tmp_path, "llama")  # no chat template
    capsys.readouterr()  # what writing the folder printed
    rc = main(["generate", "--checkpoint", str(tmp_path), "--prompt", "Hi", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "template, reason",
    [
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "time limit"),
        ("{% set x = 'a' * 10**9 %}ok", "memory limit"),
        ("{{ range(1, 2, 0)|list }}", "ValueError"),
        ("{% if false %}{% endif %}", "wrote nothing"),
    ],
    ids=["loops", "gigabytes", "exception", "empty"],
)
def test_a_failing_template_is_one_line_naming_its_file_and_exit_2(
    tmp_path, write_hf_family, capsys, monkeypatch, template, reason
):
    from model.text import template_process

    monkeypatch.setattr(template_process, "TIME_LIMIT_S", 0.5)  # the default is a few seconds
    write_hf_family(tmp_path, "llama")
    path = tmp_path / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["chat_template"] = template
    path.write_text(json.dumps(cfg))
    capsys.readouterr()
    rc = main(["generate", "--checkpoint", str(tmp_path), "--prompt", "Hi", "--chat"])
    out, err = capsys.readouterr()
    assert rc == 2 and len(err.strip().splitlines()) == 1 and out == ""
    assert f"chat template in {path} (chat_template): " in err and reason in err
