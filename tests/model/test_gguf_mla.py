"""GGUF files of DeepSeek's latent attention (``deepseek2``) opened exactly (model.io.gguf.mla).

Each file is written in the test from a tiny random transformers model as llama.cpp's converter writes
it (tests/gguf_mla_files.py): DeepSeek-V3 (sigmoid router with its choice bias, grouped routing, a
low-rank query, dense first layer, shared expert, YaRN with mscale on the scores, ``kv_b`` split into
``attn_k_b`` / ``attn_v_b`` as newer converters write it) and DeepSeek-V2-Lite's shape (softmax router
scaled, not renormalised, one ``W_Q``, ``attn_kv_b`` whole, as older converters wrote it, no gating key).
transformers does not read ``deepseek2`` GGUF files, so the reference is transformers' own model of the
same weights (DeepseekV3ForCausalLM, DeepseekV2ForCausalLM): logits ≤ 1e-4 relative to their largest,
attention weights ≤ 1e-5. A file of mixed types is held against transformers' model holding the
weights as ``gguf``'s reader and decoders give them back.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from model.interp.trace import run_with_trace
from model.io.gguf.file import GGUFHeader, read_header
from model.io.gguf.load import gguf_config, load_gguf, summarize_gguf
from model.io.loaded import CheckpointError
from model.nn.quantized import StoredLinear
from tests.gguf_mla_files import dequantized_into, write_deepseek2_gguf, write_gpt_oss_gguf

_YARN = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 4.0,
    "original_max_position_embeddings": 16,
    "mscale": 0.8,  # llama.cpp keeps one mscale (the log multiplier): both equal, as in the real configs
    "mscale_all_dim": 0.8,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
}
_SHAPE = dict(
    num_hidden_layers=3,
    num_key_value_heads=4,
    n_routed_experts=8,
    num_experts_per_tok=2,
    n_shared_experts=1,
    moe_intermediate_size=32,
    first_k_dense_replace=1,
    kv_lora_rank=32,
    qk_rope_head_dim=8,
    qk_nope_head_dim=32,
    v_head_dim=32,
)
#: case -> (model_type, config, kv_b split as newer converters write it)
_EXPERT_PARTS = ("w_gate", "w_up", "w_down")
GiB = 2**30
CASES = {
    "v3": ("deepseek_v3", dict(_SHAPE, q_lora_rank=32, n_group=4, topk_group=2, rope_parameters=_YARN), True),
    "v2-lite": (
        "deepseek_v2",
        dict(_SHAPE, q_lora_rank=None, n_group=1, topk_group=1, routed_scaling_factor=1.5),
        False,
    ),
}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory, write_hf_family):
    """case -> (folder with the tokenizer, transformers' model, the F32 GGUF file)."""
    made: dict = {}

    def get(case: str):
        if case not in made:
            model_type, config, split = CASES[case]
            folder = tmp_path_factory.mktemp(case)
            reference = write_hf_family(folder, model_type, **config)
            path = write_deepseek2_gguf(folder / "tiny.gguf", reference, folder, split_kv_b=split)
            made[case] = folder, reference, path
        return made[case]

    return get


def _differences(reference, ckpt, text: str) -> tuple[float, float]:
    """(largest logit difference relative to the largest logit, largest attention difference)."""
    ids = torch.tensor([ckpt.tokenizer.encode(text)[:40]])
    with torch.no_grad():
        theirs = reference(ids, output_attentions=True)
        ours, _ = ckpt.model(ids)
    attention = torch.from_numpy(run_with_trace(ckpt.model, ids, kinds=("pattern",)).stack("pattern"))
    expected = torch.stack(theirs.attentions)[:, 0]  # [L, H, T, T]
    assert attention.shape == expected.shape and theirs.logits.std().item() > 0.5
    logits = ((ours - theirs.logits).abs().max() / theirs.logits.abs().max()).item()
    return logits, (attention - expected).abs().max().item()


@pytest.mark.parametrize("case", list(CASES))
def test_deepseek2_file_equals_transformers(deepseek, case, tricky_texts):
    _, reference, path = deepseek(case)
    ckpt = load_gguf(path)
    cfg = ckpt.config
    assert ckpt.meta["architecture"] == "deepseek2" and ckpt.meta["model_type"] == "deepseek_v3"
    assert (
        cfg.attention.kv_lora_rank,
        cfg.attention.qk_nope_head_dim,
        cfg.attention.qk_rope_head_dim,
        cfg.attention.v_head_dim,
    ) == (32, 32, 8, 32)
    v3 = case == "v3"
    assert cfg.feed_forward.router == ("sigmoid_topk_norm" if v3 else "softmax_topk")
    assert (
        cfg.feed_forward.router_choice_bias,
        cfg.feed_forward.router_groups,
        cfg.attention.q_lora_rank,
    ) == ((True, 4, 32) if v3 else (False, None, None))
    assert cfg.feed_forward.router_scale == reference.config.routed_scaling_factor
    for text in tricky_texts[:3]:
        logits, attention = _differences(reference, ckpt, text)
        assert logits <= 1e-4 and attention <= 1e-5, (text, logits, attention)


def test_a_file_of_mixed_types_equals_transformers_with_its_decoded_weights(deepseek, tmp_path, tricky_texts):
    folder, reference, _ = deepseek("v3")
    types = {
        "token_embd.weight": "Q4_1",
        "blk.0.attn_q_b.weight": "Q5_0",
        "blk.1.attn_k_b.weight": "F16",
        "blk.1.ffn_gate_exps.weight": "Q4_0",
        "blk.2.ffn_down_exps.weight": "BF16",
        "blk.2.attn_kv_a_mqa.weight": "Q5_1",
    }
    path = write_deepseek2_gguf(tmp_path / "mixed.gguf", reference, folder, "Q8_0", types=types)
    quantized = copy.deepcopy(reference)
    dequantized_into(quantized, path)
    opened = load_gguf(path, stored=False)
    found = {t.split(" ")[0] for t in opened.meta["quantization"].split(", ")}
    assert found == {"Q8_0", "Q4_1", "Q5_0", "F16", "Q4_0", "BF16", "Q5_1", "F32"}
    kept = load_gguf(path, stored=True)  # matrices decoded as used, each expert its rows of the stack
    experts = [getattr(x, w) for b in kept.model.blocks[1:] for x in b.mlp.experts for w in _EXPERT_PARTS]
    assert len(experts) == 2 * 8 * 3 and all(isinstance(m, StoredLinear) for m in experts)
    stacks = sum(t.nbytes for n, t in read_header(path).tensors.items() if "_exps." in n)
    assert sum(m.stored.nbytes for m in experts) == stacks  # each expert its own rows of the stack
    for text in tricky_texts[:2]:
        logits, attention = _differences(quantized, opened, text)
        assert logits <= 1e-4 and attention <= 1e-5, (text, logits, attention)
        ids = torch.tensor([opened.tokenizer.encode(text)[:40]])
        with torch.no_grad():
            assert torch.allclose(kept.model(ids)[0], opened.model(ids)[0], rtol=0, atol=1e-5)
    assert _differences(reference, opened, tricky_texts[0])[0] > 1e-3  # the types really round


def test_deepseek_kept_as_stored_keeps_q_b_and_kv_a_with_their_rotary_rows_reordered(deepseek, tricky_texts):
    """``q_b`` and ``kv_a`` hold their rotary rows in pairs in the file: kept as stored, each is the file's
    rows read in the order our RoPE rotates (nothing widened at the open), the same matrix and the same
    logits as the model widened at the open."""
    _, _, path = deepseek("v3")
    kept, widened = load_gguf(path, stored=True), load_gguf(path, stored=False)
    for ours, theirs in zip(kept.model.blocks, widened.model.blocks, strict=True):
        for name in ("q_b", "kv_a"):
            matrix = getattr(ours.attn, name)
            assert isinstance(matrix, StoredLinear) and matrix.stored.order is not None, name
            assert torch.equal(matrix.weight, getattr(theirs.attn, name).weight), name
    for text in tricky_texts[:2]:
        ids = torch.tensor([kept.tokenizer.encode(text)[:40]])
        with torch.no_grad():
            assert torch.equal(kept.model(ids)[0], widened.model(ids)[0]), text


def test_lm_studio_lists_both_families_openable_with_their_parameters(deepseek, gpt_oss, tmp_path):
    import shutil

    from model.io.local.models import find_local_models

    repo = tmp_path / "lm" / "someone" / "Tiny-GGUF"
    repo.mkdir(parents=True)
    for name, (_, _, path) in {
        "deepseek-Q8_0.gguf": deepseek("v3"),
        "oss-MXFP4.gguf": gpt_oss,
    }.items():
        shutil.copy(path, repo / name)
    found = {
        m.name: m
        for m in find_local_models(
            ollama=[], lmstudio=[tmp_path / "lm"], hf_cache=[], packages=[], usable_memory=2**34
        )
    }
    ds, oss = found["deepseek"], found["oss"]
    assert (ds.family, ds.opens, ds.problem, oss.family, oss.opens, oss.problem) == (
        "deepseek2",
        True,
        "",
        "gpt-oss",
        True,
        "",
    )
    reference = deepseek("v3")[1]
    biases = sum(b.numel() for n, b in reference.named_buffers() if n.endswith("e_score_correction_bias"))
    assert ds.n_params == sum(p.numel() for p in reference.parameters()) + biases  # the V3 router's
    assert oss.n_params == sum(p.numel() for p in gpt_oss[1].parameters()) and "MXFP4" in oss.quantization
    assert summarize_gguf(repo / "deepseek-Q8_0.gguf")["n_kv_heads"] == 1  # MLA as MQA over the latent


def test_v2_group_limited_routing_is_refused_in_one_line(tmp_path, write_hf_family):
    model_type, config, _ = CASES["v2-lite"]
    config = dict(config, n_group=2, topk_group=1, topk_method="group_limited_greedy", num_hidden_layers=2)
    reference = write_hf_family(tmp_path, model_type, **config)
    path = write_deepseek2_gguf(tmp_path / "grouped.gguf", reference, tmp_path)
    with pytest.raises(CheckpointError) as refused:
        load_gguf(path)
    message = str(refused.value)
    assert "\n" not in message and "deepseek2.expert_group_count=2" in message and "softmax" in message
    assert not summarize_gguf(path)["opens"]


def test_split_and_whole_kv_b_give_the_same_model(deepseek, tmp_path):
    folder, reference, split_path = deepseek("v3")
    whole_path = write_deepseek2_gguf(tmp_path / "whole.gguf", reference, folder, split_kv_b=False)
    split, whole = load_gguf(split_path), load_gguf(whole_path)
    for (name, a), (_, b) in zip(
        split.model.state_dict().items(), whole.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert np.isfinite(split.model.blocks[0].attn.kv_b.weight.detach().numpy()).all()


#: DeepSeek-V3's pre-tokenizer (its tokenizer.json: three splits, then bytes), written out here.
_DEEPSEEK3 = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
#: text where the splits differ from GPT-2's: digits in threes, CJK and kana runs, punctuation + letters.
_ODD = [
    "1234567 x12345y 3.14159",
    "日本語のテキストとカタカナ、漢字123",
    "def f(x):\n\treturn x.y['key'] + .5e-3;//comment",
    "HTTPServer's URLs  don't\r\n\r\n ab🙂c   end ",
]


def _their_tokenizer(folder, splits: tuple[str, ...]):
    """The folder's byte-level BPE with ``splits`` applied one after the other, then the bytes."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers

    theirs = Tokenizer.from_str((folder / "tokenizer.json").read_text("utf-8"))
    theirs.pre_tokenizer = pre_tokenizers.Sequence(
        [
            *(pre_tokenizers.Split(Regex(one), behavior="isolated") for one in splits),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    theirs.decoder = decoders.ByteLevel()
    return theirs


def test_deepseek3_vocabulary_splits_as_its_tokenizer_json(deepseek, tricky_texts):
    folder, _, path = deepseek("v3")
    theirs, ours = _their_tokenizer(folder, _DEEPSEEK3), load_gguf(path).tokenizer
    for text in [*_ODD, *tricky_texts]:
        ids = theirs.encode(text, add_special_tokens=False).ids
        assert ours.encode(text) == ids, text
        assert ours.decode(ids) == text


def test_deepseek_v2_split_is_refused_in_one_line(deepseek, tmp_path):
    folder, reference, _ = deepseek("v2-lite")
    path = write_deepseek2_gguf(tmp_path / "v2.gguf", reference, folder, pre="deepseek-llm")
    with pytest.raises(CheckpointError, match=r"tokenizer\.ggml\.pre='deepseek-llm' .*not implemented$"):
        load_gguf(path)


# ---------------------------------------------------------------------------------------------
# gpt-oss: sinks, alternating windows, biased experts with the clamped SwiGLU, MXFP4, o200k's split
# ---------------------------------------------------------------------------------------------
#: o200k's pre-tokenizer split (gpt-oss's tokenizer.json, tiktoken's o200k_base), written out here.
_O200K = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory, write_hf_family):
    """(folder, transformers' model of the file's decoded weights, the file: experts in MXFP4)."""
    folder = tmp_path_factory.mktemp("gpt-oss")
    yarn = {  # truncate: llama.cpp rounds YaRN's correction range to whole dimensions
        "rope_type": "yarn",
        "rope_theta": 1000.0,
        "factor": 8.0,
        "original_max_position_embeddings": 16,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": True,
    }
    reference = write_hf_family(
        folder,
        "gpt_oss",
        num_local_experts=4,
        num_experts_per_tok=2,
        head_dim=32,
        intermediate_size=32,
        sliding_window=8,
        swiglu_limit=7.0,
        max_position_embeddings=128,
        rope_parameters=yarn,
    )
    path = write_gpt_oss_gguf(folder / "tiny-MXFP4.gguf", reference, folder, "Q8_0", experts="MXFP4")
    dequantized_into(reference, path)
    return folder, reference, path


@pytest.mark.parametrize("stored", [False, True])
def test_gpt_oss_file_equals_transformers(gpt_oss, stored, tricky_texts):
    _, reference, path = gpt_oss
    ckpt = load_gguf(path, stored=stored)
    cfg = ckpt.config
    assert ckpt.meta["architecture"] == "gpt-oss" and "MXFP4" in ckpt.meta["quantization"]
    assert (
        cfg.attention.window_pattern,
        cfg.attention.sliding_window,
        cfg.attention.attn_sinks,
        cfg.feed_forward.swiglu_limit,
    ) == ("LG", 8, True, 7.0)
    assert (
        cfg.positional.rope_scaling,
        cfg.positional.rope_factor,
        cfg.feed_forward.router,
        cfg.core.bias,
    ) == ("yarn", 8.0, "topk_softmax", "all")
    for text in tricky_texts[:3]:
        assert (
            len(ckpt.tokenizer.encode(text)[:40]) > 2 * cfg.attention.sliding_window
        )  # past the local window
        logits, attention = _differences(reference, ckpt, text)
        assert logits <= 1e-4 and attention <= 1e-5, (text, logits, attention)


def test_gpt_oss_kept_as_stored_holds_each_expert_in_mxfp4_and_computes_the_widened_numbers(
    gpt_oss, tricky_texts
):
    """Each expert's W_gate, W_up [f, d] and W_down [d, f] are its rows of the file's MXFP4 stacks, decoded
    as used; its biases, the norms and the sinks are the only float32 parameters; the logits are those of
    the model widened at the open, bit for bit, and transformers' (≤ 1e-4)."""
    _, reference, path = gpt_oss
    header = read_header(path)
    kept, widened = load_gguf(path, stored=True), load_gguf(path, stored=False)
    cfg = kept.config
    experts = [getattr(x, w) for b in kept.model.blocks for x in b.mlp.experts for w in _EXPERT_PARTS]
    assert len(experts) == cfg.core.n_layers * cfg.feed_forward.n_experts * 3
    assert all(isinstance(m, StoredLinear) and m.stored.kind == "MXFP4" for m in experts)
    stacks = sum(t.nbytes for n, t in header.tensors.items() if n.endswith("_exps.weight"))
    assert sum(m.stored.nbytes for m in experts) == stacks  # each expert its own rows, none widened
    matrices = [t for n, t in header.tensors.items() if n.endswith(".weight") and len(t.shape) >= 2]
    assert kept.meta["stored_bytes"] == sum(t.nbytes for t in matrices)  # every matrix as stored
    floats = sum(t.numel for t in header.tensors.values()) - sum(t.numel for t in matrices)
    assert sum(p.numel() for p in kept.model.parameters()) == floats  # biases, norms, sinks: float32
    far = widened.model.blocks[-1].mlp.experts[-1]
    for ours, theirs in zip(experts[-3:], (far.w_gate, far.w_up, far.w_down), strict=True):
        assert torch.equal(ours.weight, theirs.weight) and torch.equal(ours.bias, theirs.bias)
    for text in tricky_texts[:3]:
        ids = torch.tensor([kept.tokenizer.encode(text)[:40]])
        with torch.no_grad():
            assert torch.equal(kept.model(ids)[0], widened.model(ids)[0]), text
    logits, attention = _differences(reference, kept, tricky_texts[0])
    assert logits <= 1e-4 and attention <= 1e-5


def _size_checked(monkeypatch, path, header=None):
    """The :class:`~model.budget.sizing.Need` that opening ``path`` kept as stored is checked against
    (``header``: the file's header, instead of reading it), taken where :func:`load_gguf` checks it."""
    from model.io import build
    from model.io.gguf import load as loader

    class Checked(Exception):
        pass

    seen = []

    def check(need):
        seen.append(need)
        raise Checked

    monkeypatch.setattr(build, "check_size", check)  # the one build step's size check
    if header is not None:  # a header alone: no file, no tokenizer (read before the size check)
        monkeypatch.setattr(loader, "read_header", lambda p: header)
        monkeypatch.setattr(loader, "_tokenizer", lambda *a: None)
    with pytest.raises(Checked):
        load_gguf(path, stored=True)
    return seen[0]


def test_the_size_check_counts_gpt_oss_experts_as_stored(gpt_oss, monkeypatch):
    _, _, path = gpt_oss
    header = read_header(path)
    need = _size_checked(monkeypatch, path)
    matrices = [t for n, t in header.tensors.items() if n.endswith(".weight") and len(t.shape) >= 2]
    assert need.parts["weights as stored"] == sum(t.nbytes for t in matrices)  # MXFP4 bytes, not float32
    floats = sum(t.numel for t in header.tensors.values()) - sum(t.numel for t in matrices)
    assert need.parts["float32 tensors"] == 4 * floats


def _gpt_oss_20b_header(tmp_path) -> GGUFHeader:
    """A header (no file behind it) of gpt-oss-20b's shapes (its config.json: 24 layers, d 2880, 64 query
    and 8 KV heads of 64, 32 experts 2880 wide, 4 per token, vocabulary 201,088): experts in MXFP4, the
    other matrices in BF16, norms, biases and sinks in F32."""
    from model.io.gguf.file import DEQUANTIZED, GGUFTensor

    L, d, H, H_kv, d_k, E, f, V = 24, 2880, 64, 8, 64, 32, 2880, 201088
    types = {name: number for number, (name, _, _) in DEQUANTIZED.items()}
    tensors: dict[str, GGUFTensor] = {}

    def add(name: str, shape: tuple[int, ...], kind: str) -> None:
        _, block, size = DEQUANTIZED[types[kind]]
        tensors[name] = GGUFTensor(name, shape, types[kind], 0, int(np.prod(shape)) // block * size)

    add("token_embd.weight", (V, d), "BF16")
    add("output.weight", (V, d), "BF16")
    add("output_norm.weight", (d,), "F32")
    for i in range(L):
        b = f"blk.{i}."
        for part, rows, cols in (
            ("attn_q", H * d_k, d), ("attn_k", H_kv * d_k, d), ("attn_v", H_kv * d_k, d),
            ("attn_output", d, H * d_k), ("ffn_gate_inp", E, d),
        ):  # fmt: skip
            add(f"{b}{part}.weight", (rows, cols), "BF16")
            add(f"{b}{part}.bias", (rows,), "F32")
        for part, shape in (
            ("ffn_gate_exps", (E, f, d)),
            ("ffn_up_exps", (E, f, d)),
            ("ffn_down_exps", (E, d, f)),
        ):
            add(f"{b}{part}.weight", shape, "MXFP4")
            add(f"{b}{part}.bias", shape[:2], "F32")
        for part, n in (("attn_norm", d), ("post_attention_norm", d), ("attn_sinks", H)):
            add(f"{b}{part}.weight", (n,), "F32")
    a = "gpt-oss."
    metadata = {
        "general.architecture": "gpt-oss",
        a + "block_count": L,
        a + "context_length": 131072,
        a + "embedding_length": d,
        a + "feed_forward_length": f,
        a + "attention.head_count": H,
        a + "attention.head_count_kv": H_kv,
        a + "attention.key_length": d_k,
        a + "attention.value_length": d_k,
        a + "attention.sliding_window": 128,
        a + "attention.layer_norm_rms_epsilon": 1e-5,
        a + "rope.freq_base": 150000.0,
        a + "rope.scaling.type": "yarn",
        a + "rope.scaling.factor": 32.0,
        a + "rope.scaling.original_context_length": 4096,
        a + "expert_count": E,
        a + "expert_used_count": 4,
        a + "expert_feed_forward_length": f,
    }
    return GGUFHeader(path=tmp_path / "gpt-oss-20b.gguf", version=3, metadata=metadata, tensors=tensors)


def test_a_gpt_oss_20b_shape_is_sized_at_its_stored_bytes_not_widened(tmp_path, monkeypatch):
    from model.budget.sizing import load_need

    header = _gpt_oss_20b_header(tmp_path)
    cfg = gguf_config(header)[2]
    matrices = sum(t.nbytes for t in header.tensors.values() if len(t.shape) >= 2 and t.type_name != "F32")
    need = _size_checked(monkeypatch, header.path, header)
    assert need.parts["weights as stored"] == matrices
    assert 12 * GiB < need.total < 1.1 * matrices < 15 * GiB  # MXFP4 experts, BF16 attention and tables
    assert load_need(cfg).parts["weights"] > 75 * GiB  # the same model widened: 4 bytes a parameter


def test_mxfp4_is_decoded_bit_for_bit_as_gguf_decodes_it():
    import gguf
    from gguf.quants import dequantize

    from model.io.gguf.stored import decoder

    raw = np.random.default_rng(39).integers(0, 256, (256, 4 * 17), dtype=np.uint8)
    raw[:, 0] = np.arange(256)  # every E8M0 exponent, the subnormal ones (0, 1) and 255 too
    with np.errstate(over="ignore"):
        expected = dequantize(raw, gguf.GGMLQuantizationType.MXFP4)
    ours = decoder(39)(raw.copy()).numpy()
    assert ours.shape == expected.shape == (256, 128)
    assert np.array_equal(ours.view(np.uint32), expected.view(np.uint32))


def test_gpt_oss_tokenizer_splits_as_o200k(gpt_oss, tricky_texts):
    folder, _, path = gpt_oss
    theirs, ours = _their_tokenizer(folder, (_O200K,)), load_gguf(path).tokenizer
    for text in [*_ODD, "CamelCaseWORDSLike'THIS'  \t\n x", *tricky_texts]:
        ids = theirs.encode(text, add_special_tokens=False).ids
        assert ours.encode(text) == ids, text
        assert ours.decode(ids) == text
    assert summarize_gguf(path)["opens"]


def test_gpt_oss_ends_at_return_and_call_but_not_at_end_as_llama_cpp_does():
    """The harmony format closes every channel's message with <|end|> (the analysis before the answer):
    with <|return|> and <|call|> in the vocabulary, llama.cpp drops <|end|> from the tokens that end a
    generation, and so do we; a vocabulary without them still ends at <|end|> (Phi-3's)."""
    from model.text.gguf_tokens import tokenizer_from_gguf

    specials = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|channel|>", "<|end|>", "<|call|>"]
    alphabet = [chr(c) for c in range(33, 127)]

    def stops(tokens):
        meta = {
            "general.architecture": "gpt-oss",
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.pre": "gpt-4o",
            "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [3 if t in specials else 1 for t in tokens],
            "tokenizer.ggml.merges": [],
            "tokenizer.ggml.bos_token_id": 0,
            "tokenizer.ggml.eos_token_id": 2,
        }
        tok = tokenizer_from_gguf(meta)
        return set(tok.token_strings(sorted(tok.stop_ids)))

    assert stops(specials + alphabet) == {"<|return|>", "<|call|>"}
    no_call = [t for t in specials if t != "<|call|>"]
    assert stops(no_call + alphabet) == {"<|return|>", "<|end|>"}
