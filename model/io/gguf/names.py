"""A GGUF file's tensor names as a Hugging Face folder of the same family names them, and back.

:func:`hf_name` renames ``blk.0.attn_q.weight`` to ``model.layers.0.self_attn.q_proj.weight`` (GPT-2's to
``transformer.h.0.…``) so that the file opens through the Hugging Face mapping
(:mod:`model.io.hf.families`, :mod:`model.io.hf.gpt2`); :func:`in_gguf_names` writes the names in a message
back as the file spells them, so an error names the tensors the user can see (:mod:`model.io.gguf.load`);
:func:`in_gguf_keys` does the same for the settings a message names (``num_hidden_layers=40``, our
``n_layers=40``: the file's ``llama.block_count=40``).

:func:`gguf_model_name` is the model's own name, one rule whichever way the file is opened (File → Open,
``package:NAME``, the local models' list).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["gguf_model_name", "gguf_name", "hf_name", "in_gguf_keys", "in_gguf_names"]

#: What follows a model's name in a GGUF file's name: a quantization (``.Q4_1``, ``-Q4_K_M``,
#: ``-IQ3_XXS``, ``.f16``, ``-BF16``, gpt-oss's ``-MXFP4``), a split's part (``-00001-of-00003``),
#: then ``.gguf``.
_FILE_TAIL = re.compile(
    r"(?:[.\-_](?:I?Q\d\w*|[Ff](?:16|32)|BF16|bf16|MXFP4))?(?:-\d{5}-of-\d{5})?\.gguf$", re.IGNORECASE
)
#: A file named by its content, not by its model (Ollama's blobs: ``sha256-<64 hex digits>``).
_BLOB = re.compile(r"(?:sha256[-:])?[0-9a-f]{64}", re.IGNORECASE)


def gguf_model_name(file_name: str, general_name: object = None) -> str:
    """A GGUF model's name: its file's name less the quantization, the split part and ``.gguf``
    (``SmolLM2-135M-Instruct.Q4_1.gguf`` → ``SmolLM2-135M-Instruct``, which is also its
    ``package:`` name), the name people downloaded it by. A file whose name says nothing (an Ollama
    blob, ``sha256-…``) is called by its header's ``general.name`` (``general_name``) when it has one.
    """
    stem = _FILE_TAIL.sub("", file_name) if file_name.lower().endswith(".gguf") else file_name
    says_nothing = bool(_BLOB.fullmatch(stem)) or not stem.strip()
    if says_nothing and isinstance(general_name, str) and general_name.strip():
        return general_name.strip()
    return stem


#: GGUF's per-layer tensor names (after ``blk.i.``) -> Hugging Face's (after ``model.layers.i.``).
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}

#: GPT-2's (``transformer.`` prefix, nanoGPT's ``[out, in]`` layout, which GGUF also stores).
_GPT2_LAYER_NAMES = {
    "attn_norm": "ln_1",
    "attn_qkv": "attn.c_attn",
    "attn_output": "attn.c_proj",
    "ffn_norm": "ln_2",
    "ffn_up": "mlp.c_fc",
    "ffn_down": "mlp.c_proj",
}
_GPT2_GLOBAL_NAMES = {
    "token_embd": "transformer.wte",
    "position_embd": "transformer.wpe",
    "output_norm": "transformer.ln_f",
    "output": "lm_head",
}


def hf_name(gguf_name: str, gpt2: bool, layers: Mapping[str, str] | None = None) -> str:
    """The Hugging Face name of a GGUF tensor, or the GGUF name itself when it has none here (so that
    :func:`model.io.weights.check_weights` names it as a tensor with no place). ``layers``: an
    architecture's own per-layer names instead of :data:`_LAYER_NAMES` (:mod:`model.io.gguf.dense`)."""
    stem, dot, kind = gguf_name.rpartition(".")
    if not dot:
        return gguf_name
    layer_names, global_names = (
        (_GPT2_LAYER_NAMES, _GPT2_GLOBAL_NAMES) if gpt2 else (layers or _LAYER_NAMES, _GLOBAL_NAMES)
    )
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in layer_names:
        prefix = f"transformer.h.{parts[1]}." if gpt2 else f"model.layers.{parts[1]}."
        return f"{prefix}{layer_names[parts[2]]}.{kind}"
    if stem in global_names:
        return f"{global_names[stem]}.{kind}"
    return gguf_name


_HF_TENSOR = re.compile(r"\b(?:model|transformer|lm_head)(?:\.[A-Za-z_0-9]+)+")


def gguf_name(hf_name: str, gpt2: bool, layers: Mapping[str, str] | None = None) -> str:
    """The GGUF name of a tensor :func:`hf_name` renames to ``hf_name`` (itself when none does)."""
    layer_names = _GPT2_LAYER_NAMES if gpt2 else layers or _LAYER_NAMES
    global_names = _GPT2_GLOBAL_NAMES if gpt2 else _GLOBAL_NAMES
    stem, _, kind = hf_name.rpartition(".")
    for theirs, ours in global_names.items():
        if stem == ours:
            return f"{theirs}.{kind}"
    prefix = "transformer.h." if gpt2 else "model.layers."
    if stem.startswith(prefix):
        layer, _, rest = stem[len(prefix) :].partition(".")
        for theirs, ours in layer_names.items():
            if rest == ours and layer.isdigit():
                return f"blk.{layer}.{theirs}.{kind}"
    return hf_name


def in_gguf_names(message: str, gpt2: bool, layers: Mapping[str, str] | None = None) -> str:
    """``message`` with every Hugging Face tensor name in it written as the GGUF file names it
    (``layers`` as :func:`hf_name`'s)."""
    return _HF_TENSOR.sub(lambda m: gguf_name(m.group(0), gpt2, layers), message)


#: The metadata keys (after ``ARCH.``) a Hugging Face config's fields and ours are read from
#: (:func:`model.io.gguf.load.gguf_config`): config.json's names, GPT-2's, then :class:`GPTConfig`'s.
_KEYS = {
    "num_hidden_layers": "block_count",
    "hidden_size": "embedding_length",
    "intermediate_size": "feed_forward_length",
    "num_attention_heads": "attention.head_count",
    "num_key_value_heads": "attention.head_count_kv",
    "head_dim": "attention.key_length",
    "max_position_embeddings": "context_length",
    "rms_norm_eps": "attention.layer_norm_rms_epsilon",
    "rope_theta": "rope.freq_base",
    "sliding_window": "attention.sliding_window",
    "num_experts": "expert_count",  # mixtures of experts (model.io.gguf.moe)
    "num_local_experts": "expert_count",
    "num_experts_per_tok": "expert_used_count",
    "moe_intermediate_size": "expert_feed_forward_length",
    "shared_expert_intermediate_size": "expert_shared_feed_forward_length",
    "n_layers": "block_count",
    "d_model": "embedding_length",
    "d_ff": "feed_forward_length",
    "n_heads": "attention.head_count",
    "n_kv_heads": "attention.head_count_kv",
    "context_length": "context_length",
    "rope_base": "rope.freq_base",
    "rope_factor": "rope.scaling.factor",
    "n_experts": "expert_count",
    "n_experts_per_token": "expert_used_count",
    "expert_d_ff": "expert_feed_forward_length",
    "shared_expert_d_ff": "expert_shared_feed_forward_length",
}
_GPT2_KEYS = {
    "n_layer": "block_count",
    "n_embd": "embedding_length",
    "n_inner": "feed_forward_length",
    "n_head": "attention.head_count",
    "n_positions": "context_length",
    "layer_norm_epsilon": "attention.layer_norm_epsilon",
    "norm_eps": "attention.layer_norm_epsilon",
    **{k: v for k, v in _KEYS.items() if k in ("n_layers", "d_model", "d_ff", "n_heads", "context_length")},
}


def in_gguf_keys(message: str, arch: str) -> str:
    """``message`` with every config field it names (a word of :data:`_KEYS`, not part of a longer
    name) written as the metadata key of a GGUF file of architecture ``arch`` that it was read from."""
    keys = _GPT2_KEYS if arch == "gpt2" else {**_KEYS, "norm_eps": "attention.layer_norm_rms_epsilon"}
    words = re.compile(r"(?<![\w.])(" + "|".join(sorted(keys, key=len, reverse=True)) + r")\b")
    return words.sub(lambda m: f"{arch}.{keys[m.group(1)]}", message)
