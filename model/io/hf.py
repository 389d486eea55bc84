"""Hugging Face model folders: their ``config.json``, weights (safetensors, sharded with an index, or
``pytorch_model.bin``) and tokenizer; and the loader of the Llama-era families whose mapping
:mod:`model.io.families` declares (:func:`load_hf_family`). GPT-2's own mapping: :mod:`model.io.gpt2`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from model.budget.sizing import Need, load_need
from model.budget.sizing import check as check_size
from model.config import GPTConfig
from model.files import read_json
from model.io.checkpoint import Checkpoint, CheckpointError
from model.io.families import extra_tensors, family_config, family_entries, family_kind
from model.io.stored import keeps_stored_by_default, stored_plan_need
from model.io.weights import (
    TensorSource,
    build_from_state_dict,
    check_weights,
    dict_source,
    listed,
    loaded_meta,
    map_weights,
    safetensors_source,
    torch_load,
    vocab_of,
)
from model.nn.gpt import GPT
from model.nn.quantized import StoredMatrix
from model.text.bpe import load_hf_tokenizer
from model.text.tokens import Tokenizer, TokenizerError


def read_config(directory: Path) -> dict[str, Any]:
    """A Hugging Face folder's ``config.json``: a JSON object, else :class:`CheckpointError`."""
    hf = read_json(directory / "config.json", error=CheckpointError, what=str(directory / "config.json"))
    if not isinstance(hf, dict):
        raise CheckpointError("config.json is not a JSON object of settings")
    return hf


def _names_a_file_inside(name: str) -> bool:
    """``name`` is a relative path that stays inside its folder (no ``..`` above it, not absolute)."""
    parts = Path(name.replace("\\", "/")).parts
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return False
    return bool(parts) and not Path(name).is_absolute() and depth > 0


def hf_weight_source(directory: Path, *, keep_stored: bool = False) -> tuple[TensorSource, str]:
    """The folder's weights (``model.safetensors``, its sharded index, or ``pytorch_model.bin`` read
    without unpickling code) and the file's name; ``keep_stored``: its 16-bit safetensors matrices are
    offered as stored (:func:`~model.io.weights.safetensors_source`)."""
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return safetensors_source([single], keep_stored=keep_stored), single.name
    if index.is_file():
        data = read_json(index, error=CheckpointError, what=str(index))
        wm = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wm, dict):
            raise CheckpointError(f"{index.name} has no weight_map")
        shards = sorted({directory / str(f) for f in wm.values()})
        # by name, not by resolving links: a Hugging Face cache links its shards to ../../blobs
        outside = [f for f in sorted(set(map(str, wm.values()))) if not _names_a_file_inside(f)]
        if outside:
            raise CheckpointError(
                f"{index.name} names shards outside the model folder ({listed(outside)}): refused"
            )
        absent = [s.name for s in shards if not s.is_file()]
        if absent:
            raise CheckpointError(f"{index.name} names shards that are missing: {listed(absent)}")
        return safetensors_source(shards, keep_stored=keep_stored), index.name
    binf = directory / "pytorch_model.bin"
    if binf.is_file():
        sd = torch_load(binf)
        if not isinstance(sd, dict):
            raise CheckpointError(f"{binf.name} is not a dictionary of named tensors")
        return dict_source(sd, binf.name), binf.name
    raise CheckpointError(
        f"{str(directory)!r} has a Hugging Face config.json but no weights: model.safetensors is missing"
    )


def hf_name_and_tokenizer(directory: Path, hf: dict[str, Any], cfg: GPTConfig) -> tuple[str, Tokenizer]:
    """A Hugging Face folder's model name (``_name_or_path``'s last part, else the folder's) and its
    tokenizer, which must fit ``cfg``'s vocabulary: as many tokens at most, and no id past it (a
    vocabulary larger than the tokenizer's, as some models have, is fine)."""
    name = Path(str(hf.get("_name_or_path") or directory.name)).name or directory.name
    try:
        tok = load_hf_tokenizer(directory, name=name, vocab_size=vocab_of(cfg))
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from None
    return name, tok


def load_hf_family(
    directory: str | Path,
    device: str | torch.device = "cpu",
    *,
    dtype: torch.dtype = torch.float32,
    stored: bool | None = None,
) -> Checkpoint:
    """Open a Hugging Face folder of one of :data:`~model.io.families.FAMILIES` (the mapping is in
    :mod:`model.io.families`). ``stored``: its float16 / bfloat16 safetensors matrices kept as stored,
    mapped and widened to float32 one layer at a time (:mod:`model.io.stored`); None (default): so on
    the CPU in float32 when the float32 weights pass 1 GiB or would not fit, else read into ``dtype``."""
    directory = Path(directory)
    hf = read_config(directory)
    cfg = family_config(hf)
    if stored is None:
        stored = keeps_stored_by_default(cfg, device, dtype)
    name, tok = hf_name_and_tokenizer(directory, hf, cfg)
    src, fname = hf_weight_source(directory, keep_stored=stored)
    need = _stored_need(src, cfg, f"loading {name}") if src.stored is not None else None
    model_type = hf["model_type"]
    model = build_family(
        model_type,
        cfg,
        src,
        fname,
        name,
        device,
        dtype,
        what="config.json",
        rope_interleave=bool(hf.get("rope_interleave", True)),
        need=need,
    )
    meta = loaded_meta(
        family_kind(model_type), name, model, tok, directory, weights=fname, model_type=model_type
    )
    return Checkpoint(path=directory, config=cfg, model=model, tokenizer=tok, train_state=None, meta=meta)


def _stored_need(src: TensorSource, cfg: GPTConfig, what: str) -> Need:
    """What holding ``src``'s model takes with the matrices it offers as stored kept so."""
    matrices, floats = [], 0
    for key in src.keys:
        m = src.stored(key) if src.stored is not None else None
        if m is None:
            floats += math.prod(src.shape(key))
        else:
            matrices.append((m.numel(), m.nbytes, m.cols))
    return stored_plan_need(cfg, matrices, floats, what=what)


def build_family(
    model_type: str,
    cfg: GPTConfig,
    src: TensorSource,
    fname: str,
    name: str,
    device: str | torch.device,
    dtype: torch.dtype,
    *,
    what: str,
    depth_key: str = "num_hidden_layers",
    rope_interleave: bool = True,
    need: Need | None = None,
) -> GPT:
    """Our GPT from ``src``, tensors named as a Hugging Face ``model_type`` folder names them (a GGUF
    file's are renamed to these by :mod:`model.io.gguf`): every tensor checked against ``cfg`` (which
    ``what`` gave, its depth as ``depth_key``) before any is read, and the model sized before it is built;
    ``rope_interleave``: DeepSeek's rotary rows stored in pairs (see
    :func:`~model.io.families.family_entries`); ``need``: what holding it takes (default
    :func:`~model.budget.sizing.load_need`); a source that keeps matrices as stored keeps them so."""
    if cfg.n_layers > len(src.keys):  # a config that lies about its depth: refuse before listing
        raise CheckpointError(
            f"{what} says {depth_key}={cfg.n_layers} but {fname} holds only {len(src.keys)} tensors"
        )
    entries = family_entries(model_type, cfg, rope_interleave=rope_interleave)
    extra_ok = extra_tensors(model_type, cfg, src.keys)
    if cfg.tie_embeddings:
        extra_ok |= {"lm_head.weight", "embed_out.weight"}  # a stored copy of the tied matrix
    implied = (
        f"{what} (num_hidden_layers={cfg.n_layers}, hidden_size={cfg.d_model}, "
        f"num_attention_heads={cfg.n_heads}, num_key_value_heads={cfg.kv_heads}, head_dim={cfg.d_head}, "
        f"intermediate_size={cfg.hidden}, vocab_size={cfg.vocab_size})"
    )
    check_weights(src, entries, fname, implied, extra_ok)  # a lying config is named by the header first
    check_size(need or load_need(cfg, what=f"loading {name}"))  # before any tensor is read or built
    stored: dict[str, StoredMatrix] | None = {} if src.stored is not None else None
    state = map_weights(src, entries, dtype, stored)
    del src
    return build_from_state_dict(cfg, state, device, stored)


__all__ = ["build_family", "hf_name_and_tokenizer", "hf_weight_source", "load_hf_family", "read_config"]
