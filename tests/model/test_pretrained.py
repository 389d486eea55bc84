"""Opening pretrained models from local files: Hugging Face GPT-2 and nanoGPT, exactly.

The reference for GPT-2 is ``transformers`` itself (a test-only dependency): a tiny random
GPT2LMHeadModel is saved in HF format, opened with ours, and compared logit for logit, attention
weight for attention weight and greedy token for greedy token. The reference for nanoGPT is a copy of
nanoGPT's model (below), saved the way its train.py saves checkpoints.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from model.config import GPTConfig
from model.interp.plan import estimate_nbytes
from model.interp.trace import run_with_trace
from model.io.checkpoint.saved import CheckpointError, save_checkpoint
from model.io.pretrained import describe_origin, detect, open_model
from model.nn.generate import generate
from model.nn.gpt import init_model
from model.text.tokens import CharTokenizer

PROMPTS = [
    "The quick brown fox",
    "def main(x):\n    return",
    "日本語のテキスト 😀",
    "It's what we'll do, isn't it? The lazy dog",
]


# ---------------------------------------------------------------------------------------------
# Hugging Face GPT-2
# ---------------------------------------------------------------------------------------------
VARIANTS = {
    "gpt2": {},
    "exact-gelu-untied-eps": dict(
        activation_function="gelu", tie_word_embeddings=False, n_inner=80, layer_norm_epsilon=1e-2
    ),
    "relu-unscaled": dict(activation_function="relu", scale_attn_weights=False),
}


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory, gpt2_tokenizer_dir, write_hf_gpt2):
    """variant -> (directory, transformers' model, our Checkpoint), each written and opened once."""
    made: dict = {}

    def get(variant: str):
        if variant not in made:
            directory = tmp_path_factory.mktemp(f"hf-{variant}")
            reference = write_hf_gpt2(directory, gpt2_tokenizer_dir, **VARIANTS[variant])
            made[variant] = directory, reference, open_model(directory)
        return made[variant]

    return get


@pytest.fixture(params=list(VARIANTS))
def hf_model(request, hf_models):
    return hf_models(request.param)


def test_hf_gpt2_logits_match_transformers(hf_model):
    _, reference, ckpt = hf_model
    assert ckpt.meta["kind"] == "hf-gpt2"
    assert not ckpt.model.training
    for prompt in PROMPTS:
        ids = torch.tensor([ckpt.tokenizer.encode(prompt)])
        with torch.no_grad():
            expected = reference(ids).logits
            ours, _ = ckpt.model(ids)
        assert ours.shape == expected.shape
        assert (ours - expected).abs().max().item() < 1e-4, prompt
        assert expected.std().item() > 1.0  # random weights: logits far from a constant


def test_hf_gpt2_attention_weights_match_transformers(hf_model):
    _, reference, ckpt = hf_model
    ids = torch.tensor([ckpt.tokenizer.encode(PROMPTS[3])])
    with torch.no_grad():
        expected = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]  # [L, H, T, T]
    trace = run_with_trace(ckpt.model, ids, kinds=("pattern",))
    assert torch.allclose(torch.from_numpy(trace.stack("pattern")), expected, atol=1e-5)


def test_hf_gpt2_greedy_generation_matches_transformers(hf_models):
    _, reference, ckpt = hf_models("gpt2")  # the other variants' logits are exact too (above)
    for prompt in PROMPTS:
        ids = torch.tensor([ckpt.tokenizer.encode(prompt)])
        n = min(16, ckpt.config.core.context_length - ids.shape[1])
        with torch.no_grad():
            expected = reference.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False, pad_token_id=0
            )
            ours = generate(ckpt.model, ids, n, greedy=True)  # KV-cached decoding
        assert ours.tolist() == expected.tolist(), prompt
        assert len(set(ours[0, -n:].tolist())) > 1  # not a degenerate single-token loop


def test_hf_gpt2_config_and_meta(hf_model):
    directory, reference, ckpt = hf_model
    hf = reference.config
    cfg = ckpt.config
    assert (
        cfg.core.n_layers,
        cfg.attention.n_heads,
        cfg.core.d_model,
        cfg.core.context_length,
        cfg.core.vocab_size,
    ) == (
        hf.n_layer,
        hf.n_head,
        hf.n_embd,
        hf.n_positions,
        hf.vocab_size,
    )
    assert cfg.normalization.norm_eps == hf.layer_norm_epsilon
    assert cfg.core.tie_embeddings == hf.tie_word_embeddings
    assert (ckpt.model.lm_head is None) == hf.tie_word_embeddings
    assert ckpt.meta["n_params"] == reference.num_parameters() == ckpt.model.num_params()
    assert ckpt.meta["name"] == directory.name
    assert str(ckpt.tokenizer.vocab_size) in ckpt.meta["tokenizer"]
    assert all(p.requires_grad for p in ckpt.model.parameters())  # ready to fine-tune


def test_hf_gpt2_detected_by_content_from_dir_or_any_file(hf_model):
    directory, _, _ = hf_model
    assert detect(directory) == ("hf-gpt2", directory)
    assert detect(directory / "config.json") == ("hf-gpt2", directory)
    assert detect(directory / "model.safetensors") == ("hf-gpt2", directory)


def test_hub_layout_without_prefix_and_with_mask_buffers(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2):
    """The hub's gpt2 weights name tensors without "transformer." and may carry attn.bias masks."""
    reference = write_hf_gpt2(tmp_path, gpt2_tokenizer_dir, seed=3)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    hub = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    for i in range(reference.config.n_layer):
        hub[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 48, 48))
        hub[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(hub, str(tmp_path / "model.safetensors"))
    ckpt = open_model(tmp_path)
    ids = torch.tensor([ckpt.tokenizer.encode(PROMPTS[1])])
    with torch.no_grad():
        assert (ckpt.model(ids)[0] - reference(ids).logits).abs().max().item() < 1e-4


@pytest.mark.parametrize("layout", ["sharded", "pytorch_model.bin"])
def test_other_weight_files(tmp_path, gpt2_tokenizer_dir, layout, write_hf_gpt2):
    reference = write_hf_gpt2(tmp_path, gpt2_tokenizer_dir, seed=4)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    (tmp_path / "model.safetensors").unlink()
    if layout == "sharded":
        names = sorted(tensors)
        halves = {f"model-0000{i + 1}-of-00002.safetensors": names[i::2] for i in range(2)}
        for fname, keys in halves.items():
            save_file({k: tensors[k] for k in keys}, str(tmp_path / fname))
        weight_map = {k: fname for fname, keys in halves.items() for k in keys}
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    else:
        torch.save(tensors, tmp_path / "pytorch_model.bin")  # read with weights_only=True
    ckpt = open_model(tmp_path)
    ids = torch.tensor([ckpt.tokenizer.encode(PROMPTS[2])])
    with torch.no_grad():
        assert (ckpt.model(ids)[0] - reference(ids).logits).abs().max().item() < 1e-4


def test_gpt2_shaped_trace_stays_within_the_documented_budget(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2):
    """12 layers × 12 heads, a 256-token prompt, weights only in float16: L·H·T²·2 bytes."""
    write_hf_gpt2(tmp_path, gpt2_tokenizer_dir, n_layer=12, n_head=12, n_embd=96, n_positions=256)
    ckpt = open_model(tmp_path)
    ids = torch.randint(0, ckpt.config.core.vocab_size, (1, 256), generator=torch.Generator().manual_seed(0))
    trace = run_with_trace(ckpt.model, ids, kinds=("pattern",), dtype=torch.float16)
    budget = estimate_nbytes(12, 12, 256, 96, 8, kinds=("pattern",), bytes_per_value=2)
    assert trace.nbytes <= budget == 12 * 12 * 256 * 256 * 2
    w = trace.stack("pattern")
    assert w.shape == (12, 12, 256, 256)
    assert abs(float(w.sum(-1).mean()) - 1.0) < 1e-2


# ---- broken or foreign directories ----------------------------------------------------------
@pytest.fixture
def hf_copy(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2):
    directory = tmp_path / "gpt2-copy"
    directory.mkdir()
    write_hf_gpt2(directory, gpt2_tokenizer_dir)
    return directory


def _edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_other_model_type_is_named(hf_copy):
    _edit_config(hf_copy, model_type="bert")
    with pytest.raises(CheckpointError, match="model_type 'bert'"):
        open_model(hf_copy)


def test_missing_weights_are_named(hf_copy):
    (hf_copy / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors is missing"):
        open_model(hf_copy)


def test_missing_tokenizer_is_named(hf_copy):
    (hf_copy / "merges.txt").unlink()
    with pytest.raises(CheckpointError, match=r"merges\.txt missing"):
        open_model(hf_copy)


def test_config_that_disagrees_with_the_weights(hf_copy):
    _edit_config(hf_copy, n_positions=64)
    with pytest.raises(
        CheckpointError, match=r"transformer\.wpe\.weight has shape \[48, 32\], not \[64, 32\]"
    ):
        open_model(hf_copy)
    _edit_config(hf_copy, n_positions=48, n_layer=1)
    with pytest.raises(CheckpointError, match=r"no place for: transformer\.h\.1\."):
        open_model(hf_copy)
    _edit_config(hf_copy, n_layer=3)
    with pytest.raises(CheckpointError, match=r"missing transformer\.h\.2\."):
        open_model(hf_copy)


def test_unsupported_gpt2_options_are_named(hf_copy):
    _edit_config(hf_copy, activation_function="silu")
    with pytest.raises(CheckpointError, match="activation_function 'silu'"):
        open_model(hf_copy)
    _edit_config(hf_copy, activation_function="gelu_new", scale_attn_by_inverse_layer_idx=True)
    with pytest.raises(CheckpointError, match="scale_attn_by_inverse_layer_idx"):
        open_model(hf_copy)


def test_tokenizer_larger_than_the_model_vocabulary(hf_copy):
    _edit_config(hf_copy, vocab_size=100)
    with pytest.raises(CheckpointError, match=r"tokenizer has \d+ tokens but config.json says vocab_size"):
        open_model(hf_copy)


def test_corrupt_safetensors(hf_copy):
    weights = hf_copy / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:-100])
    with pytest.raises(CheckpointError, match=r"not a readable safetensors file: .*truncated"):
        open_model(hf_copy)
    weights.write_bytes(b"\x0a\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(CheckpointError, match=r"model\.safetensors is not a readable safetensors file"):
        open_model(hf_copy)


def test_a_directory_with_no_model(tmp_path):
    (tmp_path / "ckpt.pt").write_bytes(b"not a torch file at all")  # a name alone is not a checkpoint
    with pytest.raises(CheckpointError, match="holds no model"):
        open_model(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        open_model(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------------
# nanoGPT
# ---------------------------------------------------------------------------------------------
NANO_VARIANTS = {
    "plain": {},
    "compiled": dict(compiled=True),
    "no-bias": dict(bias=False),
    "compiled-no-bias-untied-legacy": dict(compiled=True, bias=False, untied=True, legacy=True),
}


@pytest.mark.parametrize("variant", list(NANO_VARIANTS))
def test_nanogpt_logits_match_the_state_dict(tmp_path, variant, write_nanogpt, nanogpt_chars):
    ref = write_nanogpt(tmp_path / "ckpt.pt", **NANO_VARIANTS[variant])
    (tmp_path / "tokenizer.json").write_text(json.dumps(CharTokenizer(nanogpt_chars).to_dict()))
    ckpt = open_model(tmp_path)
    assert ckpt.meta["kind"] == "nanogpt"
    assert ckpt.meta["iter_num"] == 250 and abs(ckpt.meta["best_val_loss"] - 1.4697) < 1e-6
    assert ckpt.meta["n_params"] == sum(p.numel() for p in ref.parameters())
    assert ckpt.config.core.bias == ("none" if variant.endswith(("no-bias", "legacy")) else "all")
    assert ckpt.config.core.tie_embeddings == ("untied" not in variant)
    ids = torch.tensor([ckpt.tokenizer.encode("To be, or not to be: that is the question.")[:32]])
    with torch.no_grad():
        expected = ref(ids)
        ours, _ = ckpt.model(ids)
    assert (ours - expected).abs().max().item() < 1e-4
    assert expected.std().item() > 0.3  # random weights: logits far from a constant


def test_nanogpt_file_and_char_vocabulary_from_the_dataset_text(tmp_path, write_nanogpt, nanogpt_chars):
    ref = write_nanogpt(tmp_path / "weights.bin", seed=1)  # detected by content, whatever the name
    # nanoGPT's prepare.py: chars = sorted(set(text)); our CharTokenizer.from_text does the same
    text = "".join(reversed(nanogpt_chars)) * 3
    (tmp_path / "input.txt").write_text(text, encoding="utf-8")
    assert detect(tmp_path) == ("nanogpt", tmp_path / "weights.bin")
    ckpt = open_model(tmp_path / "weights.bin")
    assert ckpt.tokenizer == CharTokenizer.from_text(text)
    ids = torch.tensor([ckpt.tokenizer.encode("Hello there")])
    with torch.no_grad():
        assert torch.allclose(ckpt.model(ids)[0], ref(ids), atol=1e-4)


def test_a_dataset_text_with_another_vocabulary_is_refused(tmp_path, write_nanogpt):
    write_nanogpt(tmp_path / "ckpt.pt")
    (tmp_path / "input.txt").write_text("abc", encoding="utf-8")
    with pytest.raises(CheckpointError, match="3 distinct characters but the model has"):
        open_model(tmp_path)


class Payload:
    """Unpickling this calls open(marker, "w"): it creates the marker file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_checkpoint_that_needs_unpickling_is_refused_not_run(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"model_args": {"n_layer": 1}, "model": {}, "extra": Payload(marker)}, tmp_path / "ckpt.pt")
    assert not marker.exists()
    with pytest.raises(CheckpointError, match=r"asks for (io|builtins)\.open.*never does"):
        open_model(tmp_path)
    assert not marker.exists()


def test_a_meta_pkl_is_never_read(tmp_path, write_nanogpt):
    write_nanogpt(tmp_path / "ckpt.pt")
    marker = tmp_path / "pwned"
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"itos": {0: "a"}, "x": Payload(marker)}))
    with pytest.raises(CheckpointError, match=r"meta\.pkl is a pickle and is never read"):
        open_model(tmp_path)
    assert not marker.exists()


def test_nanogpt_without_a_tokenizer_says_where_to_find_one(tmp_path, write_nanogpt, nanogpt_chars):
    write_nanogpt(tmp_path / "ckpt.pt")
    with pytest.raises(CheckpointError, match=r"copy nanoGPT's data/shakespeare_char/input\.txt"):
        open_model(tmp_path)
    # ... unless one is given
    ckpt = open_model(tmp_path, tokenizer=CharTokenizer(nanogpt_chars))
    assert ckpt.tokenizer.vocab_size == ckpt.config.core.vocab_size


def test_torch_files_that_are_not_nanogpt(tmp_path):
    torch.save({"weights": torch.zeros(3)}, tmp_path / "a.pt")
    with pytest.raises(CheckpointError, match="needs 'model_args' and 'model'"):
        open_model(tmp_path / "a.pt")
    torch.save({"model": {}, "model_args": {"n_layer": 2, "n_kv_head": 1}}, tmp_path / "b.pt")
    with pytest.raises(CheckpointError, match="n_kv_head"):
        open_model(tmp_path / "b.pt")
    with pytest.raises(CheckpointError, match="several PyTorch checkpoints"):
        open_model(tmp_path)


# ---------------------------------------------------------------------------------------------
# our own checkpoints
# ---------------------------------------------------------------------------------------------
def test_our_checkpoint_is_delegated(tmp_path, nanogpt_chars):
    tok = CharTokenizer(nanogpt_chars)
    model = init_model(GPTConfig(vocab_size=tok.vocab_size, n_layers=1, d_model=32, n_heads=2), seed=0)
    save_checkpoint(tmp_path / "run", model, tok)
    assert detect(tmp_path / "run") == ("attention-lab", tmp_path / "run")
    assert detect(tmp_path / "run" / "model.safetensors")[0] == "attention-lab"
    ckpt = open_model(tmp_path / "run")
    assert ckpt.meta["kind"] == "attention-lab" and ckpt.meta["n_params"] == model.num_params()
    ids = torch.tensor([tok.encode("Hello")])
    with torch.no_grad():
        assert torch.equal(ckpt.model(ids)[0], model.eval()(ids)[0])


def test_a_fine_tuned_gpt2_saved_as_ours_round_trips(hf_models, tmp_path):
    """GPT-2 (its BPE included) saved as an Attention Lab checkpoint opens again, identical."""
    _, _, gpt2 = hf_models("gpt2")
    save_checkpoint(tmp_path / "tuned", gpt2.model, gpt2.tokenizer, meta={"source": "hf-gpt2"})
    back = open_model(tmp_path / "tuned")
    assert back.meta["kind"] == "attention-lab" and back.meta["source"] == "hf-gpt2"
    assert back.tokenizer == gpt2.tokenizer and back.config == gpt2.config
    ids = torch.tensor([gpt2.tokenizer.encode(PROMPTS[0])])
    with torch.no_grad():
        assert torch.equal(back.model(ids)[0], gpt2.model(ids)[0])


def test_nanogpt_without_biases_maps_to_a_shift_free_layernorm(tmp_path, write_nanogpt, nanogpt_chars):
    ref = write_nanogpt(tmp_path / "ckpt.pt", bias=False)
    (tmp_path / "input.txt").write_text(nanogpt_chars, encoding="utf-8")
    ckpt = open_model(tmp_path)
    assert ckpt.config.normalization.norm_bias is False and ckpt.config.core.bias == "none"
    assert not any(name.endswith(".bias") for name, _ in ckpt.model.named_parameters())
    assert ckpt.meta["n_params"] == sum(p.numel() for p in ref.parameters())


def test_describe_origin_names_kind_source_size_and_tokenizer():
    assert describe_origin({}) == ""
    meta = {"kind": "attention-lab", "source": "hf-gpt2", "n_params": 1234567, "tokenizer": "byte BPE"}
    assert describe_origin(meta, "/x/run1") == (
        "run1 (Attention Lab, from Hugging Face GPT-2) · 1,234,567 parameters · tokenizer: byte BPE"
    )
    assert describe_origin({"kind": "nanogpt", "name": "ckpt.pt", "source": "nanogpt"}) == "ckpt.pt (nanoGPT)"
    # metadata that names no kind (a run made here, saved): the folder's name, no empty "()"
    assert describe_origin({"new_run": ""}, "/x/run-step300") == "run-step300"


def test_every_kind_has_a_readable_name():
    from model.io.pretrained import KINDS, describe_origin

    for kind in KINDS:
        line = describe_origin({"kind": kind, "name": "m"})
        assert line.startswith("m (") and kind not in line, line
