"""Hostile model files, at the model level: every one a single clear line, or, where the file can be read
exactly, the same numbers as ``transformers`` (never a silently different model).

JSON read from users (a key written twice, a number of 5,000 digits), config.json numbers that divide
or are not numbers, windows on some layers only, tokenizer.json files the ``tokenizers`` library
rejects or panics on (a Rust panic is a ``BaseException``), ids past the model's vocabulary, and text
that is not valid Unicode (a lone surrogate: bytes that are not UTF-8 on a command line).
"""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch

from model.config import ConfigError, GPTConfig
from model.files import read_json
from model.io.checkpoint.saved import CheckpointError
from model.io.hf.families import family_config
from model.io.pretrained import config_of, detect, open_model
from model.text.tokens import TokenizerError


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text, text
    return text


# ---- JSON from users: one reader ------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, message",
    [
        ('{"d_model": 64, "d_model": 128}', "repeats the key 'd_model'"),
        ('{"a": {"b": 1, "b": 2}}', "repeats the key 'b'"),
        ('{"vocab_size": ' + "7" * 5000 + "}", "number of 5000 digits at 'vocab_size'"),
        ('{"ids": [1, -' + "7" * 5000 + "]}", "number of 5000 digits at 'ids'"),
        ("[" + "7" * 5000 + "]", "over 4300 digits"),
    ],
)
def test_json_that_json_loads_lets_through_is_one_line(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=message) as got:
        read_json(path, error=CheckpointError)
    assert _one_line(got.value).startswith("config.json ")
    with pytest.raises(ConfigError, match=message):
        GPTConfig.from_json(text)
    with pytest.raises(ConfigError, match=message):
        GPTConfig.load(path)


def test_config_of_a_broken_json_file_says_so_in_words_not_letters(tmp_path):
    """config_of read a .json with ConfigError as the error kind, which splits a string into letters."""
    path = tmp_path / "mine.json"
    path.write_text('{"n_layers": 2, "n_layers": 3}')
    with pytest.raises(ConfigError) as got:
        config_of(path)
    assert "repeats the key 'n_layers'" in _one_line(got.value) and "; " not in str(got.value)


def test_parse_json_keeps_what_json_reads():
    from model.files import parse_json

    assert parse_json('{"a": [1, 2.5, {"b": null}], "c": NaN}', error=ValueError, what="x")["a"] == [
        1,
        2.5,
        {"b": None},
    ]


# ---- config.json numbers: checked before any arithmetic ----------------------------------------------
_BASE = dict(vocab_size=10, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=8)


@pytest.mark.parametrize(
    "model_type, changes, message",
    [
        ("llama", {"num_attention_heads": 0, "head_dim": 4}, "num_attention_heads=0 must be a positive"),
        ("gemma2", {"num_attention_heads": 0}, "num_attention_heads=0"),
        ("llama", {"num_attention_heads": "2"}, "num_attention_heads='2'"),
        ("llama", {"num_key_value_heads": 0}, "num_key_value_heads=0"),
        ("gpt_neox", {"rotary_pct": float("nan")}, "rotary_pct=nan must be a finite number"),
        ("gpt_neox", {"rotary_pct": True}, "rotary_pct=True"),
        ("gpt_neox", {"layer_norm_eps": "1e-5"}, "layer_norm_eps='1e-5'"),
        ("gemma3_text", {"sliding_window_pattern": 0}, "sliding_window_pattern=0"),
        ("mixtral", {"num_local_experts": float("nan")}, "num_local_experts=nan"),
        ("mixtral", {"router_jitter_noise": float("nan")}, "router_jitter_noise=nan must be a finite number"),
        (  # transformers' router takes the best topk_group of n_group groups: it cannot route with these
            "deepseek_v3",
            {"first_k_dense_replace": 0, "n_group": 1, "topk_group": 2},
            "topk_group=2 is more than n_group=1: a token cannot choose its experts from 2 of 1 group",
        ),
        (
            "deepseek_v3",
            {"first_k_dense_replace": 0, "n_group": 2, "topk_group": 3},
            "topk_group=3 is more th",
        ),
        ("qwen3_moe", {"decoder_sparse_step": 0}, "decoder_sparse_step=0"),
        ("qwen3_moe", {"mlp_only_layers": 5}, "mlp_only_layers=5"),
        (
            "qwen2",
            {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": float("nan")},
            "max_window_layers=nan",
        ),
        ("llama", {"tie_word_embeddings": "no"}, "tie_word_embeddings='no' must be true or false"),
        (
            "llama",
            {
                "rope_scaling": {
                    "rope_type": "llama3",
                    "factor": 8,
                    "low_freq_factor": 1,
                    "high_freq_factor": 4,
                    "original_max_position_embeddings": float("nan"),
                }
            },
            "original_max_position_embeddings=nan",
        ),
    ],
)
def test_config_numbers_that_are_not_numbers_name_the_field(model_type, changes, message):
    with pytest.raises(CheckpointError, match=message) as got:
        family_config({"model_type": model_type, **_BASE, **changes})
    assert _one_line(got.value).startswith(f"config.json ({model_type}): ")


# ---- sliding windows: as the family's code applies them, or refused ----------------------------------
@pytest.fixture(scope="module")
def windowed(tmp_path_factory, write_hf_family):
    """model_type -> (folder, transformers' model): 3 layers, the first global, the others sliding (4)."""
    made = {}
    for model_type in ("qwen2", "qwen3"):
        directory = tmp_path_factory.mktemp(f"{model_type}_window")
        reference = write_hf_family(
            directory,
            model_type,
            num_hidden_layers=3,
            use_sliding_window=True,
            sliding_window=4,
            max_window_layers=1,
        )
        assert reference.config.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
        made[model_type] = directory, reference
    return made


def _without_layer_types(directory, tmp_path):
    """A copy whose config.json has no layer_types: the layers come from max_window_layers."""
    dst = tmp_path / "no_layer_types"
    shutil.copytree(directory, dst)
    cfg = json.loads((dst / "config.json").read_text())
    del cfg["layer_types"]
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3"])
@pytest.mark.parametrize("layer_types", [True, False], ids=["layer_types", "max_window_layers"])
def test_qwen_windows_on_some_layers_match_transformers(windowed, tmp_path, model_type, layer_types):
    directory, reference = windowed[model_type]
    if not layer_types:
        directory = _without_layer_types(directory, tmp_path)
    ckpt = open_model(directory)
    cfg = ckpt.model.config
    assert (cfg.attention.sliding_window, cfg.attention.window_pattern) == (4, "GLL")
    assert [cfg.is_local_layer(i) for i in range(3)] == [False, True, True]
    ids = torch.arange(3, 19)[None]  # 16 tokens, past the window of 4
    with torch.no_grad():
        ours, theirs = ckpt.model(ids)[0], reference(ids).logits
        assert (ours - theirs).abs().max() < 1e-4
        unwindowed = ckpt.model.config.replace(sliding_window=None, window_pattern="")
        from model.io.weights import build_from_state_dict

        everywhere_global = build_from_state_dict(unwindowed, dict(ckpt.model.state_dict()))(ids)[0]
        assert (everywhere_global - theirs).abs().max() > 1e-2  # the window matters on this sequence


@pytest.mark.parametrize(
    "model_type, changes, message",
    [
        (
            "mistral",
            {"sliding_window": 4, "layer_types": ["full_attention"] * 2},
            "mistral's code slides every layer",
        ),
        (
            "mistral",
            {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
            "only some layers \\(layer_types: 1 of 2\\)",
        ),
        (
            "phi3",
            {"sliding_window": 4, "layer_types": ["full_attention", "sliding_attention"]},
            "for phi3, whose code slides every layer",
        ),
        (
            "llama",
            {"sliding_window": 4, "layer_types": ["sliding_attention"] * 2},
            "llama's code has no sliding window",
        ),
        (
            "olmo2",
            {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
            "for olmo2, whose code has no sliding window",
        ),
        (
            "deepseek_v3",
            {"sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
            "for deepseek_v3, whose code has no",
        ),
        (
            "qwen2",
            {"sliding_window": 4, "layer_types": ["full_attention", "sliding_attention"]},
            "use_sliding_window is false",
        ),
    ],
)
def test_layer_types_the_family_does_not_apply_are_refused(model_type, changes, message):
    with pytest.raises(CheckpointError, match=message) as got:
        family_config({"model_type": model_type, **_BASE, **changes})
    _one_line(got.value)


def test_windows_as_each_familys_code_applies_them():
    def window(model_type, **changes):
        cfg = family_config({"model_type": model_type, **_BASE, "num_hidden_layers": 4, **changes})
        return cfg.attention.sliding_window, cfg.attention.window_pattern

    qwen = dict(use_sliding_window=True, sliding_window=4)
    assert window("qwen2", **qwen, max_window_layers=2) == (4, "GGLL")
    assert window("qwen3", **qwen, max_window_layers=0) == (4, "")
    assert window("qwen2", **qwen, max_window_layers=4) == (None, "")
    assert window("qwen3_moe", **qwen, max_window_layers=2) == (4, "")  # its code slides every layer
    assert window("mistral", sliding_window=4, layer_types=["sliding_attention"] * 4) == (4, "")
    assert window("llama", sliding_window=4, use_sliding_window=True) == (None, "")  # Llama has none


# ---- tokenizer.json: what the tokenizers library rejects or panics on ------------------------------
@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory, write_hf_family):
    directory = tmp_path_factory.mktemp("llama")
    write_hf_family(directory, "llama")
    return directory


def _with_tokenizer(llama_dir, tmp_path, edit=None, text=None):
    dst = tmp_path / "edited"
    shutil.copytree(llama_dir, dst)
    if text is None:
        data = json.loads((dst / "tokenizer.json").read_text())
        edit(data)
        text = json.dumps(data)
    (dst / "tokenizer.json").write_text(text)
    return dst


def _byte_token_id(data, to):
    vocab = data["model"]["vocab"]
    vocab["<0xFF>"] = to  # a byte token no merge uses: the vocabulary keeps its size, an id moves past V


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["model"].__setitem__("unk_token", "<nope>"), r"tokenizer.json: its unk_token '<nope>'"),
        (
            lambda d: d["post_processor"]["special_tokens"]["<s>"].__setitem__("ids", [10**9]),
            r"token id 1000000000 but config.json says vocab_size=420",
        ),
        (
            lambda d: _byte_token_id(d, 5000),
            r"tokenizer.json has token id 5000 but config.json says vocab_size=420",
        ),
        (lambda d: d.__setitem__("model", "x"), r"tokenizer.json is not a valid Hugging Face tokenizer"),
    ],
    ids=["unknown unk_token", "post-processor id 1e9", "vocabulary id past V", "model not an object"],
)
def test_a_tokenizer_json_the_library_rejects_is_refused_at_open(llama_dir, tmp_path, edit, message):
    with pytest.raises(CheckpointError, match=message) as got:
        open_model(_with_tokenizer(llama_dir, tmp_path, edit))
    _one_line(got.value)


def test_a_tokenizer_json_with_a_repeated_key_is_refused(llama_dir, tmp_path):
    text = (llama_dir / "tokenizer.json").read_text()
    doubled = text.replace('"version":', '"truncation": null, "version":', 1)
    with pytest.raises(CheckpointError, match=r"tokenizer\.json repeats the key 'truncation'"):
        open_model(_with_tokenizer(llama_dir, tmp_path, text=doubled))


def test_truncation_and_padding_in_the_file_neither_panic_nor_cut_the_prompt(llama_dir, tmp_path):
    """A stride ≥ max_length panics in Rust at the first encode; any truncation would cut every prompt:
    transformers runs a tokenizer without them unless asked, and so do we."""

    def edit(d):
        d["truncation"] = {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 5}
        d["padding"] = {
            "strategy": {"Fixed": 64},
            "direction": "Right",
            "pad_to_multiple_of": None,
            "pad_id": 0,
            "pad_type_id": 0,
            "pad_token": "<unk>",
        }

    plain = open_model(llama_dir).tokenizer.encode("the cat sat on the mat")
    ckpt = open_model(_with_tokenizer(llama_dir, tmp_path, edit))
    assert ckpt.tokenizer.encode("the cat sat on the mat") == plain and len(plain) > 3


def test_a_panic_inside_the_library_is_one_tokenizer_error(llama_dir):
    """Whatever panics later (here: truncation switched back on under the guard) is a TokenizerError,
    not a ``pyo3_runtime.PanicException`` that ``except Exception`` lets through."""
    from tokenizers import Tokenizer

    from model.text.hf_backend import Backend

    data = json.loads((llama_dir / "tokenizer.json").read_text())
    data["truncation"] = {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 5}
    backend = Backend.from_str(json.dumps(data), "tokenizer.json")
    backend._raw = Tokenizer.from_str(json.dumps(data))  # the library's own, truncation kept: it panics
    with pytest.raises(TokenizerError, match=r"tokenizer\.json: the tokenizers library failed on it"):
        backend.encode("a b c d e f")


# ---- safetensors headers: what the safetensors library refuses ------------------------------------------
def _with_weights_header(llama_dir, tmp_path, edit):
    """A copy of ``llama_dir`` whose model.safetensors header is ``edit(header)``'s JSON text (the tensor
    bytes kept as they are): written as text, so that it may hold what ``json.dumps`` cannot write."""
    dst = tmp_path / "edited"
    shutil.copytree(llama_dir, dst)
    weights = dst / "model.safetensors"
    raw = weights.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    text = edit(json.loads(raw[8 : 8 + n])).encode("utf-8")
    weights.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + n :])
    return dst


_NORM = "model.norm.weight"


def _set(header, name, field, literal):
    """``header`` as JSON text with ``name``'s ``field`` written as the JSON ``literal`` itself."""
    header[name][field] = "@literal@"
    return json.dumps(header).replace('"@literal@"', literal)


def _named_twice(header):
    """The last entry written again before the others, as a second copy over another tensor's bytes."""
    text = json.dumps(header)
    copy = dict(header[_NORM], data_offsets=header["model.layers.0.input_layernorm.weight"]["data_offsets"])
    return "{" + json.dumps(_NORM) + ": " + json.dumps(copy) + ", " + text[1:]


def _sharing_bytes(header):
    """Layer 0's o_proj read from q_proj's bytes (both [32, 32]): two names over one tensor."""
    header["model.layers.0.self_attn.o_proj.weight"]["data_offsets"] = header[
        "model.layers.0.self_attn.q_proj.weight"
    ]["data_offsets"]
    return json.dumps(header)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda h: _set(h, _NORM, "shape", "[1e400]"),
            r"model\.norm\.weight has shape \[inf\], not a list of whole",
        ),
        (lambda h: _set(h, _NORM, "shape", "[32.0]"), r"model\.norm\.weight has shape \[32\.0\], not a list"),
        (
            lambda h: _set(h, _NORM, "data_offsets", "[0, 1e400]"),
            r"model\.norm\.weight has data_offsets \[0, inf\], not two whole numbers",
        ),
        (_named_twice, r"its header repeats the key 'model\.norm\.weight'"),
        (
            _sharing_bytes,
            r"model\.layers\.0\.self_attn\.o_proj\.weight and model\.layers\.0\.self_attn\.q_proj\.weight "
            r"share bytes",
        ),
    ],
    ids=["shape 1e400", "shape a float", "offset 1e400", "a name twice", "two names over the same bytes"],
)
def test_a_safetensors_header_the_library_refuses_is_one_line(llama_dir, tmp_path, edit, message):
    """json.loads reads 1e400 as inf (int() of it raised OverflowError), keeps the last of two equal keys,
    and nothing held two tensors apart: each is now refused in one line naming the file and the tensor."""
    with pytest.raises(CheckpointError, match=message) as got:
        open_model(_with_weights_header(llama_dir, tmp_path, edit))
    assert _one_line(got.value).startswith("model.safetensors is not a readable safetensors file: ")


def test_a_tensor_in_two_shards_is_refused(llama_dir, tmp_path):
    """The shards were read in turn into one map, the last copy of a name winning unseen: here a second
    shard's zeros would have replaced the final norm's weights."""
    from safetensors.torch import load_file, save_file

    dst = tmp_path / "sharded"
    shutil.copytree(llama_dir, dst)
    tensors = load_file(dst / "model.safetensors")
    (dst / "model.safetensors").unlink()
    save_file(tensors, dst / "model-00001-of-00002.safetensors")
    save_file({_NORM: torch.zeros_like(tensors[_NORM])}, dst / "model-00002-of-00002.safetensors")
    weight_map = {name: "model-00001-of-00002.safetensors" for name in tensors}
    weight_map[_NORM] = "model-00002-of-00002.safetensors"
    (dst / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match=r"model\.norm\.weight is in both model-00001-of-00002") as got:
        open_model(dst)
    _one_line(got.value)


# ---- text that is not Unicode: lone surrogates ----------------------------------------------------------
def test_lone_surrogates_encode_as_the_byte_tokenizer_reads_them(llama_dir, tmp_path):
    """Bytes that are not UTF-8 reach Python as lone surrogates ("\\udcff"); UTF-8 cannot hold them, so
    every tokenizer that reads any text reads each as ``?`` (the byte tokenizer always did)."""
    from model.text.bpe import HFTokenizer
    from model.text.tokens import ByteTokenizer

    tok = open_model(llama_dir).tokenizer
    assert tok.encode("ab\udcffcd") == tok.encode("ab?cd")
    assert ByteTokenizer().encode("ab\udcffcd") == ByteTokenizer().encode("ab?cd")
    again = HFTokenizer.from_dict(json.loads(json.dumps(tok.to_dict())))  # our checkpoints' form
    assert again.encode("x\ud800") == again.encode("x?")


def test_a_gguf_tokenizer_reads_lone_surrogates_too():
    from model.text.gguf_tokens import tokenizer_from_gguf
    from tests.model.test_gguf_tokens import _llama_vocab

    tokens, types, scores = _llama_vocab()
    meta = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.scores": scores,
    }
    tok = tokenizer_from_gguf(meta)
    assert tok.encode("a\udcffb") == tok.encode("a?b")


# ---- paths ---------------------------------------------------------------------------------------------
def test_an_empty_model_path_is_named_empty_not_the_current_folder():
    with pytest.raises(CheckpointError, match="the model path is empty"):
        detect("")


def test_our_hf_bpe_form_is_guarded_too():
    from model.text.bpe import HFTokenizer

    d = {"type": "hf_bpe", "tokenizer": json.dumps({"model": "x"})}
    with pytest.raises(TokenizerError, match="the hf_bpe tokenizer is not a valid Hugging Face tokenizer"):
        HFTokenizer.from_dict(copy.deepcopy(d))


def test_our_checkpoint_with_a_token_id_past_the_vocabulary_is_refused(tmp_path):
    """A tokenizer of three tokens whose last id is 500 fits a count of 16, not the embedding."""
    from model.config import GPTConfig
    from model.io.checkpoint.saved import CheckpointError, load_checkpoint, save_checkpoint
    from model.nn.gpt import init_model
    from model.text.bpe import HFTokenizer

    tok = HFTokenizer.gpt2_from_vocab_merges({"a": 0, "b": 1, "c": 500}, [], special_tokens=())
    assert tok.vocab_size <= 16 and tok.largest_id == 500
    cfg = GPTConfig(vocab_size=16, n_layers=1, d_model=16, n_heads=2, context_length=8)
    save_checkpoint(tmp_path / "ckpt", init_model(cfg, seed=0), tok)
    with pytest.raises(CheckpointError, match=r"token id 500 but config\.json has vocab_size=16"):
        load_checkpoint(tmp_path / "ckpt")
