"""GGUF files for the tests: a tiny transformers model converted as llama.cpp's ``convert_hf_to_gguf.py``
converts it (:func:`write_gguf`, written with ``gguf.GGUFWriter``), and hand-assembled bytes for the
files no writer makes (:func:`gguf_bytes`: wrong versions, lying lengths, bad offsets...).

A helper module, not a test module: ``tests/model/test_gguf.py`` imports it. Heavy imports (numpy,
gguf, torch) stay inside the functions.

What :func:`write_gguf` does, after llama.cpp:

* metadata under the architecture's prefix: ``block_count``, ``context_length``, ``embedding_length``,
  ``feed_forward_length``, ``attention.head_count`` and ``head_count_kv``, ``attention.key_length`` /
  ``value_length`` where the config sets a head size of its own, ``rope.freq_base``,
  ``rope.dimension_count``, ``attention.layer_norm_rms_epsilon`` (GPT-2: ``layer_norm_epsilon``),
  ``general.file_type`` and ``general.quantization_version``;
* the tokenizer: ``tokenizer.ggml.model`` ``gpt2`` (tokens, merges, token types, ``pre``) for a byte-level
  vocabulary, ``llama`` (tokens, scores, token types, merges) for a byte-fallback one, the BOS / EOS /
  unknown ids and ``add_bos_token`` from the folder's ``tokenizer_config.json``;
* tensors renamed (``token_embd``, ``blk.N.attn_q`` ...), stored ``[out, in]`` (GPT-2's Conv1D weights
  transposed), Llama's ``W_Q`` / ``W_K`` rows permuted to ggml's RoPE order, Gemma's norms stored as
  ``1 + γ``, a tied head not stored;
* each tensor in the requested type through ``gguf.quants.quantize``: 1-D tensors and norms stay F32,
  and a matrix whose rows are not whole blocks falls back to F16, as llama.cpp's converter does.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "K_QUANTS",
    "gguf_bytes",
    "gguf_tensors",
    "kv",
    "random_k_quant",
    "string",
    "tensor_info",
    "write_gguf",
    "write_gguf_tensors",
]

#: llama.cpp's per-layer names for a Llama-shaped Hugging Face model (after ``model.layers.N.``).
_LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_GLOBAL = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}

#: GPT-2's (after ``transformer.h.N.``); the Conv1D weights among them are stored transposed.
_GPT2_LAYER = {
    "ln_1": "attn_norm",
    "attn.c_attn": "attn_qkv",
    "attn.c_proj": "attn_output",
    "ln_2": "ffn_norm",
    "mlp.c_fc": "ffn_up",
    "mlp.c_proj": "ffn_down",
}
_GPT2_GLOBAL = {
    "transformer.wte": "token_embd",
    "transformer.wpe": "position_embd",
    "transformer.ln_f": "output_norm",
}

#: ``tokenizer.ggml.pre`` of a byte-level vocabulary, per architecture (llama.cpp names the split regex).
_PRE = {"qwen2": "qwen2", "qwen3": "qwen2", "gpt2": "gpt-2"}

#: token types (llama.cpp's ``llama_token_type``).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6

#: The K-quants ``gguf.quants`` dequantizes but cannot make: name -> (the byte offsets of the float16
#: scales in one block (ggml-common.h's ``block_q2_K`` ... ``block_q6_K``), the largest scale drawn, which
#: puts the values' spread near 0.1).
K_QUANTS = {
    "Q2_K": ((80, 82), 1e-2),  # scales[16] qs[64] d dmin
    "Q3_K": ((108,), 4e-3),  # hmask[32] qs[64] scales[12] d
    "Q4_K": ((0, 2), 7e-4),  # d dmin scales[12] qs[128]
    "Q5_K": ((0, 2), 3e-4),  # d dmin scales[12] qh[32] qs[128]
    "Q6_K": ((208,), 1.2e-4),  # ql[128] qh[64] scales[16] d
}


# ---------------------------------------------------------------------------------------------
# converting a transformers model, as convert_hf_to_gguf.py does
# ---------------------------------------------------------------------------------------------
def _permute(w, n_head: int):
    """convert_hf_to_gguf's ``LlamaModel.permute``: per head, rows (2, d/2) stored as (d/2, 2)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


#: GPT-2's Conv1D weights, stored [in, out] by transformers and [out, in] by llama.cpp.
_GPT2_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def gguf_tensors(model) -> list[tuple[str, Any]]:
    """``(llama.cpp name, float32 numpy array)`` of every tensor llama.cpp writes, in its order."""
    cfg = model.config
    model_type = cfg.model_type
    gpt2 = model_type == "gpt2"
    tied = bool(getattr(cfg, "tie_word_embeddings", False)) or gpt2
    layer_names, global_names = (_GPT2_LAYER, _GPT2_GLOBAL) if gpt2 else (_LAYER, _GLOBAL)
    out = []
    for name, tensor in model.state_dict().items():
        if re.search(r"\.attn\.(bias|masked_bias)$", name):
            continue  # GPT-2's causal-mask buffers, not weights
        stem, _, kind = name.rpartition(".")
        if stem == "lm_head" and tied:
            continue  # a tied head is the embedding: not stored
        w = tensor.detach().float().numpy().copy()
        m = re.fullmatch(r"(?:model\.layers|transformer\.h)\.(\d+)\.(.+)", stem)
        part = m[2] if m else ""
        new = f"blk.{m[1]}.{layer_names[part]}.{kind}" if m else f"{global_names[stem]}.{kind}"
        if gpt2 and kind == "weight" and part in _GPT2_CONV1D:
            w = w.T.copy()
        if model_type == "llama" and part in ("self_attn.q_proj", "self_attn.k_proj"):
            heads = cfg.num_attention_heads if part == "self_attn.q_proj" else cfg.num_key_value_heads
            w = _permute(w, heads)
        if model_type == "gemma" and new.endswith("norm.weight"):
            w = w + 1  # llama.cpp multiplies by the stored weight: Gemma's (1 + γ)
        out.append((new, w))
    factors = _llama3_rope_freqs(cfg) if model_type == "llama" else None
    if factors is not None:
        out.insert(0, ("rope_freqs.weight", factors))
    return out


def _llama3_rope_freqs(cfg):
    """convert_hf_to_gguf's ``LlamaModel.generate_extra_tensors``: Llama 3's RoPE scaling written out as
    one factor per rotary frequency (each θ_i is divided by it), or None without that scaling."""
    import math

    import numpy as np

    scaling = getattr(cfg, "rope_scaling", None) or {}
    if scaling.get("rope_type", scaling.get("type")) != "llama3":
        return None
    base = _rope_theta(cfg) or 10000.0
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    factor = scaling.get("factor", 8.0)
    low_freq_factor = scaling.get("low_freq_factor", 1.0)
    high_freq_factor = scaling.get("high_freq_factor", 4.0)
    old_context_len = scaling.get("original_max_position_embeddings", 8192)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    factors = []
    for i in range(0, dim, 2):
        freq = 1.0 / (base ** (i / dim))
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1.0)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def _llama_cpp_type(name: str, w, qtype):
    """The type llama.cpp's converter stores a tensor in when asked for ``qtype``."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    if w.ndim <= 1 or name.endswith("_norm.weight"):
        return GGMLQuantizationType.F32
    block = GGML_QUANT_SIZES[qtype][0]
    if w.shape[-1] % block:
        return GGMLQuantizationType.F16  # rows that are not whole blocks
    return qtype


def _rope_theta(cfg) -> float | None:
    theta = getattr(cfg, "rope_theta", None)
    params = getattr(cfg, "rope_parameters", None)
    if theta is None and isinstance(params, dict):
        theta = params.get("rope_theta")
    return None if theta is None else float(theta)


def _add_hparams(writer, cfg) -> None:
    model_type = cfg.model_type
    if model_type == "gpt2":
        writer.add_context_length(cfg.n_positions)
        writer.add_embedding_length(cfg.n_embd)
        writer.add_feed_forward_length(cfg.n_inner or 4 * cfg.n_embd)
        writer.add_block_count(cfg.n_layer)
        writer.add_head_count(cfg.n_head)
        writer.add_layer_norm_eps(cfg.layer_norm_epsilon)
        return
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(cfg.num_key_value_heads or heads)
    if model_type in ("qwen3", "gemma") or head_dim != cfg.hidden_size // heads:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    theta = _rope_theta(cfg)
    if theta is not None:
        writer.add_rope_freq_base(theta)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)


def _add_tokenizer(writer, folder: Path, model_type: str) -> None:
    """The vocabulary of ``folder`` (tokenizer.json, or GPT-2's vocab.json + merges.txt) as llama.cpp
    writes it: ``gpt2`` for a byte-level one, ``llama`` for a byte-fallback one."""
    config_file = folder / "tokenizer_config.json"
    tok_config = json.loads(config_file.read_text("utf-8")) if config_file.is_file() else {}
    if (folder / "tokenizer.json").is_file():
        data = json.loads((folder / "tokenizer.json").read_text("utf-8"))
        vocab = dict(data["model"]["vocab"])
        merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
        added = {t["content"]: (t["id"], t["special"]) for t in data["added_tokens"]}
        fallback = bool(data["model"].get("byte_fallback"))
    else:  # GPT-2's files
        vocab = json.loads((folder / "vocab.json").read_text("utf-8"))
        merges = [
            line for line in (folder / "merges.txt").read_text("utf-8").splitlines()[1:] if line.strip()
        ]
        added = {"<|endoftext|>": (vocab["<|endoftext|>"], True)} if "<|endoftext|>" in vocab else {}
        fallback = False
    for content, (i, _) in added.items():
        vocab[content] = i
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens))), "ids with gaps"
    types = []
    for t in tokens:
        if t in added and added[t][1]:
            types.append(UNKNOWN if t == tok_config.get("unk_token") else CONTROL)
        elif t in added:
            types.append(USER_DEFINED)
        elif fallback and re.fullmatch(r"<0x[0-9A-F]{2}>", t):
            types.append(BYTE)
        else:
            types.append(NORMAL)
    writer.add_tokenizer_model("llama" if fallback else "gpt2")
    if not fallback:
        writer.add_tokenizer_pre(_PRE.get(model_type, "default"))
    writer.add_token_list(tokens)
    if fallback:
        writer.add_token_scores([-1000.0] * len(tokens))  # llama.cpp's LlamaHfVocab scores every token so
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for key, method in (
        ("bos_token", writer.add_bos_token_id),
        ("eos_token", writer.add_eos_token_id),
        ("unk_token", writer.add_unk_token_id),
    ):
        token = tok_config.get(key)
        if isinstance(token, str) and token in vocab:
            method(vocab[token])
    if not tok_config.get("bos_token") and "<|endoftext|>" in vocab:
        writer.add_bos_token_id(vocab["<|endoftext|>"])  # from config.json's bos_token_id, as llama.cpp does
    if "add_bos_token" in tok_config:
        writer.add_add_bos_token(bool(tok_config["add_bos_token"]))
    if "add_eos_token" in tok_config:
        writer.add_add_eos_token(bool(tok_config["add_eos_token"]))


def write_gguf(
    path: str | Path,
    model,
    tokenizer_folder: str | Path,
    qtype: str = "F32",
    *,
    name: str = "tiny",
    types: Mapping[str, str] | None = None,
    raw: Callable[[str, tuple[int, ...], str], bytes] | None = None,
    metadata: Mapping[str, Any] | None = None,
    extra_tensors: Mapping[str, Any] | None = None,
    drop: tuple[str, ...] = (),
) -> Path:
    """Write ``model`` (a transformers ``LlamaForCausalLM``, ``Qwen2``, ``Qwen3``, ``Gemma``,
    ``GPT2LMHeadModel``) and the tokenizer of ``tokenizer_folder`` as a GGUF file at ``path``, its
    matrices in ``qtype`` (a ggml type name: ``F32``, ``F16``, ``BF16``, ``Q8_0``, ``Q4_0`` ...).

    ``types`` overrides the type of named tensors; ``raw(name, shape, type)`` gives the bytes of a
    tensor instead of quantizing it (for the types ``gguf`` cannot quantize); ``metadata`` sets or
    replaces keys (``{key: (value, "UINT32")}``; ``None`` removes one); ``extra_tensors`` adds float32
    tensors by name; ``drop`` leaves tensors out.
    """
    import numpy as np
    from gguf import GGML_QUANT_VERSION, GGMLQuantizationType, GGUFValueType, GGUFWriter, LlamaFileType
    from gguf.gguf_writer import GGUFValue
    from gguf.quants import quantize

    path = Path(path)
    cfg = model.config
    model_type = cfg.model_type
    wanted = GGMLQuantizationType[qtype]
    writer = GGUFWriter(str(path), arch=model_type)
    writer.add_name(name)
    writer.add_file_type(int(LlamaFileType.ALL_F32 if qtype == "F32" else LlamaFileType[f"MOSTLY_{qtype}"]))
    if qtype not in ("F32", "F16", "BF16"):
        writer.add_quantization_version(GGML_QUANT_VERSION)
    _add_hparams(writer, cfg)
    _add_tokenizer(writer, Path(tokenizer_folder), model_type)
    for key, value in (metadata or {}).items():
        if value is None:
            writer.kv_data[0].pop(key, None)
        else:
            val, vtype = value
            sub = None
            if isinstance(vtype, tuple):
                vtype, sub = vtype
                sub = GGUFValueType[sub]
            writer.kv_data[0][key] = GGUFValue(value=val, type=GGUFValueType[vtype], sub_type=sub)
    tensors = [(n, w) for n, w in gguf_tensors(model) if n not in drop]
    tensors += [(n, np.asarray(w, dtype=np.float32)) for n, w in (extra_tensors or {}).items()]
    for tname, w in tensors:
        t = (
            GGMLQuantizationType[types[tname]]
            if types and tname in types
            else _llama_cpp_type(tname, w, wanted)
        )
        if raw is not None and (data := raw(tname, w.shape, t.name)) is not None:
            writer.add_tensor(tname, np.frombuffer(data, dtype=np.uint8).reshape(w.shape[0], -1), raw_dtype=t)
        else:
            writer.add_tensor(tname, quantize(w, t), raw_dtype=t)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def random_k_quant(shape: tuple[int, ...], type_name: str, seed: int = 0) -> bytes:
    """Blocks of random bytes for a tensor of ``shape`` in K-quant ``type_name``, with finite float16
    scales that keep the values' spread near 0.1 (``gguf`` has no quantizer for these)."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    n_blocks = int(np.prod(shape)) // block
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    offsets, largest = K_QUANTS[type_name]
    for offset in offsets:
        scale = rng.uniform(largest / 10, largest, n_blocks).astype(np.float16)
        blocks[:, offset : offset + 2] = scale.view(np.uint8).reshape(n_blocks, 2)
    return blocks.tobytes()


# ---------------------------------------------------------------------------------------------
# hand-assembled bytes, for the files no writer makes
# ---------------------------------------------------------------------------------------------
def string(text: str | bytes) -> bytes:
    """GGUF's string: u64 length + the bytes (UTF-8 for text)."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    """One metadata entry: key, u32 value type, the value's bytes as given."""
    return string(key) + struct.pack("<I", vtype) + payload


def tensor_info(
    name: str | bytes, ne: list[int], ggml_type: int, offset: int, n_dims: int | None = None
) -> bytes:
    """One tensor entry: name, u32 n_dims, u64 ne[n_dims] (fastest first), u32 type, u64 offset."""
    dims = len(ne) if n_dims is None else n_dims
    return string(name) + struct.pack(f"<I{len(ne)}QIQ", dims, *ne, ggml_type, offset)


def gguf_bytes(
    kvs: list[bytes],
    infos: list[bytes],
    data: bytes = b"",
    *,
    version: int = 3,
    alignment: int = 32,
    n_tensors: int | None = None,
    n_kv: int | None = None,
    version_bytes: bytes | None = None,
) -> bytes:
    """A whole file: magic, version, counts (those of the lists unless given), entries, padding to
    ``alignment``, then ``data``."""
    head = b"GGUF" + (version_bytes if version_bytes is not None else struct.pack("<I", version))
    head += struct.pack(
        "<QQ", len(infos) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv
    )
    head += b"".join(kvs) + b"".join(infos)
    head += b"\0" * (-len(head) % alignment)
    return head + data


def write_gguf_tensors(
    path: str | Path,
    arch: str,
    cfg,
    tokenizer_folder: str | Path,
    tensors: list[tuple[str, Any]],
    qtype: str = "F32",
    *,
    tokenizer_family: str | None = None,
    name: str = "tiny",
    metadata: Callable[[Any], None] | None = None,
    types: Mapping[str, str] | None = None,
    raw: Callable[[str, tuple[int, ...], str], bytes] | None = None,
    float32: Callable[[str], bool] = lambda name: False,
) -> Path:
    """Write ``tensors`` [(llama.cpp name, float32 array of any rank)] of a transformers model of config
    ``cfg`` as a GGUF file of architecture ``arch``, with :func:`write_gguf`'s hyper-parameters, the
    tokenizer of ``tokenizer_folder`` (as ``tokenizer_family``'s, default ``cfg.model_type``) and
    ``metadata(writer)`` adding an architecture's own keys. Each tensor in llama.cpp's type for
    ``qtype`` (``types`` overrides by name, ``float32(name)`` keeps one F32 as the converter keeps
    routers; ``raw(name, shape, type)`` gives the bytes of the types ``gguf`` cannot quantize)."""
    import numpy as np
    from gguf import GGML_QUANT_VERSION, GGMLQuantizationType, GGUFWriter, LlamaFileType
    from gguf.quants import quantize

    path = Path(path)
    wanted = GGMLQuantizationType[qtype]
    writer = GGUFWriter(str(path), arch=arch)
    writer.add_name(name)
    writer.add_file_type(int(LlamaFileType.ALL_F32 if qtype == "F32" else LlamaFileType[f"MOSTLY_{qtype}"]))
    if qtype not in ("F32", "F16", "BF16"):
        writer.add_quantization_version(GGML_QUANT_VERSION)
    _add_hparams(writer, cfg)
    _add_tokenizer(writer, Path(tokenizer_folder), tokenizer_family or cfg.model_type)
    if metadata is not None:
        metadata(writer)
    for tname, w in tensors:
        if types and tname in types:
            t = GGMLQuantizationType[types[tname]]
        elif float32(tname):
            t = GGMLQuantizationType.F32
        else:
            t = _llama_cpp_type(tname, w, wanted)
        if raw is not None and (data := raw(tname, w.shape, t.name)) is not None:
            array = np.frombuffer(data, dtype=np.uint8).reshape(*w.shape[:-1], -1)
            writer.add_tensor(tname, array, raw_dtype=t)
        else:
            writer.add_tensor(tname, quantize(w, t), raw_dtype=t)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
