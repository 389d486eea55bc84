"""GGUF files of Gemma 2, Gemma 3 (text), Phi-3 and OLMo 2 for the tests, as llama.cpp's converter writes
them.

A helper module (``tests/model/test_gguf_dense.py`` imports it). :func:`write_dense_gguf` converts a tiny
transformers model of one of these families as ``convert_hf_to_gguf.py``'s ``Gemma2Model``,
``Gemma3Model``, ``Phi3MiniModel`` and ``Olmo2Model`` do:

* the architecture's name (``gemma3`` for ``gemma3_text``) and the metadata each writes: the base
  ``TextModel``'s (context, width, depth, MLP width, heads, KV heads, ``rope.freq_base``, the RMSNorm
  epsilon, ``key_length`` / ``value_length`` for an explicit ``head_dim``); Gemma 2's soft-caps and
  ``sliding_window``; Gemma 3's global θ and linear scaling, ``sliding_window`` and a final soft-cap only
  when set; Phi-3's
  ``rope.dimension_count`` and ``sliding_window`` (0 for none);
* tensors named by ``gguf``'s own ``TensorNameMap`` for the architecture (llama.cpp's table, not ours),
  Gemma's norms (every ``*norm.weight``) stored as ``1 + γ``, a tied head not stored, no Q/K row
  permutation (llama.cpp rotates these architectures NeoX's way);
* the tokenizer as :mod:`tests.gguf_files` writes it; matrices in the requested type (norms and 1-D
  tensors F32), ``types`` / ``raw`` per tensor as there (random K-quant blocks for the types ``gguf``
  cannot make).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.gguf_files import _add_tokenizer, _llama_cpp_type

__all__ = ["ARCH", "GEMMA_SPECIALS", "dense_tensors", "gemma_vocabulary", "write_dense_gguf"]

#: transformers ``model_type`` -> llama.cpp's ``general.architecture``
ARCH = {"gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3", "olmo2": "olmo2"}


#: Gemma's special tokens (its tokenizer numbers ``<start_of_turn>``, ``<end_of_turn>`` 105, 106)
GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


def gemma_vocabulary(size: int | None = None) -> tuple[list[str], list[int]]:
    """``(tokens, token types)`` of a Gemma-style SentencePiece vocabulary as llama.cpp's
    ``_set_vocab_sentencepiece`` writes it: :data:`GEMMA_SPECIALS` (control; ``<unk>`` unknown), the 256
    byte tokens ``<0xNN>``, the letters, ``▁`` and a few words, then, up to ``size`` (Gemma's 262,144),
    random pieces of 2-9 letters (and ``▁``)"""
    import random

    pieces = [
        *"abcdefghijklmnopqrstuvwxyz\u2581.,!?\n",
        "\u2581the", "\u2581hello", "\u2581world", "he", "ll", "llo", "or", "ld", "in", "an", "is",
        "user", "model",
    ]  # fmt: skip
    tokens = GEMMA_SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + pieces
    types = [_CONTROL, _CONTROL, _CONTROL, _UNKNOWN, _CONTROL, _CONTROL, _CONTROL] + [_BYTE] * 256
    types += [_NORMAL] * len(pieces)
    seen, rng = set(tokens), random.Random(0)
    while size is not None and len(tokens) < size:
        piece = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz\u2581", k=rng.randint(2, 9)))
        if piece not in seen:
            seen.add(piece)
            tokens.append(piece)
            types.append(_NORMAL)
    return tokens, types


def _add_gemma_vocabulary(writer, vocabulary: tuple[list[str], list[int]]) -> None:
    """Gemma's tokenizer keys as ``Gemma3Model.set_vocab`` writes them: ``llama``, tokens, scores,
    types (no merges), BOS 2, EOS 1, unknown 3, padding 0, no space prefix."""
    tokens, types = vocabulary
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(types)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_add_space_prefix(False)


def dense_tensors(model) -> list[tuple[str, Any]]:
    """``(llama.cpp name, float32 numpy array)`` of every tensor the converter writes for ``model``."""
    import gguf

    cfg = model.config
    arch = ARCH[cfg.model_type]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], cfg.num_hidden_layers)
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    out = []
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and tied:
            continue
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new is not None, f"llama.cpp has no name for {name}"
        w = tensor.detach().float().numpy().copy()
        if arch in ("gemma2", "gemma3") and name.endswith("norm.weight"):
            w = w + 1  # Gemma's RMSNorm multiplies by (1 + γ); llama.cpp by the stored weight
        out.append((new, w))
    return out


def _add_hparams(writer, cfg, arch: str) -> None:
    from gguf import RopeScalingType

    heads = cfg.num_attention_heads
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(cfg.num_key_value_heads or heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    params = dict(getattr(cfg, "rope_parameters", None) or {})
    params = dict(params.get("full_attention", params))  # Gemma 3: the global layers' θ
    writer.add_rope_freq_base(float(params.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))))
    if getattr(cfg, "head_dim", None) is not None and arch != "phi3":
        writer.add_key_length(cfg.head_dim)
        writer.add_value_length(cfg.head_dim)
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        writer.add_final_logit_softcapping(cfg.final_logit_softcapping)
        writer.add_sliding_window(cfg.sliding_window)
    elif arch == "gemma3":
        if params.get("rope_type") == "linear":  # the global layers' scaling, as the base converter writes it
            writer.add_rope_scaling_type(RopeScalingType.LINEAR)
            writer.add_rope_scaling_factor(float(params["factor"]))
        if cfg.final_logit_softcapping:
            writer.add_final_logit_softcapping(cfg.final_logit_softcapping)
        if "sliding_attention" in (cfg.layer_types or []):
            writer.add_sliding_window(cfg.sliding_window)
    elif arch == "phi3":
        rot = float(params.get("partial_rotary_factor", 1.0))
        writer.add_rope_dimension_count(int(rot * cfg.hidden_size) // heads)
        writer.add_sliding_window(cfg.sliding_window or 0)


def write_dense_gguf(
    path: str | Path,
    model,
    tokenizer_folder: str | Path | None,
    qtype: str = "F32",
    *,
    vocabulary: tuple[list[str], list[int]] | None = None,
    types: Mapping[str, str] | None = None,
    raw: Callable[[str, tuple[int, ...], str], bytes | None] | None = None,
    metadata: Mapping[str, Any] | None = None,
    extra_tensors: Mapping[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    name: str = "tiny",
) -> Path:
    """Write ``model`` (a transformers Gemma 2, Gemma 3 text, Phi-3 or OLMo 2 model) and the tokenizer of
    ``tokenizer_folder`` (or Gemma's keys for ``vocabulary``, :func:`gemma_vocabulary`) as llama.cpp's
    converter would, matrices in ``qtype``; ``types`` / ``raw`` as
    :func:`tests.gguf_files.write_gguf`'s; ``metadata`` adds keys (``{key: value}``, the writer's own type
    for it); ``extra_tensors`` adds float32 tensors."""
    import numpy as np
    from gguf import GGML_QUANT_VERSION, GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize

    path = Path(path)
    cfg = model.config
    arch = ARCH[cfg.model_type]
    writer = GGUFWriter(str(path), arch=arch)
    writer.add_name(name)
    if qtype not in ("F32", "F16", "BF16") or types:
        writer.add_quantization_version(GGML_QUANT_VERSION)
    _add_hparams(writer, cfg, arch)
    if vocabulary is not None:
        _add_gemma_vocabulary(writer, vocabulary)
    else:
        assert tokenizer_folder is not None
        _add_tokenizer(writer, Path(tokenizer_folder), cfg.model_type)
    for key, value in (metadata or {}).items():
        writer.add_key_value(key, value, _value_type(value))
    tensors = [(n, w) for n, w in dense_tensors(model) if n not in drop]
    tensors += [(n, np.asarray(w, dtype=np.float32)) for n, w in (extra_tensors or {}).items()]
    wanted = GGMLQuantizationType[qtype]
    for tname, w in tensors:
        t = (
            GGMLQuantizationType[types[tname]]
            if types and tname in types
            else _llama_cpp_type(tname, w, wanted)
        )
        data = raw(tname, w.shape, t.name) if raw is not None else None
        if data is not None:
            writer.add_tensor(tname, np.frombuffer(data, dtype=np.uint8).reshape(w.shape[0], -1), raw_dtype=t)
        else:
            writer.add_tensor(tname, quantize(w, t), raw_dtype=t)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _value_type(value: Any):
    from gguf import GGUFValueType

    if isinstance(value, bool):
        return GGUFValueType.BOOL
    if isinstance(value, int):
        return GGUFValueType.UINT32
    if isinstance(value, float):
        return GGUFValueType.FLOAT32
    return GGUFValueType.STRING
