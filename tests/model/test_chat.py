"""Chat mode's model side: the templated prompt of a conversation (SmolLM2's own template, read from
its GGUF file, against the text its documented format gives), the template a Hugging Face folder
carries, and generation ending at an end-of-turn token whose text never appears."""

from __future__ import annotations

import json

import pytest
import torch

from model.io.gguf.file import read_header
from model.nn.generate import generate, stream
from model.text.chat import ChatTemplate, ChatTemplateError, chat_template_for
from model.text.gguf_tokens import tokenizer_from_gguf
from model.text.tokens import CharTokenizer
from tests.model.test_generate import model_for


@pytest.fixture(scope="module")
def smol_tok(smollm2_path):
    """SmolLM2's tokenizer from its GGUF metadata alone (no weights loaded)."""
    return tokenizer_from_gguf(read_header(smollm2_path).metadata, name="SmolLM2-135M")


def test_the_gguf_tokenizer_carries_smollm2s_template_and_end_of_turn(smol_tok):
    chat = smol_tok.chat_template
    assert isinstance(chat, ChatTemplate) and "<|im_start|>" in chat.text
    assert smol_tok.token_strings(sorted(smol_tok.stop_ids)) == ["<|im_end|>"]
    assert chat.eos_token == "<|im_end|>"


def test_a_conversation_is_templated_as_the_format_says(smol_tok):
    chat = smol_tok.chat_template
    assert chat.prompt("You are terse.", [], "Hi") == (
        "<|im_start|>system\nYou are terse.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    # no system prompt: SmolLM2's template writes its own default one
    assert chat.prompt("", [], "Hi") == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    history = [("user", "Hi"), ("assistant", "Hello! How can I help?")]
    assert chat.prompt("Be kind.", history, "Name a colour.") == (
        "<|im_start|>system\nBe kind.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
        "<|im_start|>user\nName a colour.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # the end-of-turn token is one token of the prompt, not its characters spelled out
    ids = smol_tok.encode(chat.prompt("", [], "Hi"))
    assert ids.count(min(smol_tok.stop_ids)) == 2


def test_a_turn_with_another_role_is_refused_in_one_line():
    chat = ChatTemplate("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    with pytest.raises(ChatTemplateError, match="'user' or 'assistant', not 'tool'"):
        chat.prompt("", [("tool", "x")], "hi")


def test_bos_is_written_by_the_template_only_when_the_tokenizer_does_not_add_it():
    tok = CharTokenizer("ab")
    assert chat_template_for("{{ bos_token }}", tok, bos_token="<s>").bos_token == "<s>"
    tok.prefix_ids = [0]  # a tokenizer that puts BOS before every text
    assert chat_template_for("{{ bos_token }}", tok, bos_token="<s>").bos_token == ""
    assert chat_template_for("", tok) is None and chat_template_for(None, tok) is None


def test_a_hugging_face_folder_brings_its_chat_template(tmp_path, write_hf_family):
    from model.io.pretrained import open_model

    write_hf_family(tmp_path, "llama")
    assert open_model(tmp_path).tokenizer.chat_template is None  # this folder has none
    cfg_path = tmp_path / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update(
        chat_template="{{ bos_token }}[{{ messages[-1]['content'] }}]{{ eos_token }}", eos_token="</s>"
    )
    cfg_path.write_text(json.dumps(cfg))
    chat = open_model(tmp_path).tokenizer.chat_template
    assert chat is not None and chat.prompt("", [], "hi") == "[hi]</s>"  # BOS: the tokenizer adds it
    assert chat.source == f"chat template in {cfg_path} (chat_template)"  # what its errors name
    jinja = tmp_path / "chat_template.jinja"
    jinja.write_text("<{{ messages[-1]['content'] }}>", encoding="utf-8")
    chat = open_model(tmp_path).tokenizer.chat_template
    assert chat.prompt("", [], "hi") == "<hi>" and chat.source == f"chat template in {jinja}"  # the file wins


def test_a_gguf_files_template_that_loops_is_stopped_naming_the_file(tmp_path, write_hf_family):
    """The loader names the file in the template's errors: a template that loops without writing is
    stopped at its time limit, in one line that begins with the file's name and the key."""
    from model.io.pretrained import open_model
    from tests.gguf_files import write_gguf

    folder = tmp_path / "hf"
    model = write_hf_family(folder, "llama")
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    path = write_gguf(
        tmp_path / "looping.gguf", model, folder, metadata={"tokenizer.chat_template": (loops, "STRING")}
    )
    chat = open_model(path).tokenizer.chat_template
    with pytest.raises(ChatTemplateError) as caught:
        chat.prompt("", [], "hi", time_limit=0.3)
    assert str(caught.value) == (
        "chat template in looping.gguf (tokenizer.chat_template): ran past its time limit of 0.3 s and "
        "was stopped"
    )


def _force_end(model, ends: set[int], at_call: int):
    """A logits hook: the model's ``at_call``-th forward makes ``max(ends)`` certain (a logit 10⁹ above
    the others: +∞ would leave no distribution to sample from); before it, every end token is
    impossible (−∞)."""
    calls = [0]

    def hook(_module, _inputs, output):
        calls[0] += 1
        logits = output[0].clone()
        logits[:, -1, sorted(ends)] = float("-inf")
        if calls[0] == at_call:
            logits[:, -1, max(ends)] = logits[:, -1].max() + 1e9
        return (logits, *output[1:])

    return model.register_forward_hook(hook)


@pytest.mark.parametrize("ends", [{10}, {9, 10}])
def test_generation_stops_at_an_end_token_and_never_shows_it(ends):
    """A random model whose 4th token is forced to be an end token: the stream stops there and its text
    holds the three tokens before it and nothing of the end token's text ("k")."""
    tok = CharTokenizer("abcdefghijk")  # "k" is id 10, "j" id 9
    model = model_for()
    end = max(ends)
    hook = _force_end(model, ends, at_call=4)  # the prefill, then one call per new token
    try:
        text = "".join(stream(model, tok, "abc", 20, greedy=True, stop_ids=ends))
    finally:
        hook.remove()
    hook = _force_end(model, ends, at_call=4)
    try:
        ids = generate(model, torch.tensor(tok.encode("abc")), 20, greedy=True, stop_ids=ends)
    finally:
        hook.remove()
    new = ids[3:].tolist()
    assert len(new) == 4 and new[-1] == end  # generate keeps the stop id, as transformers does
    assert text == tok.decode(new[:-1]) and len(text) == 3 and "k" not in text
