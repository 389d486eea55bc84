"""nanoGPT checkpoints: a ``torch.save`` file (``ckpt.pt``) with ``model_args`` and ``model`` (keys
possibly prefixed ``_orig_mod.`` by ``torch.compile``), read with ``torch.load(weights_only=True)``
only: a file that needs arbitrary Python objects unpickled is refused, never executed.

Its tensors are GPT-2's (:func:`model.io.hf.gpt2.gpt2_entries`, already ``nn.Linear``-shaped). nanoGPT
uses exact GELU and ε = 1e-5, and with ``bias=False`` has no bias anywhere, LayerNorm included: our
LayerNorm then has none either. It keeps no tokenizer: :func:`load_nanogpt` finds one beside the file.
The model is built by the one build step, :func:`model.io.build.build_model`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from model.budget.sizing import load_need
from model.config import ConfigError, GPTConfig
from model.files import read_json
from model.io.build import Weights, build_model, opened
from model.io.hf.gpt2 import gpt2_entries, ln_bias_entries
from model.io.loaded import Checkpoint, CheckpointError
from model.io.weights import Layout, TensorSource, WeightMap, dict_source, torch_load, vocab_of
from model.text.bpe import HFTokenizer, is_hf_tokenizer_json, load_hf_tokenizer
from model.text.registry import tokenizer_from_dict
from model.text.tokens import CharTokenizer, Tokenizer, TokenizerError

#: nanoGPT's GPTConfig fields, as train.py saves them in ``model_args``.
NANOGPT_FIELDS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size", "dropout")


def nanogpt_config(model_args: dict[str, Any]) -> GPTConfig:
    """Our config for nanoGPT's ``model_args``.

    ``n_layer, n_head, n_embd, block_size, vocab_size, dropout`` -> ``n_layers, n_heads, d_model,
    context_length, vocab_size, dropout``; ``bias`` -> ``bias`` all/none; always exact GELU, LayerNorm
    ε = 1e-5, learned positions, Pre-LN, tied embeddings (callers untie if the file does).
    """
    problems = []
    unknown = sorted(set(model_args) - set(NANOGPT_FIELDS))
    if unknown:
        problems.append(f"fields nanoGPT's GPT does not have: {', '.join(map(str, unknown))}")
    missing = [f for f in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size") if f not in model_args]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if problems:
        raise CheckpointError("model_args: " + "; ".join(problems))
    cfg = GPTConfig(
        vocab_size=model_args["vocab_size"],
        context_length=model_args["block_size"],
        n_layers=model_args["n_layer"],
        d_model=model_args["n_embd"],
        n_heads=model_args["n_head"],
        mlp="gelu",
        gelu_approx="none",
        norm="layernorm",
        norm_eps=1e-5,
        norm_position="pre",
        positions="learned",
        attn_scale="sqrt_dk",
        bias="all" if model_args.get("bias", True) else "none",
        norm_bias=bool(model_args.get("bias", True)),
        tie_embeddings=True,
        dropout=float(model_args.get("dropout", 0.0)),
    )
    try:
        return cfg.validate()
    except ConfigError as exc:
        raise CheckpointError("model_args: " + "; ".join(exc.problems)) from None


def _nanogpt_tokenizer(directory: Path, vocab_size: int, dataset: str | None) -> Tokenizer:
    """The tokenizer beside a nanoGPT checkpoint (nanoGPT keeps none inside it)."""
    tj = directory / "tokenizer.json"
    try:
        if tj.is_file():
            data = read_json(tj, error=CheckpointError, what=str(tj))
            if is_hf_tokenizer_json(data):
                return HFTokenizer.from_json_str(json.dumps(data), name=directory.name)
            return tokenizer_from_dict(data)
        if (directory / "vocab.json").is_file() or (directory / "merges.txt").is_file():
            return load_hf_tokenizer(directory, name="gpt2")
        if (directory / "input.txt").is_file():
            return _char_tokenizer_from_dataset_text(directory / "input.txt", vocab_size)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from None
    where = f"data/{dataset}/input.txt" if dataset else "data/<dataset>/input.txt"
    hint = (
        "GPT-2's vocab.json and merges.txt (from any Hugging Face gpt2 download)"
        if vocab_size >= 50257
        else f"nanoGPT's {where} (its characters are the vocabulary; meta.pkl is a pickle and is never read)"
    )
    raise CheckpointError(
        f"nanoGPT checkpoints hold no tokenizer, and none is beside it in {str(directory)!r}: "
        f"copy {hint} next to the checkpoint"
    )


def _char_tokenizer_from_dataset_text(path: Path, vocab_size: int) -> Tokenizer:
    """nanoGPT's character vocabulary rebuilt from the dataset text, as its ``prepare.py`` does:
    ``sorted(set(text))``. (Its ``meta.pkl`` holds the same table, but as a pickle, which we never read.)"""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{path.name} beside the checkpoint is not readable UTF-8 text: {exc}"
        ) from None
    tok = CharTokenizer.from_text(text)
    if tok.vocab_size != vocab_size:
        raise CheckpointError(
            f"{path.name} has {tok.vocab_size} distinct characters but the model has {vocab_size} tokens: "
            f"it is not the text this checkpoint was trained on"
        )
    return tok


def _strip_compile_prefix(sd: dict[str, Any]) -> dict[str, Any]:
    """``torch.compile`` saves ``_orig_mod.<name>``; nanoGPT strips it on load, and so do we."""
    p = "_orig_mod."
    return {(k[len(p) :] if isinstance(k, str) and k.startswith(p) else k): v for k, v in sd.items()}


def _as_number(v: Any) -> Any:
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        return v.item()
    return v if isinstance(v, (int, float, str, bool)) or v is None else None


def load_nanogpt(
    path: str | Path,
    device: str | torch.device = "cpu",
    *,
    tokenizer: Tokenizer | None = None,
    dtype: torch.dtype = torch.float32,
) -> Checkpoint:
    """Open a nanoGPT ``ckpt.pt`` (the file itself) with ``torch.load(weights_only=True)``."""
    path = Path(path)
    obj = torch_load(path)
    if not isinstance(obj, dict) or "model" not in obj or "model_args" not in obj:
        have = ", ".join(sorted(map(str, obj))[:8]) if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(
            f"{path.name} is a PyTorch file but not a nanoGPT checkpoint: it needs 'model_args' and 'model' "
            f"(it has {have})"
        )
    model_args, sd = obj["model_args"], obj.pop("model")
    if not isinstance(model_args, dict) or not isinstance(sd, dict):
        raise CheckpointError(f"{path.name}: 'model_args' and 'model' must both be dictionaries")
    cfg = nanogpt_config(model_args)
    V = vocab_of(cfg)
    sd = _strip_compile_prefix(sd)
    src = dict_source(sd, path.name)
    _as_the_file_has_it(cfg, src, sd)
    need = load_need(cfg, what=f"loading {path.name}")
    model = build_model(
        cfg, lambda: Weights(src, _nanogpt_layout(cfg), path.name), need=need, device=device, dtype=dtype
    )
    if tokenizer is None:
        dataset = obj.get("config", {}).get("dataset") if isinstance(obj.get("config"), dict) else None
        tokenizer = _nanogpt_tokenizer(path.parent, V, dataset)
    if tokenizer.vocab_size > V:
        raise CheckpointError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model only {cfg.core.vocab_size}"
        )
    name = path.parent.name if path.stem == "ckpt" else path.stem
    extra = {k: _as_number(obj.get(k)) for k in ("iter_num", "best_val_loss") if k in obj}
    return opened("nanogpt", name, path, cfg, model, tokenizer, **extra)


def _as_the_file_has_it(cfg: GPTConfig, src: TensorSource, sd: dict[str, Any]) -> None:
    """Set what nanoGPT's ``model_args`` leave open as the file decides it: LayerNorm shifts present or
    not, and the head untied when it differs from the token table (nanoGPT ties them)."""
    cfg.normalization = dataclasses.replace(cfg.normalization, norm_bias="transformer.ln_f.bias" in src)
    if "lm_head.weight" in sd and not _same_tensor(sd["lm_head.weight"], sd.get("transformer.wte.weight")):
        # a file whose head differs is loaded untied, exactly
        cfg.core = dataclasses.replace(cfg.core, tie_embeddings=False)


def _nanogpt_layout(cfg: GPTConfig) -> Layout:
    """Where a nanoGPT state dict's tensors go for ``cfg`` (as :func:`_as_the_file_has_it` set it):
    GPT-2's rows, ``[out, in]`` already, listed when the build step asks."""
    linear_bias = cfg.core.bias == "all"

    def entries() -> list[WeightMap]:
        rows = gpt2_entries(cfg, "transformer.", conv1d=False, linear_bias=linear_bias)
        if cfg.normalization.norm_bias:
            rows += ln_bias_entries(cfg, "transformer.")
        if not cfg.core.tie_embeddings:
            rows.append(WeightMap("lm_head.weight", (vocab_of(cfg), cfg.core.d_model), ("lm_head.weight",)))
        return rows

    implied = (
        f"model_args (n_layer={cfg.core.n_layers}, n_embd={cfg.core.d_model}, "
        f"block_size={cfg.core.context_length}, "
        f"vocab_size={cfg.core.vocab_size}, bias={linear_bias})"
    )
    return Layout(entries, implied, frozenset({"lm_head.weight"}))


def _same_tensor(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    return a.data_ptr() == b.data_ptr() or bool(torch.equal(a, b))


__all__ = ["NANOGPT_FIELDS", "load_nanogpt", "nanogpt_config"]
