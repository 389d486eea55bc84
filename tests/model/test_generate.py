"""Generation: KV-cached decoding equals uncached decoding for every causal variant; sampling rules."""

from __future__ import annotations

import warnings

import pytest
import torch

from model.config import GPTConfig
from model.nn.generate import NonFiniteLogits, PromptCroppedWarning, generate, sample_next, stream
from model.nn.gpt import GPT, KVCache
from model.text.tokens import ByteTokenizer, CharTokenizer, UnknownCharactersError

CONTEXT = 12


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def model_for(seed: int = 0, **kw) -> GPT:
    """A tiny model in float64 with large random weights: logits far apart, so argmax never ties."""
    base = dict(vocab_size=11, context_length=CONTEXT, n_layers=2, d_model=16, n_heads=4)
    base.update(kw)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**base)).double()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3)
    return model.eval()


VARIANTS = [
    {},
    {"positions": "sinusoidal"},
    {"positions": "rope"},
    {"positions": "none"},
    {"n_kv_heads": 2},  # GQA
    {"n_kv_heads": 1},  # MQA
    {"n_kv_heads": 2, "positions": "rope", "head_dim": 6},
    {"head_dim": 8},  # head_dim free (wider than d_model / n_heads)
    {"attn_scale": "none"},
    {"attn_scale": "learned"},
    {"attn_scale": "qk_norm"},
    {"norm": "rmsnorm", "mlp": "swiglu", "bias": "none"},
    {"norm_position": "post"},
    {"mlp": "relu", "d_ff": 24, "bias": "qkv"},
    {"tie_embeddings": True, "n_kv_heads": 1, "positions": "sinusoidal"},
]


@pytest.mark.parametrize(
    "variant", VARIANTS, ids=lambda v: ",".join(f"{k}={x}" for k, x in v.items()) or "gpt2"
)
def test_cached_greedy_equals_uncached_past_the_context(variant):
    model = model_for(**variant)
    prompt = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    n_new = 2 * CONTEXT  # runs far past the context: the window slides
    cached = generate(model, prompt, n_new, greedy=True, use_cache=True)
    uncached = generate(model, prompt, n_new, greedy=True, use_cache=False)
    assert cached.shape == (2, 5 + n_new)
    assert torch.equal(cached, uncached)
    # sampling reads the whole distribution: equal too, on a varied sequence
    sampled = generate(model, prompt, n_new, temperature=1.0, seed=3, use_cache=True)
    assert torch.equal(sampled, generate(model, prompt, n_new, temperature=1.0, seed=3, use_cache=False))
    assert len(set(sampled[0, 5:].tolist())) > 3


def test_cached_logits_match_the_full_forward():
    model = model_for(n_kv_heads=2, positions="rope")
    seq = torch.randint(0, 11, (1, CONTEXT))
    full, _ = model(seq)
    cache = KVCache(model.config, 1, CONTEXT, dtype=torch.float64)
    first, _ = model(seq[:, :4], kv_cache=cache)
    steps = [model(seq[:, i : i + 1], kv_cache=cache)[0] for i in range(4, CONTEXT)]
    torch.testing.assert_close(torch.cat([first, *steps], dim=1), full)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_mqa_cache_is_smaller_by_the_group_size(n_kv_heads):
    mha = KVCache(GPTConfig(vocab_size=11, n_heads=4, d_model=16), batch=2, max_len=CONTEXT)
    grouped = KVCache(GPTConfig(vocab_size=11, n_heads=4, d_model=16, n_kv_heads=n_kv_heads), 2, CONTEXT)
    assert mha.nbytes == grouped.nbytes * (4 // n_kv_heads)
    assert grouped.nbytes == 2 * 4 * 2 * n_kv_heads * CONTEXT * 4 * 4  # 2·L·B·H_kv·T·d_k·4 bytes (L=4)


def test_long_prompt_is_cropped_from_the_left_with_a_warning():
    model = model_for()
    long = torch.arange(CONTEXT + 7) % 11
    with pytest.warns(PromptCroppedWarning, match=f"last {CONTEXT} tokens"):
        out = generate(model, long, 5, greedy=True)
    assert torch.equal(out[: CONTEXT + 7], long)  # the whole prompt is returned
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = generate(model, long[-CONTEXT:], 5, greedy=True)
    assert torch.equal(out[-5:], ref[-5:])


def test_window_limits_what_the_model_reads():
    model = model_for()
    prompt = torch.arange(1, 9)[None]
    with pytest.warns(PromptCroppedWarning, match="last 5 tokens"):
        narrow = generate(model, prompt, 10, greedy=True, window=5)
    with pytest.warns(PromptCroppedWarning):
        uncached = generate(model, prompt, 10, greedy=True, window=5, use_cache=False)
    assert torch.equal(narrow, uncached)
    # step by step, the model reads exactly the last 5 tokens
    seq = narrow[0]
    for t in range(8, 18):
        logits, _ = model(seq[t - 5 : t][None])
        assert int(logits[0, -1].argmax()) == int(seq[t])
    with pytest.raises(ValueError, match="window=0"):
        generate(model, prompt, 1, window=0)


def test_seeded_sampling_is_reproducible_and_varies_with_the_seed():
    model = model_for()
    prompt = torch.tensor([[1, 2, 3]])
    a = generate(model, prompt, 20, temperature=1.5, seed=7)
    assert torch.equal(a, generate(model, prompt, 20, temperature=1.5, seed=7))
    assert torch.equal(a, generate(model, prompt, 20, temperature=1.5, seed=7, use_cache=False))
    assert not torch.equal(a, generate(model, prompt, 20, temperature=1.5, seed=8))


def test_temperature_zero_and_top_k_one_are_greedy():
    model = model_for()
    prompt = torch.tensor([[4, 2]])
    greedy = generate(model, prompt, 10, greedy=True)
    assert torch.equal(generate(model, prompt, 10, temperature=0.0), greedy)
    assert torch.equal(generate(model, prompt, 10, temperature=2.0, top_k=1, seed=1), greedy)
    assert torch.equal(generate(model, prompt, 10, temperature=2.0, top_p=1e-6, seed=1), greedy)


def _support(n: int = 400, **kw) -> set[int]:
    logits = torch.log(torch.tensor([[0.05, 0.5, 0.15, 0.3]])).repeat(n, 1)
    g = torch.Generator().manual_seed(0)
    return set(sample_next(logits, generator=g, **kw).flatten().tolist())


def test_top_k_and_top_p_restrict_the_support():
    assert _support() == {0, 1, 2, 3}
    assert _support(top_k=2) == {1, 3}
    assert _support(top_k=3) == {1, 2, 3}
    assert _support(top_p=0.8) == {1, 3}  # 0.5 + 0.3 reaches 0.8: the nucleus stops there
    assert _support(top_p=0.81) == {1, 2, 3}
    assert _support(top_p=0.5) == {1}


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"temperature": -1.0}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_bad_sampling_arguments_are_named(kw, message):
    with pytest.raises(ValueError, match=message):
        generate(model_for(), torch.tensor([[1]]), 3, **kw)


def test_generation_keeps_the_models_mode():
    model = model_for().train()
    generate(model, torch.tensor([[1, 2]]), 3, greedy=True)
    assert model.training


def test_stream_yields_each_tokens_text():
    tok = CharTokenizer("abcdefghijk")
    model = model_for()
    pieces = list(stream(model, tok, "abc", 15, greedy=True))
    assert len(pieces) == 15 and all(len(p) == 1 for p in pieces)
    ids = generate(model, torch.tensor(tok.encode("abc")), 15, greedy=True)
    assert "".join(pieces) == tok.decode(ids[3:].tolist())
    with pytest.raises(UnknownCharactersError, match="'z'"):
        list(stream(model, tok, "abz", 3))
    with pytest.raises(ValueError, match="empty"):
        list(stream(model, tok, "", 3))


class ScriptedModel(torch.nn.Module):
    """Emits a fixed sequence of byte tokens (one per position), to test stream's UTF-8 handling."""

    def __init__(self, script: bytes):
        super().__init__()
        self.config = GPTConfig(vocab_size=256, context_length=64, n_layers=1, d_model=8, n_heads=1)
        self.script = list(script)
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, idx, targets=None, *, kv_cache=None):
        start = kv_cache.length
        kv_cache.length += idx.shape[1]
        pos = start + idx.shape[1] - 1 - 1  # tokens generated so far, the prompt being 1 byte
        logits = torch.zeros(idx.shape[0], idx.shape[1], 256)
        logits[:, -1, self.script[min(pos + 1, len(self.script) - 1)]] = 10.0
        return logits, None


def test_stream_holds_back_incomplete_utf8_characters():
    text = "é→a"
    pieces = list(stream(ScriptedModel(text.encode()), ByteTokenizer(), ">", len(text.encode()), greedy=True))
    assert pieces == ["", "é", "", "", "→", "a"]


def test_generation_ends_after_a_stop_token():
    """A tokenizer's stop ids (its EOS, end-of-turn) end the stream and generate(stop_ids=) after they
    are produced: generate keeps the stop token, the stream never shows its text; a batch ends once
    every row has produced one."""
    tok = ByteTokenizer()
    model = ScriptedModel(b"ab\ncd\n")  # after the 1-byte prompt: a, b, newline, c, d, newline
    tok.stop_ids = frozenset({ord("\n")})
    assert list(stream(model, tok, "x", 10)) == ["a", "b", ""]
    assert "".join(stream(model, tok, "x", 10, stop_ids={ord("d")})) == "ab\nc"  # other stop ids
    assert "".join(stream(model, tok, "x", 10, stop=False)) == "ab\ncd\n\n\n\n\n"
    out = generate(model, torch.tensor([ord("x")]), 10, greedy=True, stop_ids={ord("d")})
    assert bytes(out.tolist()) == b"xab\ncd"
    assert generate(model, torch.tensor([ord("x")]), 10, greedy=True).shape == (11,)  # no stop ids


def test_a_hugging_face_folder_brings_its_stop_ids(tmp_path, write_hf_family):
    """transformers stops at generation_config.json's and config.json's eos_token_id (a list or a
    number) and the tokenizer's eos_token: so does every stream of the opened model."""
    import json

    from model.io.pretrained import open_model

    write_hf_family(tmp_path, "llama")
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 7, 10**9]}))
    ckpt = open_model(tmp_path)
    assert ckpt.tokenizer.stop_ids == {2, 7}  # an id beyond the vocabulary is left out


@pytest.mark.parametrize("use_cache", [True, False])
def test_weights_that_are_nan_end_generation_in_one_line_saying_where(use_cache):
    """One NaN in layer 1's MLP: the logits are NaN, and the error names them, the first hook point
    holding NaN (that MLP's output: everything before it is finite) and the weight; sampling, greedy
    decoding and the text stream all stop there instead of sampling from NaN."""
    model = model_for()
    with torch.no_grad():
        model.blocks[1].mlp.fc_in.weight[3, 2] = float("nan")
    prompt = torch.tensor([1, 2, 3])
    for run in (
        lambda: generate(model, prompt, 5, seed=0, use_cache=use_cache),
        lambda: generate(model, prompt, 5, greedy=True, use_cache=use_cache),
        lambda: "".join(stream(model, CharTokenizer("abcdefghijk"), "abc", 5, use_cache=use_cache)),
    ):
        with pytest.raises(NonFiniteLogits) as caught:
            run()
        message = str(caught.value)
        assert "\n" not in message and "new token 1 are not finite" in message
        assert (
            f"({model.config.core.vocab_size} NaN of {model.config.core.vocab_size})" in message
        )  # every logit
        assert "first appear at blocks.1.mlp.out;" in message and "blocks.1.mlp.fc_in.weight" in message


def test_logits_that_overflow_are_named_with_every_weight_finite():
    """Finite weights whose logits overflow float32 at the unembedding: the final norm writes 1 in every
    dimension, and d_model products of 1 × 3e38 sum past float32's largest number (3.4e38)."""
    model = model_for().float()
    with torch.no_grad():
        model.norm_f.weight.fill_(0.0)
        model.norm_f.bias.fill_(1.0)
        model.lm_head.weight.fill_(3e38)
    with pytest.raises(NonFiniteLogits) as caught:
        generate(model, torch.tensor([1, 2, 3]), 3, greedy=True)
    v = model.config.core.vocab_size
    message = str(caught.value)
    assert f"({v} +∞ of {v})" in message and "first appear at logits;" in message
    assert message.endswith("every weight is finite, so the numbers outgrew float32")
