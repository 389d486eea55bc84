"""Opening Llama, Mistral, Qwen2, Qwen3, Gemma and GPT-NeoX folders exactly (model.families).

The reference is ``transformers`` itself (test-only): each case is a tiny random model of the family
with uneven weights (norm weights ≠ 1, non-zero biases), saved with ``save_pretrained`` (one case
sharded with an index, one in bfloat16), beside a tokenizer.json built with the ``tokenizers`` library
(byte-level BPE or Llama's byte-fallback BPE). Ours must give the same logits (≤ 1e-4), attention
weights (≤ 1e-5, eager attention), 20 greedy tokens and token ids.
"""

from __future__ import annotations

import json
import shutil
import time
import tracemalloc

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerFast

from model.config import ConfigError, GPTConfig
from model.interp.analysis.heads import classify_heads, head_metrics, role_title
from model.interp.inspection import inspect_prompt
from model.interp.plan import plan_prompt
from model.interp.prompt import encode_prompt
from model.interp.trace import run_with_trace
from model.io.checkpoint.saved import CheckpointError, save_checkpoint
from model.io.hf.families import family_config
from model.io.pretrained import detect, open_model
from model.io.weights import build_from_state_dict
from model.nn.generate import generate
from model.nn.gpt import init_model
from model.text.registry import tokenizer_from_dict

#: case -> (model_type, writer options). Each family's own part is switched on, so a wrong one shows.
CASES = {
    "llama-llama3-rope-sharded": (
        "llama",
        dict(
            shard="20KB",
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 5000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 128,
            },
        ),
    ),
    "mistral-sliding-window": ("mistral", dict(sliding_window=6)),
    "qwen2-bf16": ("qwen2", dict(dtype=torch.bfloat16)),
    "qwen3-qk-norm-head-dim": ("qwen3", dict(head_dim=12)),
    "gemma-tied-head-dim": ("gemma", dict(head_dim=16, tie_word_embeddings=True)),
    "gpt_neox-parallel-partial-rotary": ("gpt_neox", dict(rotary_pct=0.5, num_key_value_heads=None)),
    "gpt_neox-sequential": (
        "gpt_neox",
        dict(
            rotary_pct=0.25,
            use_parallel_residual=False,
            num_key_value_heads=None,
            tie_word_embeddings=True,
            seed=3,
        ),
    ),
}


@pytest.fixture(scope="module")
def family_models(tmp_path_factory, write_hf_family):
    """case -> (directory, transformers' model, our Checkpoint), each written and opened once."""
    made: dict = {}

    def get(case: str):
        if case not in made:
            model_type, options = CASES[case]
            options = {k: v for k, v in options.items() if v is not None}
            directory = tmp_path_factory.mktemp(case)
            reference = write_hf_family(directory, model_type, **options)
            made[case] = directory, reference, open_model(directory)
        return made[case]

    return get


@pytest.fixture(params=list(CASES))
def family(request, family_models):
    return family_models(request.param)


def _reference_tokenizer(directory):
    return PreTrainedTokenizerFast.from_pretrained(str(directory))


def test_detected_and_described(family):
    directory, reference, ckpt = family
    model_type = reference.config.model_type
    assert detect(directory) == (f"hf-{model_type}", directory)
    assert ckpt.meta["kind"] == f"hf-{model_type}"
    assert ckpt.meta["n_params"] == reference.num_parameters() == ckpt.model.num_params()
    assert not ckpt.model.training


def test_token_ids_match_transformers(family, tricky_texts):
    directory, _, ckpt = family
    theirs = _reference_tokenizer(directory)
    for text in tricky_texts:
        assert ckpt.tokenizer.encode(text) == theirs(text)["input_ids"], text


def test_logits_match_transformers(family, tricky_texts):
    _, reference, ckpt = family
    for text in tricky_texts:
        ids = torch.tensor([ckpt.tokenizer.encode(text)[:48]])
        with torch.no_grad():
            expected = reference(ids).logits
            ours, _ = ckpt.model(ids)
        assert (ours - expected).abs().max().item() <= 1e-4, text
        assert expected.std().item() > 0.5  # uneven random weights: logits far from a constant


def test_attention_weights_match_transformers(family, tricky_texts):
    _, reference, ckpt = family
    ids = torch.tensor([ckpt.tokenizer.encode(tricky_texts[1])[:24]])
    with torch.no_grad():
        expected = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]  # [L, H, T, T]
    trace = run_with_trace(ckpt.model, ids, kinds=("pattern",))
    ours = torch.from_numpy(trace.stack("pattern"))
    assert ours.shape == expected.shape
    assert (ours - expected).abs().max().item() <= 1e-5


def test_greedy_generation_matches_transformers(family, tricky_texts):
    _, reference, ckpt = family
    ids = torch.tensor([ckpt.tokenizer.encode(tricky_texts[0])[:20]])
    reference.generation_config.eos_token_id = None  # 20 tokens whatever comes
    with torch.no_grad():
        expected = reference.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False, pad_token_id=0
        )
        ours = generate(ckpt.model, ids, 20, greedy=True)  # KV-cached decoding
    assert ours.shape[1] == ids.shape[1] + 20
    assert ours.tolist() == expected.tolist()


def test_each_family_sets_its_own_parts(family_models):
    cfgs = {case: family_models(case)[2].config for case in CASES}
    llama = cfgs["llama-llama3-rope-sharded"]
    assert (
        llama.positional.rope_scaling,
        llama.positional.rope_factor,
        llama.positional.rope_base,
        llama.kv_heads,
    ) == (
        "llama3",
        8.0,
        5000.0,
        2,
    )
    assert cfgs["mistral-sliding-window"].attention.sliding_window == 6
    assert cfgs["qwen2-bf16"].core.bias == "qkv"
    qwen3 = cfgs["qwen3-qk-norm-head-dim"]
    assert qwen3.attention.qk_rmsnorm and qwen3.d_head == 12
    gemma = cfgs["gemma-tied-head-dim"]
    assert (
        gemma.core.embed_scale
        and gemma.normalization.norm_offset
        and gemma.core.tie_embeddings
        and gemma.d_head == 16
    )
    assert (gemma.feed_forward.mlp, gemma.feed_forward.gelu_approx) == ("geglu", "tanh")
    neox = cfgs["gpt_neox-parallel-partial-rotary"]
    assert (
        neox.normalization.parallel_residual
        and neox.rotary_dim == 4
        and neox.kv_heads == neox.attention.n_heads
    )
    assert not cfgs["gpt_neox-sequential"].normalization.parallel_residual


def test_sharded_and_bf16_files_are_what_the_cases_say(family_models):
    llama_dir = family_models("llama-llama3-rope-sharded")[0]
    assert (llama_dir / "model.safetensors.index.json").is_file()
    assert len(list(llama_dir.glob("model-*.safetensors"))) > 1
    qwen2_dir, _, ckpt = family_models("qwen2-bf16")
    header = json.loads((qwen2_dir / "model.safetensors").read_bytes()[8:][:4000].split(b"}}")[0] + b"}}")
    assert any(v.get("dtype") == "BF16" for v in header.values() if isinstance(v, dict))
    assert all(p.dtype == torch.float32 for p in ckpt.model.parameters())  # upcast by default


def test_bf16_can_be_kept(family_models, tricky_texts):
    directory, reference, _ = family_models("qwen2-bf16")
    kept = open_model(directory, dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in kept.model.parameters())
    ids = torch.tensor([kept.tokenizer.encode(tricky_texts[1])[:24]])
    with torch.no_grad():
        ours, _ = kept.model(ids)
        expected = reference(ids).logits
    assert (
        torch.equal(ours.float().argmax(-1), expected.argmax(-1))
        or (ours.float() - expected).abs().max() < 0.5
    )


def test_sliding_window_is_applied_not_ignored(family_models):
    """Past the window, the pattern is zero; and a model without the window gives other logits."""
    _, _, ckpt = family_models("mistral-sliding-window")
    ids = torch.arange(3, 19)[None]  # 16 tokens > window 6
    trace = run_with_trace(ckpt.model, ids, kinds=("pattern",))
    w = torch.from_numpy(trace.stack("pattern"))  # [L, H, T, T]
    q, k = torch.meshgrid(torch.arange(16), torch.arange(16), indexing="ij")
    assert w[..., (k <= q - 6)].abs().max() == 0 and w[..., (k > q - 6) & (k <= q)].min() > 0
    full = ckpt.model.config.replace(sliding_window=None)
    unwindowed = build_from_state_dict(full, dict(ckpt.model.state_dict()))
    with torch.no_grad():
        assert (unwindowed(ids)[0] - ckpt.model(ids)[0])[0, 6:].abs().max() > 1e-3


def test_special_tokens_are_named_on_the_axes(family_models):
    _, _, llama = family_models("llama-llama3-rope-sharded")
    ids = llama.tokenizer.encode("hi there")
    assert ids[0] == 1 and llama.tokenizer.token_strings(ids)[0] == "<s>"
    assert llama.tokenizer.token_strings(llama.tokenizer.encode("\n"))[-1] == "\n"  # <0x0A> is a newline
    _, _, qwen = family_models("qwen2-bf16")
    assert qwen.tokenizer.encode("hi")[0] != 0  # byte-level families add no BOS (tokenizer_config says so)


def test_tokenizer_survives_our_checkpoint_format(family_models):
    _, _, ckpt = family_models("llama-llama3-rope-sharded")
    again = tokenizer_from_dict(json.loads(json.dumps(ckpt.tokenizer.to_dict())))
    assert again.encode("two  words") == ckpt.tokenizer.encode("two  words")


# ---- refusals: never compute silently wrong numbers ------------------------------------------
def _copy_with(src_dir, tmp_path, **changes):
    dst = tmp_path / "edited"
    shutil.copytree(src_dir, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.update(changes)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
            "'yarn' is not implemented",
        ),
        ({"final_logit_softcapping": 30.0}, "soft-capping"),
        ({"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 4}, "only some layers"),
        ({"attention_bias": True}, "attention_bias=True with mlp_bias=False"),
        ({"hidden_act": "relu2"}, "hidden_act 'relu2'"),
        ({"num_key_value_heads": 3}, "n_kv_heads"),
    ],
)
def test_unsupported_configs_are_refused(family_models, tmp_path, changes, message):
    directory = family_models("llama-llama3-rope-sharded")[0]
    with pytest.raises(CheckpointError, match=message):
        open_model(_copy_with(directory, tmp_path, **changes))


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"num_hidden_layers": 9000},
            r"num_hidden_layers=9000, .*which means 9,000 layers but .* holds only \d+ tensors",
        ),
        (
            {"num_hidden_layers": 10**9},
            r"num_hidden_layers=1000000000 must be a whole number from 1 to 10,000",
        ),
        ({"hidden_size": 8192, "intermediate_size": 22016}, r"hidden_size=8192"),
    ],
)
def test_a_config_json_that_lies_about_its_size_is_refused_before_anything_is_built(
    family_models, tmp_path, changes, message
):
    directory = family_models("llama-llama3-rope-sharded")[0]
    edited = _copy_with(directory, tmp_path, **changes)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(CheckpointError, match=message):
            open_model(edited)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 5 and peak < 50 * 2**20


def test_missing_and_misshapen_tensors_are_named(family_models, tmp_path):
    directory = family_models("qwen3-qk-norm-head-dim")[0]
    edited = _copy_with(directory, tmp_path)
    tensors = load_file(str(edited / "model.safetensors"))
    del tensors["model.layers.1.self_attn.k_norm.weight"]
    tensors["model.layers.0.self_attn.q_proj.bias"] = torch.zeros(48)
    save_file(tensors, str(edited / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(
        CheckpointError, match=r"missing model\.layers\.1\.self_attn\.k_norm\.weight.*no place for"
    ):
        open_model(edited)


def test_real_world_config_forms():
    """Files written by older transformers: rope_theta + rope_scaling, rotary_pct + rotary_emb_base."""
    llama31 = dict(
        model_type="llama",
        vocab_size=128256,
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling={
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    )
    cfg = family_config(llama31)
    assert (
        cfg.positional.rope_base,
        cfg.positional.rope_scaling,
        cfg.positional.rope_original_context,
        cfg.kv_heads,
    ) == (
        500000.0,
        "llama3",
        8192,
        8,
    )
    pythia = dict(
        model_type="gpt_neox",
        vocab_size=50304,
        hidden_size=512,
        num_hidden_layers=6,
        num_attention_heads=8,
        intermediate_size=2048,
        rotary_pct=0.25,
        rotary_emb_base=10000,
        use_parallel_residual=True,
        hidden_act="gelu",
    )
    cfg = family_config(pythia)
    assert (cfg.rotary_dim, cfg.normalization.parallel_residual, cfg.feed_forward.mlp, cfg.core.bias) == (
        16,
        True,
        "gelu",
        "all",
    )


def test_new_config_fields_are_validated():
    with pytest.raises(ConfigError, match="rotary_pct"):
        GPTConfig(positions="rope", head_dim=8, rotary_pct=0.1).validate()  # rotates 0 dimensions
    with pytest.raises(ConfigError, match="needs positions='rope'"):
        GPTConfig(rope_scaling="llama3").validate()
    with pytest.raises(ConfigError, match="sliding_window"):
        GPTConfig(sliding_window=0).validate()
    with pytest.raises(ConfigError, match="choose one"):
        GPTConfig(qk_rmsnorm=True, attn_scale="qk_norm").validate()
    with pytest.raises(ConfigError, match="norm_offset"):
        GPTConfig(norm_offset=True).validate()
    with pytest.raises(ConfigError, match="rope_high_freq_factor"):
        GPTConfig(positions="rope", rope_scaling="llama3", rope_high_freq_factor=0.5).validate()


def test_a_cut_prompt_keeps_its_bos_and_the_inspection_names_it(family_models):
    _, _, ckpt = family_models("llama-llama3-rope-sharded")
    p = encode_prompt(ckpt.tokenizer, "one two three four five six seven eight nine ten", 8)
    ids, dropped = list(p.ids), p.dropped
    assert ids[0] == 1 and len(ids) == 8 and dropped > 0
    assert ids[1:] == ckpt.tokenizer.encode("one two three four five six seven eight nine ten")[-7:]
    insp = inspect_prompt(ckpt.model, ckpt.tokenizer, plan_prompt(ckpt.model.config, ckpt.tokenizer, p))
    assert insp.special == [0] and insp.labels[0] == "<s>"


def test_pytorch_model_bin_is_read_without_unpickling_code(family_models, tmp_path, tricky_texts):
    directory, reference, _ = family_models("qwen3-qk-norm-head-dim")
    edited = _copy_with(directory, tmp_path)
    torch.save(load_file(str(edited / "model.safetensors")), edited / "pytorch_model.bin")
    (edited / "model.safetensors").unlink()
    ckpt = open_model(edited)
    assert ckpt.meta["weights"] == "pytorch_model.bin"
    ids = torch.tensor([ckpt.tokenizer.encode(tricky_texts[1])])
    with torch.no_grad():
        assert (ckpt.model(ids)[0] - reference(ids).logits).abs().max() <= 1e-4
    torch.save({"model.embed_tokens.weight": torch.zeros(1), "x": _Hostile()}, edited / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="never does"):
        open_model(edited)


class _Hostile:
    """An object whose unpickling would run code: a weights_only load must refuse it."""

    def __reduce__(self):
        return (print, ("unpickled!",))


def test_a_head_resting_on_bos_is_named_the_attention_sink(family_models):
    """A head built to attend to position 0 (the BOS a Llama tokenizer puts first) is classified
    "sink", and its title names the BOS token."""
    _, _, llama = family_models("llama-llama3-rope-sharded")
    tok = llama.tokenizer
    cfg = GPTConfig(vocab_size=tok.vocab_size, context_length=32, n_layers=1, d_model=8, n_heads=2)
    model = init_model(cfg, seed=0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.fill_(1.0 if "norm" in name and name.endswith("weight") else 0.0)
        model.pos_emb.weight[0, 0] = 10.0  # only position 0 has a feature, which K reads ...
        model.blocks[0].attn.k_proj.weight[0, 0] = 1.0
        model.blocks[0].attn.q_proj.bias[0] = 10.0  # ... and every query of head 0 looks for
    insp = inspect_prompt(model, tok, plan_prompt(cfg, tok, "one two three four"))
    labels = classify_heads(head_metrics(insp.weights, insp.mask)).labels
    assert labels[0][0].name == "sink" and labels[0][1].name != "sink"
    bos = insp.labels[0] if 0 in insp.special else ""
    assert role_title(labels[0][0].name, bos) == "sink (on the BOS token <s>, the attention sink)"
    assert role_title("sink", "") == "sink" and role_title("self", "<s>") == "self"


def test_an_opened_family_model_saves_as_ours_and_reopens_the_same(family_models, tmp_path, tricky_texts):
    _, _, gemma = family_models("gemma-tied-head-dim")
    save_checkpoint(tmp_path / "ours", gemma.model, gemma.tokenizer, meta={"name": "gemma"})
    again = open_model(tmp_path / "ours")
    assert again.meta["kind"] == "attention-lab" and again.config == gemma.config
    ids = torch.tensor([gemma.tokenizer.encode(tricky_texts[2])[:40]])
    assert again.tokenizer.encode(tricky_texts[2]) == gemma.tokenizer.encode(tricky_texts[2])  # BOS kept
    with torch.no_grad():
        assert torch.equal(again.model(ids)[0], gemma.model(ids)[0])


def test_every_new_part_together_trains_traces_and_decodes_consistently():
    """Our own GPT with all of the new fields at once: the recorded path equals the fused one, and
    KV-cached decoding equals recomputing the window (sliding window past its size included)."""
    cfg = GPTConfig(
        vocab_size=50,
        context_length=32,
        n_layers=2,
        d_model=24,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
        mlp="geglu",
        gelu_approx="tanh",
        norm="rmsnorm",
        positions="rope",
        bias="qkv",
        rope_scaling="llama3",
        rope_factor=4.0,
        rope_original_context=16,
        rotary_pct=0.5,
        sliding_window=5,
        qk_rmsnorm=True,
        embed_scale=True,
        norm_offset=True,
        parallel_residual=True,
    ).validate()
    model = init_model(cfg, seed=0)
    ids = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(0))
    _, loss = model(ids, ids)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        plain, _ = model(ids)
    assert torch.allclose(run_with_trace(model, ids, kinds=("pattern",)).logits, plain, atol=1e-5)
    cached = generate(model, ids, 10, greedy=True)
    recomputed = generate(model, ids, 10, greedy=True, use_cache=False)
    assert cached.tolist() == recomputed.tolist()


@pytest.mark.parametrize(
    "changes",
    [
        {"rope_parameters": {"rope_type": "default", "rope_theta": "ten"}},
        {"max_window_layers": "x", "use_sliding_window": True, "sliding_window": 4},
    ],
)
def test_malformed_values_are_one_clear_line(changes):
    base = dict(
        model_type="qwen2",
        vocab_size=10,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
    )
    with pytest.raises(CheckpointError, match=r"config.json \(qwen2\)"):
        family_config({**base, **changes})
