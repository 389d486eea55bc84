"""Opening llama.cpp GGUF files exactly, per family and per quantization type, and refusing hostile ones.

Each case is a tiny random transformers model (uneven weights, tests/conftest.py) converted to GGUF as
llama.cpp's ``convert_hf_to_gguf.py`` converts it (tests/gguf_files.py: its metadata keys, tensor names,
Q/K row permutation, Gemma's 1 + γ norms, ``gguf.quants.quantize``). The reference is ``transformers``'
own GGUF loading of the same file (llama, qwen2, qwen3, gpt2): logits ≤ 1e-4, eager attention weights
≤ 1e-5, token ids and 10 greedy tokens identical. An F32 file also equals the original model (the
conversion round trip is exact); Gemma, which transformers does not load from GGUF, is compared with
the original only. The K-quants, which ``gguf`` cannot make, are random blocks with finite scales,
read as ``gguf.GGUFReader`` + ``gguf.quants.dequantize`` read them.

Hostile and unsupported files are refused with one :class:`CheckpointError` line naming the problem,
before anything large is allocated or any tensor is read.
"""

from __future__ import annotations

import shutil
import struct
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize
from transformers import AutoModelForCausalLM, AutoTokenizer

from model.budget.arithmetic import human_bytes, parameters
from model.budget.sizing import ModelTooLarge
from model.interp.trace import run_with_trace
from model.io.checkpoint.saved import Checkpoint, CheckpointError
from model.io.gguf import load as gguf_module
from model.io.gguf.file import DEQUANTIZED, OTHER_TYPES, read_header, read_tensor, shortest_float32
from model.io.gguf.load import gguf_config, load_gguf
from model.io.pretrained import detect, open_model
from model.nn.generate import generate
from tests.gguf_files import (
    K_QUANTS,
    gguf_bytes,
    gguf_tensors,
    kv,
    random_k_quant,
    string,
    tensor_info,
    write_gguf,
)

#: family -> the writer's config overrides: rows of whole 32-value blocks everywhere. Qwen3's head size
#: is 128 because transformers reads no head size from a qwen3 GGUF and takes Qwen3Config's default;
#: GPT-2's 1024 positions likewise (transformers maps context_length to n_ctx, not n_positions).
FAMILIES = {
    "llama": dict(hidden_size=64, intermediate_size=128),
    "qwen2": dict(hidden_size=64, intermediate_size=128),
    "qwen3": dict(hidden_size=64, intermediate_size=128, head_dim=128),
    "gemma": dict(hidden_size=64, intermediate_size=128, head_dim=32, tie_word_embeddings=True),
    "gpt2": dict(n_embd=64, n_positions=1024),
    # rows of whole 256-value super-blocks, for the K-quants and the i-quants
    "llama-256": dict(hidden_size=256, intermediate_size=256),
}

#: case -> (family, ggml type of the matrices); "K" stores the matrices in Q2_K..Q6_K, in turn.
CASES = {
    "llama-F32": ("llama", "F32"),
    "qwen2-F32": ("qwen2", "F32"),
    "qwen3-F32": ("qwen3", "F32"),
    "gpt2-F32": ("gpt2", "F32"),
    "gemma-F32": ("gemma", "F32"),
    "llama-F16": ("llama", "F16"),
    "llama-BF16": ("llama", "BF16"),
    "llama-Q8_0": ("llama", "Q8_0"),
    "llama-Q4_0": ("llama", "Q4_0"),
    "llama-Q4_1": ("llama", "Q4_1"),
    "llama-Q5_0": ("llama", "Q5_0"),
    "llama-Q5_1": ("llama", "Q5_1"),
    "qwen2-Q8_0": ("qwen2", "Q8_0"),
    "qwen3-Q4_1": ("qwen3", "Q4_1"),
    "gpt2-Q5_0": ("gpt2", "Q5_0"),
    "llama-K": ("llama-256", "K"),
}
F32_CASES = [c for c, (_, q) in CASES.items() if q == "F32"]
#: transformers opens no "gemma" GGUF (no config mapping for it).
TRANSFORMERS_CASES = [c for c, (f, _) in CASES.items() if f != "gemma"]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@dataclass
class Case:
    path: Path
    original: torch.nn.Module
    ours: Checkpoint
    theirs: torch.nn.Module | None  # transformers' load of the file
    their_tokenizer: object | None

    @property
    def reference(self) -> torch.nn.Module:
        return self.theirs if self.theirs is not None else self.original


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory, write_hf_family, write_hf_gpt2, gpt2_tokenizer_dir):
    """family -> (Hugging Face folder, transformers model), each written once."""
    made: dict = {}

    def get(family: str):
        if family not in made:
            folder = tmp_path_factory.mktemp(f"hf-{family}")
            if family == "gpt2":
                model = write_hf_gpt2(folder, gpt2_tokenizer_dir, **FAMILIES[family]).eval()
            else:
                model = write_hf_family(folder, family.split("-")[0], **FAMILIES[family])
            made[family] = folder, model
        return made[family]

    return get


def _k_types(path_types: dict[str, str]):
    """``raw`` for write_gguf: random K-quant blocks for the tensors stored in a K type."""

    def raw(name: str, shape: tuple[int, ...], type_name: str) -> bytes | None:
        if type_name not in K_QUANTS:
            return None
        return random_k_quant(shape, type_name, seed=sorted(path_types).index(name))

    return raw


def _k_assignment(model) -> dict[str, str]:
    """Each matrix of ``model`` in one of Q2_K..Q6_K, in turn, so that every one is used."""
    matrices = [name for name, w in gguf_tensors(model) if w.ndim == 2]
    kinds = list(K_QUANTS)
    return {name: kinds[i % len(kinds)] for i, name in enumerate(matrices)}


@pytest.fixture(scope="module")
def cases(tmp_path_factory, hf_models):
    """case -> :class:`Case`, each written, opened by us and by transformers once (each GGUF in a folder
    of its own: transformers would otherwise read the Hugging Face folder's tokenizer.json)."""
    made: dict[str, Case] = {}

    def get(case: str) -> Case:
        if case not in made:
            family, qtype = CASES[case]
            folder, original = hf_models(family)
            where = tmp_path_factory.mktemp(f"gguf-{case}")
            if qtype == "K":
                types = _k_assignment(original)
                path = write_gguf(
                    where / f"{case}.gguf", original, folder, "F32", types=types, raw=_k_types(types)
                )
            else:
                path = write_gguf(where / f"{case}.gguf", original, folder, qtype)
            theirs = tok = None
            if family != "gemma":
                theirs = AutoModelForCausalLM.from_pretrained(
                    str(where), gguf_file=path.name, attn_implementation="eager"
                ).eval()
                tok = AutoTokenizer.from_pretrained(str(where), gguf_file=path.name)
            made[case] = Case(path, original, open_model(path), theirs, tok)
        return made[case]

    return get


@pytest.fixture(params=list(CASES))
def case(request, cases) -> Case:
    return cases(request.param)


def _ids(ckpt: Checkpoint, text: str, n: int) -> torch.Tensor:
    return torch.tensor([ckpt.tokenizer.encode(text)[:n]])


# ---------------------------------------------------------------------------------------------
# the file itself: type tables, header, tensors
# ---------------------------------------------------------------------------------------------
def test_type_tables_agree_with_gguf():
    """Our ggml type numbers, names and block sizes are ggml's, and every type gguf knows is listed."""
    assert not set(DEQUANTIZED) & set(OTHER_TYPES)
    for number, (name, block, size) in {**DEQUANTIZED, **OTHER_TYPES}.items():
        qtype = gguf.GGMLQuantizationType(number)
        assert qtype.name == name
        assert gguf.GGML_QUANT_SIZES[qtype] == (block, size), name
    assert {t.value for t in gguf.GGMLQuantizationType} == set(DEQUANTIZED) | set(OTHER_TYPES)
    for number, (name, block, size) in DEQUANTIZED.items():  # each one gguf can dequantize
        out = dequantize(np.zeros((2, 2 * size), dtype=np.uint8), gguf.GGMLQuantizationType(number))
        assert out.shape == (2, 2 * block), name


@pytest.mark.slow
def test_header_equals_gguf_reader(case):
    header = read_header(case.path)
    reader = gguf.GGUFReader(case.path)
    expected = {key: field.contents() for key, field in reader.fields.items() if not key.startswith("GGUF.")}
    float32 = {key for key, field in reader.fields.items() if field.types == [gguf.GGUFValueType.FLOAT32]}
    assert float32, "the case files hold float32 metadata (the norm's epsilon)"
    for key in float32:  # the same float32, read as its shortest decimal
        assert np.float32(header.metadata[key]) == np.float32(expected[key])
        expected[key] = shortest_float32(expected[key])
    assert header.metadata == expected
    assert header.version == reader.fields["GGUF.version"].contents() == 3
    tensors = [
        (t.name, tuple(int(n) for n in reversed(t.shape)), int(t.tensor_type), t.data_offset, t.n_bytes)
        for t in reader.tensors
    ]
    assert [(t.name, t.shape, t.ggml_type, t.offset, t.nbytes) for t in header.tensors.values()] == tensors


def test_read_tensor_equals_gguf_dequantize(case):
    header = read_header(case.path)
    for t in gguf.GGUFReader(case.path).tensors:
        expected = dequantize(t.data, t.tensor_type).reshape(header.tensors[t.name].shape)
        ours = read_tensor(case.path, header.tensors[t.name])
        assert ours.dtype == np.float32 and ours.flags.writeable
        assert np.array_equal(ours, expected), t.name
        assert np.isfinite(ours).all()


def test_k_quant_file_holds_every_k_type(cases):
    c = cases("llama-K")
    used = set(c.ours.meta["tensor_types"].values())
    assert used >= set(K_QUANTS) and used <= set(K_QUANTS) | {"F32"}
    assert all(name in c.ours.meta["quantization"] for name in K_QUANTS)


def test_opens_as_what_it_is(case):
    family, qtype = CASES[case.path.stem]
    assert detect(case.path) == ("gguf", case.path)
    meta = case.ours.meta
    # named by its file less the quantization (as people download it), not by general.name ("tiny")
    # ("K" names a mix of k-quants, no one quantization: it stays in the name)
    name = case.path.stem if qtype == "K" else case.path.stem.removesuffix(f"-{qtype}")
    assert meta["kind"] == "gguf" and meta["name"] == name != "tiny"
    assert meta["model_type"] == meta["architecture"] == family.split("-")[0]
    assert meta["n_params"] == case.original.num_parameters() == case.ours.model.num_params()
    assert meta["tensor_types"]["token_embd.weight"] == ("Q2_K" if qtype == "K" else qtype)
    assert meta["tensor_types"]["output_norm.weight"] == "F32"  # norms and 1-D tensors stay F32
    if qtype != "K":
        assert meta["quantization"].startswith(qtype)
    assert not case.ours.model.training


# ---------------------------------------------------------------------------------------------
# exactness: ours against transformers' load of the same file (and the original for F32 files)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TRANSFORMERS_CASES)
def test_token_ids_equal_transformers(cases, name, tricky_texts):
    c = cases(name)
    assert c.ours.tokenizer.vocab_size == len(c.their_tokenizer)
    tok = c.ours.tokenizer
    for text in [*tricky_texts, "the quick brown fox 12345 <|endoftext|>"]:
        ids = tok.encode(text)
        assert ids == c.their_tokenizer.encode(text), text
        assert tok.decode(ids) == c.their_tokenizer.decode(ids), text


def test_gemma_tokenizer_round_trips(cases, tricky_texts):
    tok = cases("gemma-F32").ours.tokenizer
    assert tok.prefix_ids == [1]  # <s>, as the folder's tokenizer_config says (add_bos_token)
    for text in tricky_texts:
        assert tok.decode(tok.encode(text)[1:]) == text


def _max_logit_diff(model, reference, ids) -> float:
    with torch.no_grad():
        ours, _ = model(ids)
        expected = reference(ids).logits
    assert ours.shape == expected.shape
    assert expected.std().item() > 0.1  # far from a constant
    return (ours - expected).abs().max().item()


def test_logits_equal_reference(case, tricky_texts):
    for text in tricky_texts:
        ids = _ids(case.ours, text, 48)
        assert _max_logit_diff(case.ours.model, case.reference, ids) <= 1e-4, text


def _max_attention_diff(ckpt, reference, ids) -> float:
    with torch.no_grad():
        expected = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]  # [L, H, T, T]
    ours = torch.from_numpy(run_with_trace(ckpt.model, ids, kinds=("pattern",)).stack("pattern"))
    assert ours.shape == expected.shape
    return (ours - expected).abs().max().item()


def test_attention_weights_equal_reference(case, tricky_texts):
    ids = _ids(case.ours, tricky_texts[1], 24)
    assert _max_attention_diff(case.ours, case.reference, ids) <= 1e-5


def _greedy(reference, ids, n: int = 10) -> list[list[int]]:
    reference.generation_config.eos_token_id = None  # n tokens whatever comes
    with torch.no_grad():
        out = reference.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False, pad_token_id=0
        )
    return out.tolist()


def test_greedy_tokens_equal_reference(case, tricky_texts):
    ids = _ids(case.ours, tricky_texts[0], 16)
    assert generate(case.ours.model, ids, 10, greedy=True).tolist() == _greedy(case.reference, ids)


@pytest.mark.parametrize("name", F32_CASES)
def test_f32_file_equals_the_original_model(cases, name, tricky_texts):
    c = cases(name)
    for text in tricky_texts:
        assert _max_logit_diff(c.ours.model, c.original, _ids(c.ours, text, 48)) <= 1e-4, text
    ids = _ids(c.ours, tricky_texts[1], 24)
    assert _max_attention_diff(c.ours, c.original, ids) <= 1e-5
    ids = _ids(c.ours, tricky_texts[0], 16)
    assert generate(c.ours.model, ids, 10, greedy=True).tolist() == _greedy(c.original, ids)


def _layer_pairs(ckpt, original, family: str):
    """(ours, theirs, name) for the weights that go through the conversion's rearrangements."""
    if family == "gpt2":
        t = original.transformer
        yield ckpt.model.tok_emb.weight, t.wte.weight, "wte"
        yield ckpt.model.pos_emb.weight, t.wpe.weight, "wpe"
        return
    yield ckpt.model.tok_emb.weight, original.model.embed_tokens.weight, "embed_tokens"
    for i, (ours, theirs) in enumerate(zip(ckpt.model.blocks, original.model.layers)):
        for a, b in (("q_proj", "q_proj"), ("k_proj", "k_proj"), ("v_proj", "v_proj"), ("o_proj", "o_proj")):
            yield getattr(ours.attn, a).weight, getattr(theirs.self_attn, b).weight, f"{i}.{b}"
            if getattr(theirs.self_attn, b).bias is not None:
                yield getattr(ours.attn, a).bias, getattr(theirs.self_attn, b).bias, f"{i}.{b}.bias"
        for a, b in (("w_gate", "gate_proj"), ("w_up", "up_proj"), ("w_down", "down_proj")):
            yield getattr(ours.mlp, a).weight, getattr(theirs.mlp, b).weight, f"{i}.{b}"
        yield ours.norm1.weight, theirs.input_layernorm.weight, f"{i}.input_layernorm"
        if family == "qwen3":
            yield ours.attn.q_norm.weight, theirs.self_attn.q_norm.weight, f"{i}.q_norm"


@pytest.mark.parametrize("name", F32_CASES)
def test_f32_weights_come_back_as_they_were(cases, name):
    """The permutation undone, the transposes, the 1 + γ: bit for bit (Gemma's norms to float32's
    rounding of 1 + γ - 1, as in llama.cpp itself)."""
    c = cases(name)
    family = CASES[name][0]
    for ours, theirs, what in _layer_pairs(c.ours, c.original, family):
        if family == "gemma" and what.endswith("layernorm"):
            assert (ours - theirs).abs().max().item() <= 2**-24, what
        else:
            assert torch.equal(ours, theirs), what


# ---------------------------------------------------------------------------------------------
# hostile and unsupported files: one line naming the problem, nothing large allocated or read
# ---------------------------------------------------------------------------------------------
def _u32(v: int) -> bytes:
    return struct.pack("<I", v)


def _u64(v: int) -> bytes:
    return struct.pack("<Q", v)


ARCH = kv("general.architecture", 8, string("llama"))
EMBD = tensor_info("token_embd.weight", [32, 2], 0, 0)  # 2 × 32 float32 values
EMBD_DATA = bytes(256)

#: case -> (file bytes, words its message must hold).
RAW_FILES = {
    "version 1": (gguf_bytes([ARCH], [EMBD], EMBD_DATA, version=1), ["version 1 is not 2 or 3"]),
    "big-endian": (
        gguf_bytes([ARCH], [EMBD], EMBD_DATA, version_bytes=struct.pack(">I", 3)),
        ["version 50331648", "big-endian"],
    ),
    "counts larger than the file": (
        gguf_bytes([ARCH], [EMBD], EMBD_DATA, n_kv=2**40),
        ["1,099,511,627,776 metadata entries", "more than its size holds"],
    ),
    "key longer than the file": (
        gguf_bytes([_u64(2**62) + b"general.architecture"], [], EMBD_DATA, n_kv=1),
        ["metadata key 0", "runs past the end of the file"],
    ),
    "string longer than the file": (
        gguf_bytes([ARCH, kv("general.name", 8, _u64(2**62) + b"tiny")], [EMBD], EMBD_DATA),
        ["metadata 'general.name'", "runs past the end of the file"],
    ),
    "number array longer than the file": (
        gguf_bytes([ARCH, kv("tokenizer.ggml.scores", 9, _u32(6) + _u64(2**61))], [EMBD], EMBD_DATA),
        ["metadata 'tokenizer.ggml.scores'", "runs past the end of the file"],
    ),
    "string array longer than the file": (
        gguf_bytes([ARCH, kv("tokenizer.ggml.tokens", 9, _u32(8) + _u64(2**61))], [EMBD], EMBD_DATA),
        ["metadata 'tokenizer.ggml.tokens'", "runs past the end of the file"],
    ),
    "nested arrays": (
        gguf_bytes([ARCH, kv("x", 9, _u32(9) + _u64(1) + _u32(9) + _u64(1) + _u32(9) + _u64(0))], [], b""),
        ["metadata 'x'", "arrays nested more than two deep"],
    ),
    "unknown value type": (
        gguf_bytes([ARCH, kv("x", 13, b"")], [EMBD], EMBD_DATA),
        ["'x'", "unknown type 13"],
    ),
    "key not UTF-8": (
        gguf_bytes([ARCH, kv(b"general.\xff\xfename", 4, _u32(1))], [EMBD], EMBD_DATA),
        ["metadata key 1", "not UTF-8"],
    ),
    "tensor name not UTF-8": (
        gguf_bytes([ARCH], [tensor_info(b"token_embd\xff", [32, 2], 0, 0)], EMBD_DATA),
        ["tensor name 0", "not UTF-8"],
    ),
    "5 dimensions": (
        gguf_bytes([ARCH], [tensor_info("token_embd.weight", [32, 2, 1, 1, 1], 0, 0)], EMBD_DATA),
        ["'token_embd.weight'", "5 dimensions", "1 to 4"],
    ),
    "offset outside the file": (
        gguf_bytes([ARCH], [tensor_info("token_embd.weight", [32, 2], 0, 2**40)], EMBD_DATA),
        ["'token_embd.weight'", "lies outside the file"],
    ),
    "huge claimed tensor": (
        gguf_bytes([ARCH], [tensor_info("token_embd.weight", [2**31, 2**31], 0, 0)], EMBD_DATA),
        ["'token_embd.weight'", "lies outside the file"],
    ),
    "misaligned offset": (
        gguf_bytes([ARCH], [tensor_info("token_embd.weight", [8, 2], 0, 16)], EMBD_DATA),
        ["'token_embd.weight'", "offset 16", "not a multiple of the alignment 32"],
    ),
    "alignment not a power of two": (
        gguf_bytes([ARCH, kv("general.alignment", 4, _u32(48))], [EMBD], EMBD_DATA),
        ["general.alignment 48", "power of two"],
    ),
    "unknown ggml type": (
        gguf_bytes([ARCH], [tensor_info("token_embd.weight", [32, 2], 1000, 0)], EMBD_DATA),
        ["'token_embd.weight'", "ggml type 1000"],
    ),
    "rows not whole blocks": (
        gguf_bytes([ARCH], [tensor_info("token_embd.weight", [48, 2], 2, 0)], EMBD_DATA),
        ["'token_embd.weight'", "rows of 48 values", "32-value blocks"],
    ),
    "metadata key written twice": (
        gguf_bytes([ARCH, kv("general.architecture", 8, string("gemma"))], [EMBD], EMBD_DATA),
        ["metadata key 'general.architecture' is written twice"],
    ),
    "tensor listed twice": (
        gguf_bytes([ARCH], [EMBD, EMBD], EMBD_DATA),
        ["'token_embd.weight' is listed twice"],
    ),
}


def _refused(path: Path, words: list[str], opener=open_model, error=CheckpointError) -> str:
    """Open ``path``; it must raise ``error`` in one line holding ``words``, allocating under 2 MiB."""
    tracemalloc.start()
    try:
        with pytest.raises(error) as caught:
            opener(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)
    assert peak < 2 * 2**20, f"{peak:,} bytes allocated before refusing"
    return message


@pytest.mark.parametrize("name", list(RAW_FILES))
def test_hostile_header_is_refused_in_one_line(tmp_path, name):
    data, words = RAW_FILES[name]
    path = tmp_path / "model.gguf"
    path.write_bytes(data)
    message = _refused(path, words)
    assert message.startswith("model.gguf is not a readable GGUF file: ")


def test_not_gguf_is_refused(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"<!DOCTYPE html><html>not found</html>" + bytes(64))
    _refused(path, ["model.gguf is not a GGUF file", "'GGUF'"], opener=load_gguf)
    _refused(path, ["model.gguf is not a GGUF file"])  # named .gguf: told so, not "the folder holds no model"
    short = tmp_path / "short.gguf"
    short.write_bytes(b"GGUF\x03\x00")
    _refused(short, ["short.gguf is not a GGUF file"], opener=load_gguf)


@pytest.fixture(scope="module")
def tiny_file(cases) -> Path:
    return cases("llama-F32").path


def test_truncated_file_is_refused(tmp_path, tiny_file):
    data = tiny_file.read_bytes()
    header = read_header(tiny_file)
    cuts = {
        "in the tokens": (
            data.find(b"tokenizer.ggml.tokens") + 2000,
            ["'tokenizer.ggml.tokens'", "runs past the end"],
        ),
        "in the tensor table": (data.rfind(b"output.weight") + 4, ["tensor name", "runs past the end"]),
        "in the tensor data": (
            header.data_start + (len(data) - header.data_start) // 2,
            ["lies outside the file"],
        ),
        "one byte short": (len(data) - 1, ["lies outside the file", "(truncated?)"]),
    }
    for cut, words in cuts.values():
        path = tmp_path / "cut.gguf"
        path.write_bytes(data[:cut])
        _refused(path, ["cut.gguf is not a readable GGUF file", *words])


def _no_tensor_read(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a refused file must not get as far as reading a tensor")

    monkeypatch.setattr(gguf_module, "read_tensor", refuse)


#: case -> (write_gguf options, words of the message); written from the llama-F32 case's model.
UNSUPPORTED = {
    "unknown architecture": (
        dict(metadata={"general.architecture": ("mamba", "STRING")}),
        ["architecture 'mamba'", "it opens llama, qwen2, qwen3, gemma, gpt2"],
    ),
    "experts without their count used": (
        dict(metadata={"llama.expert_count": (8, "UINT32")}),
        ["llama.expert_count=8 (mixture-of-experts) without llama.expert_used_count"],
    ),
    "experts the file does not hold": (  # a Mixtral file's stacked experts (tests/model/test_gguf_moe.py)
        dict(metadata={"llama.expert_count": (8, "UINT32"), "llama.expert_used_count": (2, "UINT32")}),
        ["blk.0.ffn_gate_inp.weight, blk.0.ffn_gate_exps.weight", "missing (8 experts, llama.expert_count)"],
    ),
    "block_count that lies": (
        dict(metadata={"llama.block_count": (40, "UINT32")}),
        ["block_count=40", "holds only 21 tensors"],
    ),
    "a layer missing": (
        dict(metadata={"llama.block_count": (3, "UINT32")}),
        ["missing blk.2.attn_norm.weight"],  # named as the file names its tensors
    ),
    "block_count 10^9": (  # refused before anything is laid out per layer (1 GB of layer letters)
        dict(metadata={"llama.block_count": (10**9, "UINT32")}),
        ["its metadata (llama): llama.block_count=1000000000 must be a whole number from 1 to 10,000"],
    ),
    "rope.dimension_count 0": (  # no rotation at all, not "absent" (full rotation)
        dict(metadata={"llama.rope.dimension_count": (0, "UINT32")}),
        ["llama.rope.dimension_count=0 must be an even whole number from 2", "head's size (llama.attention"],
    ),
    "head counts that do not divide": (  # named by the file's keys, not config.json's or ours
        dict(metadata={"llama.attention.head_count": (3, "UINT32")}),
        ["llama.attention.head_count=3 is not a multiple of llama.attention.head_count_kv=2"],
    ),
    "feed_forward_length 0": (
        dict(metadata={"llama.feed_forward_length": (0, "UINT32")}),
        ["x.gguf: its metadata (llama): llama.feed_forward_length=0 must be a positive whole number"],
    ),
    "block_count a string": (
        dict(metadata={"llama.block_count": ("two", "STRING")}),
        ["llama.block_count is 'two', not a number"],
    ),
    "head count a bool": (
        dict(metadata={"llama.attention.head_count": (True, "BOOL")}),
        ["llama.attention.head_count is True, not a number"],
    ),
    "no block_count": (dict(metadata={"llama.block_count": None}), ["the metadata has no llama.block_count"]),
    "RoPE scaling yarn": (
        dict(metadata={"llama.rope.scaling.type": ("yarn", "STRING")}),
        ["RoPE scaling 'yarn' is not implemented"],
    ),
    "tokenizer of an unknown kind": (
        dict(metadata={"tokenizer.ggml.model": ("bert", "STRING")}),
        ["'bert'", "tokenizer.ggml.model"],
    ),
    "no token embedding": (dict(drop=("token_embd.weight",)), ["token_embd.weight"]),
}


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_file_is_refused_before_reading_weights(tmp_path, monkeypatch, hf_models, name):
    options, words = UNSUPPORTED[name]
    folder, model = hf_models("llama")
    path = write_gguf(tmp_path / "x.gguf", model, folder, "F32", **options)
    _no_tensor_read(monkeypatch)
    assert detect(path) == ("gguf", path)
    message = _refused(path, ["x.gguf", *words])
    assert "config.json" not in message  # a file the user does not have


def test_i_quant_is_refused_naming_the_tensor_and_the_supported_types(tmp_path, monkeypatch, hf_models):
    folder, model = hf_models("llama-256")
    size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.IQ2_XXS][1]

    def raw(name, shape, type_name):
        return bytes(int(np.prod(shape)) // 256 * size) if type_name == "IQ2_XXS" else None

    types = {"blk.0.ffn_gate.weight": "IQ2_XXS", "blk.1.ffn_up.weight": "IQ2_XXS"}
    path = write_gguf(tmp_path / "iq.gguf", model, folder, "Q8_0", types=types, raw=raw)
    _no_tensor_read(monkeypatch)
    message = _refused(
        path, ["blk.0.ffn_gate.weight (IQ2_XXS)", "blk.1.ffn_up.weight (IQ2_XXS)", "cannot dequantize"]
    )
    assert "F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, BF16" in message


def test_a_model_larger_than_memory_is_refused_by_the_size_check(tmp_path, monkeypatch, hf_models):
    """Dequantized whole, the size is the config's (a width of 2**36 is refused by the arithmetic);
    kept as stored, it is the file's tensors', and metadata that lies about them is named as such."""
    folder, model = hf_models("llama")
    wide = {"llama.feed_forward_length": (10**7, "UINT64"), "llama.embedding_length": (2**16, "UINT64")}
    path = write_gguf(tmp_path / "huge.gguf", model, folder, "F32", metadata=wide)
    _no_tensor_read(monkeypatch)
    message = _refused(
        path, ["loading huge"], opener=lambda p: load_gguf(p, stored=False), error=ModelTooLarge
    )
    header = read_header(path)
    n = parameters(gguf_config(header)[2]).total  # 3.9e12, read into float32
    assert f"(weights {human_bytes(4 * n)}" in message and "d_ff=10000000" in message
    message = _refused(path, ["llama.embedding_length=65536", "llama.feed_forward_length=10000000"])
    held = sum(t.numel for t in header.tensors.values())
    assert f"means {n:,} parameters but huge.gguf holds {held:,} values: the config does not" in message


# ---------------------------------------------------------------------------------------------
# detection by content, whatever the name
# ---------------------------------------------------------------------------------------------
def test_detected_by_content_whatever_the_name(tmp_path, tiny_file):
    blob = tmp_path / "blobs" / ("sha256-" + "ab12" * 16)  # an Ollama blob: no extension
    blob.parent.mkdir()
    shutil.copy(tiny_file, blob)
    assert detect(blob) == ("gguf", blob)
    ckpt = open_model(blob)
    assert ckpt.meta["kind"] == "gguf" and ckpt.meta["name"] == "tiny"

    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(tiny_file, folder / "model.Q8_0.gguf")
    (folder / "README.md").write_text("# a model\n")
    assert detect(folder) == ("gguf", folder / "model.Q8_0.gguf")
    assert detect(folder / "README.md") == ("gguf", folder / "model.Q8_0.gguf")  # a file beside it

    shutil.copy(tiny_file, folder / "second.gguf")
    with pytest.raises(CheckpointError) as caught:
        detect(folder)
    message = str(caught.value)
    assert "several GGUF files" in message and "model.Q8_0.gguf" in message and "second.gguf" in message


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------
def test_cli_inspect_exports_a_gguf_as_it_exports_a_folder(tmp_path, capsys, cases, hf_models):
    from app.cli import main

    c = cases("llama-F32")
    folder, _ = hf_models("llama")
    prompt = "the quick brown fox"
    arrays = {}
    for what, source in (("gguf", c.path), ("folder", folder)):
        out = tmp_path / f"{what}.npz"
        assert main(["inspect", "--checkpoint", str(source), "--prompt", prompt, "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        T = len(c.ours.tokenizer.encode(prompt))
        assert f"wrote {out}: 2 layers × 4 heads × {T} tokens" in printed
        with np.load(out, allow_pickle=False) as npz:
            arrays[what] = {k: npz[k] for k in npz.files}
    assert arrays["gguf"].keys() == arrays["folder"].keys()
    assert arrays["gguf"]["tokens"].tolist() == arrays["folder"]["tokens"].tolist()
    for key, value in arrays["gguf"].items():
        if value.dtype.kind == "f":
            assert np.abs(value - arrays["folder"][key]).max() <= 1e-4, key
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(c.path.read_bytes()[:-1])
    assert main(["inspect", "--checkpoint", str(cut), "--prompt", "x", "--out", str(tmp_path / "y.npz")]) == 2
    err = capsys.readouterr().err
    assert "cut.gguf is not a readable GGUF file" in err and "(truncated?)" in err and err.count("\n") == 1


def test_bfloat16_on_request_keeps_the_dequantized_values_in_bfloat16(cases):
    """``load_gguf(..., dtype=torch.bfloat16)``: every weight is the float32 one rounded to bfloat16,
    and the logits follow the float32 model's to bfloat16 precision."""
    from model.io.gguf.load import load_gguf

    case = cases("llama-Q8_0")
    ours16 = load_gguf(case.path, dtype=torch.bfloat16)
    full = load_gguf(case.path, stored=False).model.state_dict()
    for name, p in ours16.model.named_parameters():
        assert p.dtype == torch.bfloat16, name
        assert torch.equal(p, full[name].to(torch.bfloat16)), name
    ids = torch.tensor([case.ours.tokenizer.encode("the cat sat on the mat")])
    with torch.no_grad():
        expected, _ = case.ours.model(ids)
        got, _ = ours16.model(ids)
    # bfloat16 keeps 8 bits: through this small random model's layers that is a few percent of the
    # largest logit (and CPU bfloat16 matmuls are not bitwise repeatable); a mapping error is ~100%
    error = (got.float() - expected).abs().max().item() / expected.abs().max().item()
    corr = torch.corrcoef(torch.stack([got.float().flatten(), expected.flatten()]))[0, 1].item()
    assert error < 0.2 and corr > 0.99


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


@pytest.mark.parametrize("head_dim", [16, 128])
def test_llama3_rope_freqs_open_as_llama3_scaling(tmp_path, write_hf_family, head_dim, tricky_texts):
    """Llama 3.1/3.2 files carry their RoPE scaling as ``rope_freqs.weight`` (one factor per frequency):
    opened as the ``llama3`` scaling that made it, the model equals the original, whose wavelengths
    fall on every side of the scaling (kept, blended, divided by the factor)."""
    scaling = {**LLAMA3_ROPE, "original_max_position_embeddings": 8192}
    folder = tmp_path / "hf"
    original = write_hf_family(
        folder, "llama", hidden_size=64, intermediate_size=128, head_dim=head_dim, rope_theta=500000.0,
        rope_scaling=scaling, max_position_embeddings=256,
    )  # fmt: skip
    path = write_gguf(tmp_path / "llama3.gguf", original, folder, "F32")
    assert "rope_freqs.weight" in read_header(path).tensors
    ckpt = open_model(path)
    cfg = ckpt.config
    assert (
        cfg.positional.rope_scaling,
        cfg.positional.rope_factor,
        cfg.positional.rope_original_context,
    ) == ("llama3", 8.0, 8192)
    for text in tricky_texts:
        assert _max_logit_diff(ckpt.model, original, _ids(ckpt, text, 200)) <= 1e-4, text
    assert "rope_freqs.weight" not in {n for n, _ in ckpt.model.named_parameters()}


def test_rope_freqs_of_another_kind_are_refused_in_one_line(tmp_path, write_hf_family):
    folder = tmp_path / "hf"
    scaling = {**LLAMA3_ROPE, "original_max_position_embeddings": 4096}  # not Meta's 8192
    original = write_hf_family(
        folder, "llama", hidden_size=64, intermediate_size=128, head_dim=16, rope_scaling=scaling
    )
    path = write_gguf(tmp_path / "other.gguf", original, folder, "F32")
    with pytest.raises(
        CheckpointError, match=r"rope_freqs.weight holds RoPE factors other than Llama 3"
    ) as e:
        open_model(path)
    assert "\n" not in str(e.value)
    bad = write_gguf(
        tmp_path / "bad.gguf", original, folder, "F32", drop=("rope_freqs.weight",),
        extra_tensors={"rope_freqs.weight": [1.0] * 3},
    )  # fmt: skip
    with pytest.raises(CheckpointError, match=r"rope_freqs.weight has shape \[3\], not \[8\]"):
        open_model(bad)


def test_one_name_for_a_gguf_model_whichever_way_it_is_opened(smollm2_path, tmp_path, tiny_file):
    """The packaged SmolLM2 opened as a file (File → Open) is called what ``package:NAME`` calls it,
    not its header's general.name ("Smollm2 135M 8k Lc100K Mix1 Ep2"); a blob named by its hash
    falls back on general.name."""
    from model.io.gguf.file import read_header
    from model.io.gguf.load import PACKAGED, summarize_gguf
    from model.io.gguf.names import gguf_model_name

    for name, (_, file_name) in PACKAGED.items():
        assert gguf_model_name(file_name) == name
    opened = summarize_gguf(smollm2_path)["name"]
    assert opened in PACKAGED and opened != read_header(smollm2_path).get("general.name")
    blob = tmp_path / ("sha256-" + "cd34" * 16)
    shutil.copy(tiny_file, blob)
    assert summarize_gguf(blob)["name"] == read_header(blob).get("general.name") == "tiny"
