"""Hugging Face model folders: their ``config.json``, weights (safetensors, sharded with an index, or
``pytorch_model.bin``) and tokenizer; and their loaders, :func:`load_hf_gpt2` (GPT-2's mapping:
:mod:`model.io.hf.gpt2`) and :func:`load_hf_family` (the Llama-era families whose mapping
:mod:`model.io.hf.families` declares), both building through :func:`model.io.build.build_model`.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import torch

from model.budget.sizing import load_need
from model.config import GPTConfig
from model.files import read_json
from model.io.build import Weights, build_model, keeps_stored, opened, source_need
from model.io.hf.families import family_config, family_kind, family_layout
from model.io.hf.gpt2 import gpt2_config, gpt2_layout
from model.io.loaded import Checkpoint, CheckpointError
from model.io.weights import TensorSource, dict_source, listed, safetensors_source, torch_load, vocab_of
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


def load_hf_gpt2(
    directory: str | Path, device: str | torch.device = "cpu", *, dtype: torch.dtype = torch.float32
) -> Checkpoint:
    """Open a Hugging Face GPT-2-family directory (the mapping is in :mod:`model.io.hf.gpt2`)."""
    directory = Path(directory)
    hf = read_config(directory)
    cfg = gpt2_config(hf)
    name, tok = hf_name_and_tokenizer(directory, hf, cfg)
    opened_from: list[str] = []  # the weights file's name, once the build step has opened it

    def weights() -> Weights:
        src, fname = hf_weight_source(directory)
        opened_from.append(fname)
        prefix = "transformer." if "transformer.wte.weight" in src else ""
        return Weights(src, gpt2_layout(cfg, src, fname, prefix, conv1d=True, what="config.json"), fname)

    need = load_need(cfg, what=f"loading {directory.name}")
    model = build_model(cfg, weights, need=need, device=device, dtype=dtype)
    return opened("hf-gpt2", name, directory, cfg, model, tok, weights=opened_from[0])


def load_hf_family(
    directory: str | Path,
    device: str | torch.device = "cpu",
    *,
    dtype: torch.dtype = torch.float32,
    stored: bool | None = None,
) -> Checkpoint:
    """Open a Hugging Face folder of one of :data:`~model.io.hf.families.FAMILIES` (the mapping is in
    :mod:`model.io.hf.families`). ``stored``: its float16 / bfloat16 safetensors matrices kept as stored,
    mapped and widened to float32 one layer at a time (:mod:`model.io.stored`); None (default): so on
    the CPU in float32 when the float32 weights pass 1 GiB or would not fit, else read into ``dtype``."""
    directory = Path(directory)
    hf = read_config(directory)
    cfg = family_config(hf)
    stored = keeps_stored(stored, cfg, device, dtype)
    name, tok = hf_name_and_tokenizer(directory, hf, cfg)
    src, fname = hf_weight_source(directory, keep_stored=stored)
    loading = f"loading {name}"
    need = source_need(src, cfg, loading) if src.stored is not None else load_need(cfg, what=loading)
    model_type = hf["model_type"]
    interleave = bool(hf.get("rope_interleave", True))
    layout = partial(family_layout, model_type, cfg, src, what="config.json", rope_interleave=interleave)
    model = build_model(cfg, lambda: Weights(src, layout(), fname), need=need, device=device, dtype=dtype)
    kind = family_kind(model_type)
    return opened(kind, name, directory, cfg, model, tok, weights=fname, model_type=model_type)


__all__ = ["hf_name_and_tokenizer", "hf_weight_source", "load_hf_family", "load_hf_gpt2", "read_config"]
