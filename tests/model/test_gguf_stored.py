"""A GGUF's matrices kept as stored (mapped, decoded to float32 one layer at a time) give the model that
dequantizing every tensor once gives: the same logits, weights, state_dict and instruments, holding a
small share of its float32 bytes. Also: the torch decoders equal ``gguf.quants.dequantize`` bit for bit,
a file whose tensors do not fit it is refused before anything is mapped, training decodes the matrices
once, and the size check counts the bytes as this plan holds them.

The files are tiny random Llama models (tests/conftest.py) converted as llama.cpp converts them
(tests/gguf_files.py), in Q8_0 (``gguf.quants.quantize``) and Q4_K (random blocks with finite scales:
``gguf`` cannot make them), rows of whole 256-value blocks.
"""

from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize, quantize

from model.budget import sizing
from model.budget.arithmetic import human_bytes
from model.budget.sizing import Available, ModelTooLarge, check, load_need
from model.interp.analysis.circuit_weights import head_weights
from model.io.checkpoint.saved import CheckpointError
from model.io.gguf import stored as gguf_stored
from model.io.gguf.decode import TORCH_DECODED
from model.io.gguf.file import DEQUANTIZED, GGUFHeader, GGUFTensor, read_header
from model.io.gguf.load import gguf_config, load_gguf
from model.io.gguf.stored import stored_need
from model.io.pretrained import open_model
from model.nn import quantized
from model.nn.quantized import StoredEmbedding, StoredLinear, has_stored, stored_bytes
from tests.gguf_files import K_QUANTS, gguf_tensors, random_k_quant, write_gguf

LLAMA = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _write(tmp_path, write_hf_family, qtype: str, *, tied: bool = False, name: str = "m"):
    folder = tmp_path / f"hf-{name}"
    model = write_hf_family(folder, "llama", tie_word_embeddings=tied, **LLAMA)
    path = tmp_path / f"{name}.gguf"
    if qtype == "Q4_K":
        types = {n: "Q4_K" for n, w in gguf_tensors(model) if w.ndim == 2}
        order = sorted(types)

        def raw(n, shape, type_name):
            return random_k_quant(shape, type_name, seed=order.index(n)) if type_name in K_QUANTS else None

        return write_gguf(path, model, folder, "F32", types=types, raw=raw)
    return write_gguf(path, model, folder, qtype)


@pytest.fixture(scope="module")
def files(tmp_path_factory, write_hf_family):
    """(type, tied) -> a GGUF path, each written once."""
    made: dict = {}

    def get(qtype: str, tied: bool = False):
        if (qtype, tied) not in made:
            where = tmp_path_factory.mktemp(f"stored-{qtype}-{tied}")
            made[qtype, tied] = _write(where, write_hf_family, qtype, tied=tied)
        return made[qtype, tied]

    return get


def _float_bytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def _logits(model, ids):
    with torch.no_grad():
        return model(ids)[0]


IDS = torch.tensor([[5, 17, 17, 300, 2, 99, 5, 411, 0, 63, 63, 7]])


# ---------------------------------------------------------------------------------------------
# the decoders
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("number", sorted(TORCH_DECODED))
def test_torch_decoders_equal_gguf_dequantize_bit_for_bit(number):
    qtype = gguf.GGMLQuantizationType(number)
    name, block, size = DEQUANTIZED[number]
    shape = (24, 2 * 256)
    if name in K_QUANTS:
        raw = np.frombuffer(random_k_quant(shape, name, seed=number), dtype=np.uint8).reshape(24, -1)
    else:
        w = np.random.default_rng(number).standard_normal(shape).astype(np.float32)
        raw = quantize(w, qtype)
    assert raw.shape == (24, 2 * 256 // block * size)
    expected = dequantize(raw, qtype)
    ours = gguf_stored.decoder(number)(raw.copy())
    assert isinstance(ours, torch.Tensor) and ours.dtype == torch.float32
    assert np.isfinite(expected).all() and expected.std() > 0
    assert np.array_equal(ours.numpy().view(np.uint32), expected.view(np.uint32)), name


@pytest.mark.parametrize("name", ["F32", "F16", "BF16"])
def test_float_types_are_read_as_stored(name):
    number = next(k for k, v in DEQUANTIZED.items() if v[0] == name)
    w = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    raw = np.ascontiguousarray(quantize(w, gguf.GGMLQuantizationType(number))).view(np.uint8).reshape(4, -1)
    ours = gguf_stored.decoder(number)(raw)
    assert np.array_equal(ours.numpy(), dequantize(raw, gguf.GGMLQuantizationType(number)))


# ---------------------------------------------------------------------------------------------
# the model kept as stored equals the one dequantized once
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_K"])
@pytest.mark.parametrize("tied", [False, True])
def test_stored_model_equals_the_dequantized_one(files, qtype, tied):
    path = files(qtype, tied)
    kept, full = load_gguf(path, stored=True), load_gguf(path, stored=False)
    assert has_stored(kept.model) and not has_stored(full.model)
    assert isinstance(kept.model.tok_emb, StoredEmbedding)
    assert isinstance(kept.model.blocks[0].attn.q_proj, StoredLinear)
    assert (kept.model.lm_head is None) == tied
    expected, got = _logits(full.model, IDS), _logits(kept.model, IDS)
    assert expected.std() > 0.1
    assert ((got - expected).abs().max() / expected.abs().max()).item() <= 1e-4
    assert kept.model.num_params() == full.model.num_params()
    assert kept.model.num_params(non_embedding=True) == full.model.num_params(non_embedding=True)
    # what it holds: the file's matrices mapped, and a small share of the float32 bytes
    header = read_header(path)
    assert stored_bytes(kept.model) == sum(t.nbytes for t in header.tensors.values() if len(t.shape) == 2)
    assert _float_bytes(kept.model) < 0.05 * _float_bytes(full.model)


def test_weights_state_dict_and_circuits_read_as_the_dequantized_model(files):
    path = files("Q4_K")
    kept, full = load_gguf(path, stored=True), load_gguf(path, stored=False)
    ours, theirs = kept.model.state_dict(), full.model.state_dict()
    assert ours.keys() == theirs.keys()
    for name, t in theirs.items():
        assert torch.equal(ours[name], t), name
    attn = kept.model.blocks[1].attn
    assert torch.equal(attn.k_proj.weight, full.model.blocks[1].attn.k_proj.weight)  # RoPE rows put back
    a, b = head_weights(kept.model, layers=[1]), head_weights(full.model, layers=[1])
    for field in "QKVO":
        assert torch.equal(getattr(a, field), getattr(b, field)), field


def test_embedding_decodes_only_the_rows_looked_up_and_the_head_goes_by_blocks(files, monkeypatch):
    path = files("Q8_0", True)
    full = load_gguf(path, stored=False)
    expected = _logits(full.model, IDS)
    monkeypatch.setattr(quantized, "WORKING_BYTES", 4 * 256 * 50)  # 50 rows of the table a block
    monkeypatch.setattr(quantized, "CHUNK_VALUES", 256 * 7)  # 7 rows decoded at a time
    kept = load_gguf(path, stored=True)
    decoded: list[int] = []
    table = kept.model.tok_emb.stored
    real = table.decode
    monkeypatch.setattr(table, "decode", lambda raw: decoded.append(len(raw)) or real(raw))
    looked_up = kept.model.tok_emb(IDS)
    distinct = len(set(IDS[0].tolist()))
    assert sum(decoded) == distinct < IDS.numel()
    assert torch.equal(looked_up, full.model.tok_emb(IDS))
    decoded.clear()
    got = _logits(kept.model, IDS)
    assert max(decoded) <= 7 and sum(decoded) == distinct + 420  # the lookup, then the head's 420 rows
    assert ((got - expected).abs().max() / expected.abs().max()).item() <= 1e-4
    with pytest.raises(IndexError):
        kept.model.tok_emb(torch.tensor([[420]]))
    with pytest.raises(IndexError):
        kept.model.tok_emb(torch.tensor([[-1]]))


def test_training_decodes_the_stored_matrices_once(files, tiny_settings, tmp_path):
    from model.text.sources import resolve_source
    from model.train.trainer import Trainer

    ckpt = load_gguf(files("Q8_0"), stored=True)
    before = ckpt.model.state_dict()
    text = tmp_path / "corpus.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40, encoding="utf-8")
    source = resolve_source(str(text), tokenizer=ckpt.tokenizer)
    trainer = Trainer(ckpt.config, source, tiny_settings, model=ckpt.model)
    assert not has_stored(trainer.model)
    after = trainer.model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert all(p.requires_grad for p in trainer.model.parameters())


# ---------------------------------------------------------------------------------------------
# bad files: refused before anything is mapped
# ---------------------------------------------------------------------------------------------
def test_a_tensor_larger_than_its_bytes_is_refused_before_anything_is_mapped(files, tmp_path, monkeypatch):
    path = files("Q8_0")
    data = bytearray(path.read_bytes())
    name = b"blk.1.ffn_down.weight"
    at = data.find(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    n_dims = struct.unpack_from("<I", data, at)[0]
    assert n_dims == 2 and struct.unpack_from("<2Q", data, at + 4) == (512, 256)
    struct.pack_into("<Q", data, at + 4 + 8, 256 * 4096)  # 4096 times the rows the file holds
    bad = tmp_path / "lying.gguf"
    bad.write_bytes(bytes(data))

    def no_map(*args, **kwargs):
        raise AssertionError("mapped before the header was checked")

    monkeypatch.setattr(gguf_stored.np, "memmap", no_map)
    with pytest.raises(CheckpointError) as caught:
        load_gguf(bad, stored=True)
    message = str(caught.value)
    assert "\n" not in message and "'blk.1.ffn_down.weight'" in message and "lies outside the file" in message


# ---------------------------------------------------------------------------------------------
# the size check counts the bytes as the plan holds them
# ---------------------------------------------------------------------------------------------
def _llama_header(tmp_path, *, d: int, layers: int, ffn: int, vocab: int, heads: int, kv: int, qtype: str):
    """A header (no file behind it) of a Llama of these shapes, matrices in ``qtype``, norms F32."""
    number = next(k for k, v in DEQUANTIZED.items() if v[0] == qtype)
    tensors: dict[str, GGUFTensor] = {}

    def add(name: str, shape: tuple[int, ...], kind: int) -> None:
        _, blk, sz = DEQUANTIZED[kind]
        tensors[name] = GGUFTensor(name, shape, kind, 0, int(np.prod(shape)) // blk * sz)

    d_kv = d // heads * kv
    add("token_embd.weight", (vocab, d), number)
    add("output.weight", (vocab, d), number)
    add("output_norm.weight", (d,), 0)
    for i in range(layers):
        for part, shape in (
            ("attn_q", (d, d)), ("attn_k", (d_kv, d)), ("attn_v", (d_kv, d)), ("attn_output", (d, d)),
            ("ffn_gate", (ffn, d)), ("ffn_up", (ffn, d)), ("ffn_down", (d, ffn)),
        ):  # fmt: skip
            add(f"blk.{i}.{part}.weight", shape, number)
        add(f"blk.{i}.attn_norm.weight", (d,), 0)
        add(f"blk.{i}.ffn_norm.weight", (d,), 0)
    metadata = {
        "general.architecture": "llama",
        "llama.block_count": layers,
        "llama.embedding_length": d,
        "llama.feed_forward_length": ffn,
        "llama.attention.head_count": heads,
        "llama.attention.head_count_kv": kv,
        "llama.context_length": 4096,
    }
    return GGUFHeader(path=tmp_path / "seven.gguf", version=3, metadata=metadata, tensors=tensors)


GiB = 2**30


def test_a_7b_q4_file_fits_a_23_gib_machine_and_a_larger_one_is_refused_with_the_numbers(tmp_path):
    header = _llama_header(tmp_path, d=4096, layers=32, ffn=11008, vocab=32000, heads=32, kv=32, qtype="Q4_K")
    _, _, cfg = gguf_config(header)
    matrices = sum(t.nbytes for t in header.tensors.values() if len(t.shape) == 2)
    values = sum(t.numel for t in header.tensors.values() if len(t.shape) == 2)
    assert 6.7e9 < values < 6.8e9 and matrices == values // 256 * 144  # 4.5 bits a value
    need = stored_need(header, cfg, what="loading seven")
    assert need.parts["weights as stored"] == matrices
    assert need.parts["one layer decoded"] < 0.3 * GiB
    assert need.total < 1.1 * matrices
    machine = Available(23 * GiB, "MemAvailable")
    check(need, available=machine)  # fits: refused before this plan
    with pytest.raises(ModelTooLarge):
        check(load_need(cfg, what="loading seven"), available=machine)  # float32: 54 GB
    with pytest.raises(ModelTooLarge) as caught:
        check(need, available=Available(4 * GiB, "MemAvailable"))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"loading seven needs about {human_bytes(need.total)} (weights as stored ")
    assert f"weights as stored {human_bytes(matrices)}" in message
    assert "4.00 GiB available" in message and "a smaller or more quantized file" in message


def test_opening_is_refused_by_the_stored_plan_when_the_file_does_not_fit(files, monkeypatch):
    path = files("Q8_0")
    header = read_header(path)
    _, _, cfg = gguf_config(header)
    need = stored_need(header, cfg, what="x").total
    monkeypatch.setattr(sizing, "available_memory", lambda device="cpu": Available(need, "MemAvailable"))
    with pytest.raises(ModelTooLarge, match="weights as stored"):
        load_gguf(path, stored=True)  # 0.8 of what it needs is usable
    monkeypatch.setattr(sizing, "available_memory", lambda device="cpu": Available(2 * need, "MemAvailable"))
    assert has_stored(load_gguf(path, stored=True).model)


def test_a_small_model_is_dequantized_once_and_a_large_or_tight_one_kept_as_stored(files, monkeypatch):
    """By default the model runs at full speed when its float32 weights are small (SmolLM2-135M: 0.5 GB)
    and keeps the file's size past STORED_ABOVE (a 1B model) or when float32 would not fit."""
    from model.io import stored as policy

    path = files("Q8_0")
    assert not has_stored(load_gguf(path).model)  # a few MB of float32
    _, _, cfg = gguf_config(read_header(path))
    float32 = load_need(cfg).parts["weights"]
    monkeypatch.setattr(policy, "STORED_ABOVE", float32 - 1)
    assert has_stored(load_gguf(path).model)
    assert not has_stored(load_gguf(path, stored=False).model)
    monkeypatch.setattr(policy, "STORED_ABOVE", float32)
    assert not has_stored(load_gguf(path).model)
    monkeypatch.setattr(policy, "usable_bytes", lambda: load_need(cfg).total - 1)  # float32: no room
    assert has_stored(load_gguf(path, stored=None).model)
    assert not has_stored(load_gguf(path, dtype=torch.bfloat16).model)  # bf16 asked for: dequantized


def test_open_model_holds_the_weights_as_asked_and_says_where_the_choice_does_not_apply(
    files, monkeypatch, tmp_path, tiny_config
):
    """File → Open's Weights choice and the commands' --keep-stored reach the loader through open_model;
    a model read into float32 whatever is asked (ours) gets one line saying so, never silence."""
    from model.io import stored as policy
    from model.io.checkpoint.saved import save_checkpoint
    from model.nn.gpt import init_model
    from model.text.tokens import ByteTokenizer

    path = files("Q8_0")
    assert has_stored(open_model(path, stored=True).model)  # small: by default it would be decoded once
    _, _, cfg = gguf_config(read_header(path))
    monkeypatch.setattr(policy, "STORED_ABOVE", load_need(cfg).parts["weights"] - 1)
    assert has_stored(open_model(path).model)  # large: by default kept as stored...
    full = open_model(path, stored=False)  # ...unless asked to decode once
    assert not has_stored(full.model) and "note" not in full.meta

    tok = ByteTokenizer()
    ours = save_checkpoint(tmp_path / "ours", init_model(tiny_config.with_vocab(tok.vocab_size)), tok)
    assert "note" not in open_model(ours).meta
    for stored in (True, False):
        note = open_model(ours, stored=stored).meta["note"]
        assert "\n" not in note and "GGUF" in note and "read into float32" in note


@pytest.mark.slow
def test_the_real_smollm2_kept_as_stored_gives_today_s_logits(smollm2, smollm2_path):
    """SmolLM2-135M-Instruct (Q4_1/Q8_0) with its matrices kept as stored: logits within 1e-3 relative
    of the model dequantized once (the default for this size), on a prompt of prose and code."""
    kept = load_gguf(smollm2_path, stored=True)
    assert has_stored(kept.model) and not has_stored(smollm2.model)
    ids = smollm2.tokenizer.encode("The cat sat on the mat.\ndef add(a, b):\n    return a + b\n")
    with torch.no_grad():
        want = smollm2.model(torch.tensor([ids]))[0]
        got = kept.model(torch.tensor([ids]))[0]
    rel = float((got - want).abs().max() / want.abs().max())
    assert rel < 1e-3, rel
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    assert stored_bytes(kept.model) < 0.35 * 4 * smollm2.model.num_params()  # about a quarter of float32
