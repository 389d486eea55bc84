"""Mixture-of-experts GGUF files (Mixtral's ``llama`` with experts, ``qwen3moe``, ``qwen2moe``) open
exactly, and a Q4_K_M-like file of mixed quantization types decodes bit-equal to ``gguf``, kept as
stored or not. Also Qwen2-MoE's Hugging Face folders (its shared expert behind a σ gate), which the
``qwen2moe`` files open through.

Each case is a tiny random transformers model converted as llama.cpp's ``convert_hf_to_gguf.py``
converts it (tests/gguf_moe_files.py: stacked experts, the router F32, Mixtral's Q/K rows permuted).
The references: an F32 file must equal the transformers model it was written from (the round trip is
exact) and our own Hugging Face path of that model's folder; a quantized file must equal the
transformers model holding the file's weights as ``gguf.quants.dequantize`` decodes them, and, for
``qwen3moe`` and ``qwen2moe``, transformers' own GGUF loading (which reads no expert widths: they are
given to it). Logits ≤ 1e-4 relative to their largest, attention weights ≤ 1e-5.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize
from transformers import AutoConfig, AutoModelForCausalLM

from model.budget import sizing
from model.budget.sizing import Available, ModelTooLarge
from model.interp.trace import run_with_trace
from model.io.checkpoint.saved import CheckpointError
from model.io.gguf.file import read_header, read_tensor
from model.io.gguf.load import gguf_config, load_gguf, summarize_gguf
from model.io.gguf.moe import expert_header
from model.io.gguf.stored import decoder, stored_need
from model.io.pretrained import open_model
from model.nn.quantized import StoredLinear, has_stored
from tests.gguf_files import _GLOBAL, _LAYER, K_QUANTS, random_k_quant
from tests.gguf_moe_files import _SHARED, ARCH, moe_tensors, write_moe_gguf

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

#: family -> transformers config overrides: rows of whole 32-value blocks (d, the experts' width).
FAMILIES = {
    "mixtral": dict(hidden_size=64, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2),
    "qwen3_moe": dict(
        hidden_size=64,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        head_dim=32,
        norm_topk_prob=True,  # what llama.cpp's qwen3moe computes whatever the config said
    ),
    "qwen2_moe": dict(
        hidden_size=64,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=64,  # its own width: twice the experts'
    ),
}
#: The router each family's GGUF implies (llama.cpp's build_moe_ffn: renormalised top-k or not).
ROUTERS = {"mixtral": "softmax_topk_norm", "qwen3_moe": "softmax_topk_norm", "qwen2_moe": "softmax_topk"}
#: What transformers' GGUF loading does not read from these files (the widths): given to it.
WIDTHS = ("moe_intermediate_size", "shared_expert_intermediate_size")
#: Q4_K_M's mix (llama.cpp's llama-quantize): Q4_K most matrices, Q6_K some, with the Q5_0 and Q8_0
#: fallbacks beside them; norms and routers F32. Rows of whole 256-value super-blocks.
MIXED = dict(hidden_size=256, intermediate_size=256, num_local_experts=4, num_experts_per_tok=2)
MIX_TYPES = ("Q4_K", "Q5_0", "Q6_K", "Q8_0")
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello, hello world 12345 the end"]


@dataclass
class Case:
    path: Path
    original: torch.nn.Module
    folder: Path


@pytest.fixture(scope="module")
def cases(tmp_path_factory, write_hf_family):
    """(family, qtype) -> :class:`Case`, each written once."""
    models: dict = {}
    made: dict = {}

    def get(family: str, qtype: str) -> Case:
        if family not in models:
            folder = tmp_path_factory.mktemp(f"hf-{family}")
            models[family] = folder, write_hf_family(folder, family, **FAMILIES[family])
        if (family, qtype) not in made:
            folder, model = models[family]
            where = tmp_path_factory.mktemp(f"gguf-{family}-{qtype}")  # a folder of its own: transformers
            made[family, qtype] = Case(
                write_moe_gguf(where / f"m-{qtype}.gguf", model, folder, qtype), model, folder
            )
        return made[family, qtype]

    return get


def _gguf_name(hf_name: str) -> str:
    """The llama.cpp name of a transformers tensor that is not a fused expert tensor."""
    stem, _, kind = hf_name.rpartition(".")
    parts = stem.split(".", 3)
    if stem.startswith("model.layers."):
        part = parts[3].removeprefix("mlp.")
        theirs = "ffn_gate_inp" if part == "gate" else _SHARED.get(part) or _LAYER[parts[3]]
        return f"blk.{parts[2]}.{theirs}.{kind}"
    return f"{_GLOBAL[stem]}.{kind}"


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of the converter's Q/K row permutation (as transformers' GGUF loading undoes it)."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _dequantized_reference(case: Case) -> torch.nn.Module:
    """The transformers model of ``case`` holding the file's weights as ``gguf`` decodes them (Q/K rows
    put back, the stacked gate and up experts fused again as transformers holds them)."""
    decoded = {
        t.name: dequantize(t.data, t.tensor_type).reshape(tuple(int(n) for n in reversed(t.shape)))
        for t in gguf.GGUFReader(case.path).tensors
    }
    model = copy.deepcopy(case.original)
    cfg = model.config
    state = {}
    for hf_name, tensor in model.state_dict().items():
        layer = hf_name.split(".")[2] if hf_name.startswith("model.layers.") else ""
        if hf_name.endswith("mlp.experts.gate_up_proj"):
            gate, up = (decoded[f"blk.{layer}.ffn_{p}_exps.weight"] for p in ("gate", "up"))
            w = np.concatenate([gate, up], axis=1)
        elif hf_name.endswith("mlp.experts.down_proj"):
            w = decoded[f"blk.{layer}.ffn_down_exps.weight"]
        else:
            w = decoded[_gguf_name(hf_name)]
            if cfg.model_type == "mixtral" and hf_name.endswith(("q_proj.weight", "k_proj.weight")):
                w = _unpermute(w, cfg.num_attention_heads if "q_proj" in hf_name else cfg.num_key_value_heads)
        state[hf_name] = torch.from_numpy(np.array(w, dtype=np.float32)).reshape(tensor.shape)
    model.load_state_dict(state)
    return model.eval()


def _ids(ckpt, text: str) -> torch.Tensor:
    return torch.tensor([ckpt.tokenizer.encode(text)[:32]])


def _logit_diff(model, reference, ids) -> float:
    """max |ours − theirs| / max |theirs| of the logits."""
    with torch.no_grad():
        ours, _ = model(ids)
        theirs = reference(ids).logits
    assert ours.shape == theirs.shape and theirs.std().item() > 0.1
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()


def _attention_diff(ckpt, reference, ids) -> float:
    with torch.no_grad():
        theirs = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]
    ours = torch.from_numpy(run_with_trace(ckpt.model, ids, kinds=("pattern",)).stack("pattern"))
    assert ours.shape == theirs.shape
    return (ours - theirs).abs().max().item()


# ---------------------------------------------------------------------------------------------
# opening, exactly
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", list(FAMILIES))
def test_opens_as_the_mixture_of_experts_it_is(cases, family):
    case = cases(family, "Q8_0")
    header = read_header(case.path)
    assert header.architecture == ARCH[family]
    model_type, _, cfg = gguf_config(header)
    assert model_type == family
    original = case.original.config
    assert (cfg.feed_forward.n_experts, cfg.feed_forward.n_experts_per_token) == (4, 2)
    assert cfg.expert_hidden == getattr(original, "moe_intermediate_size", original.intermediate_size)
    assert cfg.feed_forward.router == ROUTERS[family]
    summary = summarize_gguf(case.path)  # the local models' list marks it openable
    assert summary["opens"] and not summary["problem"]
    ckpt = open_model(case.path)
    assert ckpt.meta["model_type"] == family and ckpt.meta["architecture"] == ARCH[family]
    assert ckpt.meta["tensor_types"]["blk.0.ffn_gate_exps.weight"] == "Q8_0"
    assert ckpt.meta["tensor_types"]["blk.0.ffn_gate_inp.weight"] == "F32"
    assert ckpt.meta["n_params"] == case.original.num_parameters() == summary["n_params"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_f32_file_equals_transformers_and_our_hugging_face_path(cases, family):
    case = cases(family, "F32")
    ours, folder = open_model(case.path), open_model(case.folder)
    for text in TEXTS:
        ids = _ids(ours, text)  # the same ids to both (the test folder's regex splits digits otherwise)
        assert _logit_diff(ours.model, case.original, ids) <= 1e-4, text
        with torch.no_grad():
            assert torch.allclose(ours.model(ids)[0], folder.model(ids)[0], rtol=0, atol=1e-5)
    assert _attention_diff(ours, case.original, _ids(ours, TEXTS[0])) <= 1e-5


@pytest.mark.parametrize("stored", [False, True])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_quantized_file_equals_its_dequantized_weights(cases, family, stored):
    case = cases(family, "Q8_0")
    ours = load_gguf(case.path, stored=stored)
    assert has_stored(ours.model) == stored
    reference = _dequantized_reference(case)
    for text in TEXTS:
        assert _logit_diff(ours.model, reference, _ids(ours, text)) <= 1e-4, text
    assert _attention_diff(ours, reference, _ids(ours, TEXTS[1])) <= 1e-5


@pytest.mark.parametrize("family", ["qwen3_moe", "qwen2_moe"])
def test_qwen_moe_file_equals_transformers_own_gguf_loading(cases, family):
    case = cases(family, "Q8_0")
    where = str(case.path.parent)
    config = AutoConfig.from_pretrained(where, gguf_file=case.path.name)
    assert config.norm_topk_prob == (ROUTERS[family] == "softmax_topk_norm")  # as llama.cpp computes
    for width in WIDTHS:
        if width in FAMILIES[family]:
            setattr(config, width, FAMILIES[family][width])
    theirs = AutoModelForCausalLM.from_pretrained(
        where, gguf_file=case.path.name, config=config, attn_implementation="eager"
    ).eval()
    ours = open_model(case.path)
    for text in TEXTS:
        assert _logit_diff(ours.model, theirs, _ids(ours, text)) <= 1e-4, text
    assert _attention_diff(ours, theirs, _ids(ours, TEXTS[0])) <= 1e-5


def test_each_expert_is_kept_as_stored_and_decodes_as_gguf_does(cases):
    case = cases("mixtral", "Q8_0")
    ckpt = load_gguf(case.path, stored=True)
    reader = {t.name: t for t in gguf.GGUFReader(case.path).tensors}
    for i in range(2):
        gate = dequantize(reader[f"blk.{i}.ffn_gate_exps.weight"].data, gguf.GGMLQuantizationType.Q8_0)
        down = dequantize(reader[f"blk.{i}.ffn_down_exps.weight"].data, gguf.GGMLQuantizationType.Q8_0)
        for e, expert in enumerate(ckpt.model.blocks[i].mlp.experts):
            assert isinstance(expert.w_gate, StoredLinear) and isinstance(expert.w_down, StoredLinear)
            assert np.array_equal(expert.w_gate.weight.numpy(), gate[e])
            assert np.array_equal(expert.w_down.weight.numpy(), down[e])


# ---------------------------------------------------------------------------------------------
# a Q4_K_M-like file: Q4_K, Q5_0, Q6_K and Q8_0 side by side, F32 norms and routers
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed(tmp_path_factory, write_hf_family) -> Case:
    folder = tmp_path_factory.mktemp("hf-mixed")
    model = write_hf_family(folder, "mixtral", **MIXED)
    matrices = [name for name, w in moe_tensors(model) if w.ndim >= 2 and "ffn_gate_inp" not in name]
    types = {name: MIX_TYPES[i % len(MIX_TYPES)] for i, name in enumerate(matrices)}

    def raw(name, shape, type_name):
        return random_k_quant(shape, type_name, seed=matrices.index(name)) if type_name in K_QUANTS else None

    path = write_moe_gguf(folder.parent / "mixed-Q4_K_M.gguf", model, folder, "F32", types=types, raw=raw)
    return Case(path, model, folder)


def test_mixed_file_holds_every_type_and_each_tensor_decodes_bit_equal_to_gguf(mixed):
    header = read_header(mixed.path)
    used = {t.type_name for t in header.tensors.values()}
    assert used == {*MIX_TYPES, "F32"}
    assert {t.type_name for n, t in header.tensors.items() if n.endswith("_exps.weight")} == set(MIX_TYPES)
    experts = expert_header(header, "mixtral", gguf_config(header)[2]).tensors
    for t in gguf.GGUFReader(mixed.path).tensors:
        expected = dequantize(t.data, t.tensor_type).reshape(header.tensors[t.name].shape)
        assert np.array_equal(read_tensor(mixed.path, header.tensors[t.name]), expected), t.name
        if t.name.endswith("_exps.weight"):  # each expert alone, through the stored path's decoder
            layer, kind = t.name.split(".")[1], {"gate": "w1", "up": "w3", "down": "w2"}[t.name.split("_")[1]]
            for e in range(expected.shape[0]):
                part = experts[f"model.layers.{layer}.block_sparse_moe.experts.{e}.{kind}.weight"]
                raw = np.memmap(mixed.path, np.uint8, "c", part.offset, part.nbytes).reshape(
                    part.shape[0], -1
                )
                assert np.array_equal(np.asarray(decoder(t.tensor_type)(raw)), expected[e]), (t.name, e)


def test_mixed_file_kept_as_stored_equals_dequantized_and_the_reference(mixed):
    kept, widened = load_gguf(mixed.path, stored=True), load_gguf(mixed.path, stored=False)
    assert has_stored(kept.model) and not has_stored(widened.model)
    reference = _dequantized_reference(mixed)
    for text in TEXTS:
        ids = _ids(kept, text)
        with torch.no_grad():
            assert torch.equal(kept.model(ids)[0], widened.model(ids)[0])
        assert _logit_diff(kept.model, reference, ids) <= 1e-4, text
    assert _attention_diff(kept, reference, _ids(kept, TEXTS[0])) <= 1e-5


def test_the_size_check_counts_the_experts_as_stored(mixed, monkeypatch):
    header = read_header(mixed.path)
    cfg = gguf_config(header)[2]
    need = stored_need(expert_header(header, "mixtral", cfg), cfg, what="x")
    matrices = sum(t.nbytes for t in header.tensors.values() if len(t.shape) >= 2 and t.type_name != "F32")
    routers = sum(t.nbytes for n, t in header.tensors.items() if "ffn_gate_inp" in n)
    assert need.parts["weights as stored"] == matrices + routers  # the experts' bytes, not float32
    assert need.parts["float32 tensors"] == 4 * sum(
        t.numel for t in header.tensors.values() if len(t.shape) == 1
    )
    monkeypatch.setattr(
        sizing, "available_memory", lambda device="cpu": Available(need.total, "MemAvailable")
    )
    with pytest.raises(ModelTooLarge, match="weights as stored"):
        load_gguf(mixed.path, stored=True)  # 0.8 of what it needs is usable
    monkeypatch.setattr(sizing, "available_memory", lambda device="cpu": Available(2 * need.total, "x"))
    assert has_stored(load_gguf(mixed.path, stored=True).model)


# ---------------------------------------------------------------------------------------------
# refusals: one line naming the file's tensors and keys
# ---------------------------------------------------------------------------------------------
def _refused(path: Path, words: list[str]) -> None:
    with pytest.raises(CheckpointError) as info:
        open_model(path)
    message = str(info.value)
    assert "\n" not in message and "config.json" not in message
    for word in words:
        assert word in message, (word, message)


def test_a_layer_without_its_stacked_experts_is_refused_naming_them(cases, tmp_path):
    case = cases("mixtral", "F32")
    tensors = [(n, w) for n, w in moe_tensors(case.original) if n != "blk.1.ffn_up_exps.weight"]
    path = write_moe_gguf(tmp_path / "x.gguf", case.original, case.folder, tensors=tensors)
    _refused(path, ["x.gguf", "blk.1.ffn_up_exps.weight missing", "4 experts", "llama.expert_count"])


def test_stacked_experts_of_another_count_are_refused_naming_the_tensor(cases, tmp_path):
    case = cases("qwen3_moe", "F32")
    tensors = [(n, w[:3] if n == "blk.0.ffn_down_exps.weight" else w) for n, w in moe_tensors(case.original)]
    path = write_moe_gguf(tmp_path / "x.gguf", case.original, case.folder, tensors=tensors)
    _refused(
        path, ["blk.0.ffn_down_exps.weight has shape [3, 64, 32], not [4, 64, 32]", "qwen3moe.expert_count"]
    )


def test_a_broken_file_is_listed_as_not_opening_and_why(cases, tmp_path):
    case = cases("mixtral", "F32")
    tensors = [(n, w) for n, w in moe_tensors(case.original) if n != "blk.0.ffn_gate_inp.weight"]
    summary = summarize_gguf(write_moe_gguf(tmp_path / "x.gguf", case.original, case.folder, tensors=tensors))
    assert not summary["opens"] and "blk.0.ffn_gate_inp.weight missing" in summary["problem"]


def test_experts_in_an_architecture_without_them_here_stay_refused(tmp_path, write_hf_family):
    from tests.gguf_files import write_gguf

    folder = tmp_path / "hf"
    model = write_hf_family(folder, "qwen2", hidden_size=64, intermediate_size=64)
    path = write_gguf(tmp_path / "x.gguf", model, folder, metadata={"qwen2.expert_count": (8, "UINT32")})
    _refused(path, ["qwen2.expert_count=8 (mixture-of-experts) is not implemented"])


# ---------------------------------------------------------------------------------------------
# Qwen2-MoE's Hugging Face folders: the shared expert behind its σ gate
# ---------------------------------------------------------------------------------------------
def test_qwen2_moe_folder_equals_transformers_with_a_dense_first_layer(tmp_path, write_hf_family):
    config = {**FAMILIES["qwen2_moe"], "mlp_only_layers": [0], "norm_topk_prob": True}
    model = write_hf_family(tmp_path, "qwen2_moe", **config)
    ckpt = open_model(tmp_path)
    cfg = ckpt.config
    assert (
        cfg.feed_forward.moe_dense_layers,
        cfg.feed_forward.n_shared_experts,
        cfg.shared_hidden,
        cfg.feed_forward.shared_expert_gate,
    ) == (
        1,
        1,
        64,
        True,
    )
    assert (cfg.core.bias, cfg.feed_forward.router) == ("qkv", "softmax_topk_norm")
    assert ckpt.model.num_params() == model.num_parameters() == ckpt.meta["n_params"]
    for text in TEXTS:
        assert _logit_diff(ckpt.model, model, _ids(ckpt, text)) <= 1e-4, text
    assert _attention_diff(ckpt, model, _ids(ckpt, TEXTS[0])) <= 1e-5


def test_qwen2_moe_shared_gate_is_sigma_of_a_projection(cases):
    """Zeroing the shared expert's gate weights halves its share (σ(0) = ½): the gate is applied."""
    ckpt = open_model(cases("qwen2_moe", "F32").path)
    block = ckpt.model.blocks[0].mlp
    x = torch.randn(1, 3, 64)
    with torch.no_grad():
        shared = block.shared(x.reshape(-1, 64))
        before = block(x)
        block.shared_gate.weight.zero_()
        after = block(x)
    torch.testing.assert_close(after - before, (0.5 - torch.sigmoid(_gate(cases, x))) * shared.view(1, 3, 64))


def _gate(cases, x: torch.Tensor) -> torch.Tensor:
    original = cases("qwen2_moe", "F32").original
    w = original.model.layers[0].mlp.shared_expert_gate.weight
    return (x.reshape(-1, 64) @ w.T).view(1, 3, 1)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"use_sliding_window": True, "sliding_window": 8}, "use_sliding_window (Qwen2-MoE's windows"),
        ({"shared_expert_intermediate_size": 0}, "shared_expert_intermediate_size=0 must be"),
    ],
)
def test_qwen2_moe_folder_refusals_are_one_line(tmp_path, write_hf_family, fields, words):
    import json

    write_hf_family(tmp_path, "qwen2_moe", **FAMILIES["qwen2_moe"])
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **fields}))
    with pytest.raises(CheckpointError) as info:
        open_model(tmp_path)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_a_shared_expert_gate_without_shared_experts_is_refused():
    from model.config import ConfigError, GPTConfig

    base = dict(vocab_size=50, n_layers=1, d_model=16, n_heads=2, d_ff=32, mlp="swiglu", n_experts=4)
    with pytest.raises(ConfigError, match="shared_expert_gate needs n_shared_experts"):
        GPTConfig(**base, shared_expert_gate=True).validate()
    with pytest.raises(ConfigError, match="shared_expert_d_ff needs n_shared_experts"):
        GPTConfig(**base, shared_expert_d_ff=8).validate()
    cfg = GPTConfig(**base, n_shared_experts=1, shared_expert_d_ff=8, shared_expert_gate=True).validate()
    assert cfg.shared_hidden == 8


def test_expert_counts_out_of_bounds_are_refused_by_the_file_s_keys(cases, tmp_path):
    case = cases("qwen3_moe", "F32")

    more_used = {"qwen3moe.expert_used_count": (5, "UINT32")}
    path = write_moe_gguf(tmp_path / "x.gguf", case.original, case.folder, metadata=more_used)
    _refused(path, ["qwen3moe.expert_used_count=5 is more than qwen3moe.expert_count=4"])


def test_lm_studio_lists_the_files_as_openable_with_family_and_parameters(cases, tmp_path):
    from model.io.local.models import LocalScan

    folder = tmp_path / "models" / "someone" / "Tiny-MoE-GGUF"
    folder.mkdir(parents=True)
    for family in FAMILIES:
        case = cases(family, "Q8_0")
        (folder / f"tiny-{family}-Q8_0.gguf").write_bytes(case.path.read_bytes())
    scan = LocalScan(
        ollama=[], lmstudio=[tmp_path / "models"], hf_cache=[], packages=[], usable_memory=1 << 40
    )
    found = {m.name: m for m in scan.run()}
    for family in FAMILIES:
        m = found[f"tiny-{family}"]
        assert m.opens and not m.problem, m.problem
        # as the file names it (qwen3moe), but Mixtral's, not its architecture's "llama"
        assert m.family == ("mixtral" if family == "mixtral" else ARCH[family])
        assert m.n_params == cases(family, "Q8_0").original.num_parameters()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_cli_inspect_exports_the_attention_of_a_moe_gguf_as_of_its_folder(tmp_path, capsys, cases, family):
    """``attention-lab inspect --checkpoint FILE.gguf`` writes the heads of the F32 file, equal to those
    of the Hugging Face folder it was converted from."""
    from app.cli import main

    case = cases(family, "F32")
    prompt = "the quick brown fox"
    arrays = {}
    for what, source in (("gguf", case.path), ("folder", case.folder)):
        out = tmp_path / f"{what}.npz"
        assert main(["inspect", "--checkpoint", str(source), "--prompt", prompt, "--out", str(out)]) == 0
        assert f"wrote {out}: 2 layers × 4 heads" in capsys.readouterr().out
        with np.load(out, allow_pickle=False) as npz:
            arrays[what] = {k: npz[k] for k in npz.files if npz[k].dtype.kind == "f"}
    assert arrays["gguf"].keys() == arrays["folder"].keys() and arrays["gguf"]
    for key, value in arrays["gguf"].items():
        assert np.abs(value - arrays["folder"][key]).max() <= 1e-5, key


def test_a_qwen_file_without_its_expert_widths_takes_llama_cpp_s(cases, tmp_path):
    """Files converted before llama.cpp wrote ``expert_feed_forward_length`` open as its loader reads
    them: experts ``feed_forward_length / k`` wide, Qwen2-MoE's shared expert ``feed_forward_length``
    (the test models are sized so that both agree with one ``feed_forward_length``)."""
    for family, arch in (("qwen3_moe", "qwen3moe"), ("qwen2_moe", "qwen2moe")):
        case = cases(family, "F32")
        f, k = FAMILIES[family]["moe_intermediate_size"], FAMILIES[family]["num_experts_per_tok"]
        old = {
            f"{arch}.expert_feed_forward_length": None,
            f"{arch}.expert_shared_feed_forward_length": None,
            f"{arch}.feed_forward_length": (f * k, "UINT32"),
        }
        path = write_moe_gguf(tmp_path / f"{family}.gguf", case.original, case.folder, metadata=old)
        ckpt = open_model(path)
        assert ckpt.config.expert_hidden == f
        assert ckpt.config.shared_hidden == (f * k if family == "qwen2_moe" else 0)
        assert _logit_diff(ckpt.model, case.original, _ids(ckpt, TEXTS[0])) <= 1e-4


def test_routed_weights_scaled_are_refused_in_one_line(cases, tmp_path):
    case = cases("mixtral", "F32")
    scaled = {"llama.expert_weights_scale": (2.5, "FLOAT32")}
    path = write_moe_gguf(tmp_path / "x.gguf", case.original, case.folder, metadata=scaled)
    _refused(path, ["llama.expert_weights_scale=2.5 (routed weights scaled) is not implemented"])
