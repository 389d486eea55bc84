"""Open a model from local files, whatever made it: Attention Lab, Hugging Face GPT-2, or nanoGPT.

:func:`open_model` decides by content, never by file name:

* **attention-lab** — a directory whose ``config.json`` holds our :class:`~model.config.GPTConfig`
  fields: handed to :func:`model.io.checkpoint.load_checkpoint`.
* **hf-gpt2** — a Hugging Face GPT-2-family directory: ``config.json`` with ``model_type: "gpt2"``, the
  weights in ``model.safetensors`` (or sharded with ``model.safetensors.index.json``, or a
  ``pytorch_model.bin`` read with ``torch.load(weights_only=True)``), and the tokenizer as
  ``tokenizer.json`` or ``vocab.json`` + ``merges.txt``.
* **nanogpt** — a ``torch.save`` file (``ckpt.pt``), or a directory holding exactly one, with
  ``model_args`` and ``model`` (keys possibly prefixed ``_orig_mod.`` by ``torch.compile``). It is read
  with ``torch.load(weights_only=True)`` only: a file that needs arbitrary Python objects unpickled is
  refused, never executed.

Both foreign layouts are the same GPT as ours (Pre-LN, learned positions, tied head); the mapping, with
``d = n_embd``, layer ``i``:

======================================  =======================================  ==================
theirs                                  ours                                     how
======================================  =======================================  ==================
``wte`` [V, d], ``wpe`` [C, d]          ``tok_emb``, ``pos_emb``                 as is
``h.i.ln_1`` / ``ln_2`` / ``ln_f``      ``blocks.i.norm1`` / ``norm2``, ``norm_f``  as is
``h.i.attn.c_attn`` [d, 3d] | [3d, d]   ``q_proj``, ``k_proj``, ``v_proj`` [d, d]  rows split in 3
``h.i.attn.c_proj``                     ``o_proj``
``h.i.mlp.c_fc``, ``c_proj``            ``mlp.fc_in``, ``fc_out``
``lm_head``                             ``tok_emb`` (tied) or ``lm_head``
======================================  =======================================  ==================

Hugging Face stores these matrices as ``Conv1D`` weights ``[in, out]`` (``y = x W + b``), so each is
transposed to ``nn.Linear``'s ``[out, in]``; nanoGPT's are already ``nn.Linear``. GPT-2 uses GELU's
tanh approximation (``activation_function: "gelu_new"``) and LayerNorm ε = ``layer_norm_epsilon``;
nanoGPT uses exact GELU and ε = 1e-5, and with ``bias=False`` has no bias anywhere, LayerNorm
included: our LayerNorm always has a bias, which is loaded as zeros (exactly equivalent).

Loading builds the model on the ``meta`` device and assigns the file's tensors, so memory peaks at
about the weights plus one tensor in flight (see ``bench/load_memory.py`` for the figure).
"""

from __future__ import annotations

import json
import math
import pickle
import re
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from model.budget.sizing import check as check_size
from model.budget.sizing import load_need, read_safetensors_header, skip_init_on_meta
from model.config import ConfigError, GPTConfig
from model.io.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from model.io.families import FAMILIES, family_config, family_entries, family_kind
from model.io.families import IGNORED as FAMILY_IGNORED
from model.nn.gpt import GPT
from model.nn.layers import make_positions
from model.text.bpe import HFTokenizer, is_hf_tokenizer_json, load_hf_tokenizer
from model.text.registry import tokenizer_from_dict
from model.text.tokens import CharTokenizer, Tokenizer, TokenizerError

__all__ = [
    "KINDS",
    "Checkpoint",
    "CheckpointError",
    "detect",
    "gpt2_config",
    "load_hf_family",
    "load_hf_gpt2",
    "load_nanogpt",
    "nanogpt_config",
    "open_model",
]

#: The kinds of model :func:`open_model` opens, as written to ``Checkpoint.meta["kind"]``; the
#: Llama-era families (``hf-llama``, ``hf-mistral``, ...) are those of :mod:`model.io.families`.
KINDS = ("attention-lab", "hf-gpt2", "nanogpt", *(f"hf-{t}" for t in FAMILIES))

#: Problems listed in one error message before "and N more".
_MAX_LISTED = 6


# ---------------------------------------------------------------------------------------------
# detection
# ---------------------------------------------------------------------------------------------
#: ``pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2)``: torch's legacy-format magic number.
_LEGACY_TORCH_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."


def _is_torch_file(path: Path) -> bool:
    """A ``torch.save`` file: a zip archive holding ``<name>/data.pkl``, or the legacy format, which
    starts with torch's magic number pickled (protocol 2)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_LEGACY_TORCH_MAGIC))
    except OSError:
        return False
    if head[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as z:
                return any(n == "data.pkl" or n.endswith("/data.pkl") for n in z.namelist())
        except (zipfile.BadZipFile, OSError):
            return False
    return head == _LEGACY_TORCH_MAGIC


def _read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise CheckpointError(f"{path} is corrupt: its JSON is nested too deeply") from None


def _looks_like_ours(cfg: dict) -> bool:
    inner = cfg.get("config") if isinstance(cfg.get("config"), dict) else cfg
    return isinstance(inner, dict) and bool({"d_model", "n_layers"} & set(inner))


def detect(path: str | Path) -> tuple[str, Path]:
    """What :func:`open_model` would open: ``(kind, path)`` with kind one of :data:`KINDS`.

    ``path`` may be a model directory, a nanoGPT checkpoint file, or any file inside a model
    directory (e.g. the ``config.json`` a file dialog picked). Raises :class:`CheckpointError` saying
    what is missing.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{str(path)!r} does not exist")
    if path.is_file():
        if _is_torch_file(path):
            return "nanogpt", path
        path = path.parent
    elif not path.is_dir():
        raise CheckpointError(f"{str(path)!r} is neither a model folder nor a file (a device, pipe, socket)")
    if not (path / "config.json").exists() and (path / "run.json").is_file():
        path = path / "checkpoint"  # a run folder (model/io/runfolder.py): its newest checkpoint
        if not path.is_dir():
            raise CheckpointError(f"the run in {str(path.parent)!r} has saved no checkpoint yet")
    cfg_path = path / "config.json"
    if cfg_path.is_file():
        cfg = _read_json_file(cfg_path)
        if not isinstance(cfg, dict):
            raise CheckpointError(f"{cfg_path} is not a JSON object of settings")
        if "model_type" in cfg:
            if cfg["model_type"] in FAMILIES:
                return f"hf-{cfg['model_type']}", path
            if cfg["model_type"] != "gpt2":
                raise CheckpointError(
                    f"{cfg_path} says model_type {cfg['model_type']!r}; Attention Lab opens Hugging Face "
                    f"models of type gpt2, {', '.join(FAMILIES)}, nanoGPT checkpoints and its own"
                )
            return "hf-gpt2", path
        if _looks_like_ours(cfg):
            return "attention-lab", path
        raise CheckpointError(
            f"{cfg_path} is neither an Attention Lab config (n_layers, d_model, ...) nor a Hugging Face "
            f"one (model_type)"
        )
    torch_files = sorted(p for p in path.iterdir() if p.is_file() and _is_torch_file(p))
    if len(torch_files) == 1:
        return "nanogpt", torch_files[0]
    if len(torch_files) > 1:
        names = ", ".join(p.name for p in torch_files)
        raise CheckpointError(f"{str(path)!r} holds several PyTorch checkpoints ({names}): open one of them")
    raise CheckpointError(
        f"{str(path)!r} holds no model: expected config.json with model.safetensors (an Attention Lab or "
        f"Hugging Face GPT-2 directory) or a nanoGPT ckpt.pt"
    )


# ---------------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------------
def open_model(
    path: str | Path,
    device: str | torch.device = "cpu",
    *,
    tokenizer: Tokenizer | None = None,
    dtype: torch.dtype = torch.float32,
) -> Checkpoint:
    """Open any model :func:`detect` recognises, in eval mode on ``device``.

    ``meta`` always has ``kind`` (one of :data:`KINDS`), ``name``, ``n_params`` (parameters, tied
    matrices counted once), ``tokenizer`` (one line) and ``path``. ``tokenizer`` overrides the one
    found beside a nanoGPT checkpoint (which has none of its own). Raises :class:`CheckpointError`.
    """
    kind, where = detect(path)
    if kind == "hf-gpt2":
        ckpt = load_hf_gpt2(where, device, dtype=dtype)
    elif kind.startswith("hf-"):
        ckpt = load_hf_family(where, device, dtype=dtype)
    elif kind == "nanogpt":
        ckpt = load_nanogpt(where, device, tokenizer=tokenizer, dtype=dtype)
    else:
        ckpt = load_checkpoint(where, device=device)
        meta = ckpt.meta if isinstance(ckpt.meta, dict) else {}
        meta["kind"] = "attention-lab"  # what the files are; "source" may say where the weights began
        meta.setdefault("source", "attention-lab")
        meta.setdefault("name", where.name)
        meta.update(
            n_params=ckpt.model.num_params(), tokenizer=describe_tokenizer(ckpt.tokenizer), path=str(where)
        )
        ckpt.meta = meta
        ckpt.model.eval()
    return ckpt


def describe_tokenizer(tok: Tokenizer) -> str:
    """One line naming a tokenizer's kind and size, e.g. ``"byte-level BPE (gpt2), 50257 tokens"``."""
    desc = getattr(tok, "description", None)
    if isinstance(desc, str):
        return desc
    kind = getattr(tok, "kind", "") or type(tok).__name__
    return f"{kind} tokenizer, {tok.vocab_size} tokens"


def _meta(kind: str, name: str, model: GPT, tok: Tokenizer, path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "source": kind,
        "name": name,
        "n_params": model.num_params(),
        "tokenizer": describe_tokenizer(tok),
        "path": str(path),
        **extra,
    }


# ---------------------------------------------------------------------------------------------
# weights: where they come from, and how they map onto ours
# ---------------------------------------------------------------------------------------------
class _Source:
    """Named tensors in a file, read one at a time: ``keys``, ``shape(name)`` (no read), ``get(name)``."""

    def __init__(
        self, keys: Iterable[str], shape: Callable[[str], tuple], get: Callable[[str], torch.Tensor]
    ):
        self.keys = list(keys)
        self._names = set(self.keys)
        self.shape = shape
        self.get = get

    def __contains__(self, name: str) -> bool:
        return name in self._names


def _dict_source(sd: dict[str, Any], where: str) -> _Source:
    bad = [k for k, v in sd.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"{where}: {bad[0]!r} is not a named tensor")
    return _Source(sd.keys(), lambda k: tuple(sd[k].shape), lambda k: sd.pop(k))


#: safetensors dtype names -> torch dtypes (the floating ones weights come in, plus integers).
_ST_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def _safetensors_index(path: Path) -> dict[str, tuple[torch.dtype, tuple[int, ...], int, int]]:
    """Parse a safetensors header: name -> (dtype, shape, first byte, end byte) in the file.

    The format: an 8-byte little-endian header length ``n``, ``n`` bytes of JSON
    ``{name: {"dtype", "shape", "data_offsets": [begin, end]}}``, then the tensors' bytes (offsets
    relative to the end of the header). Every entry is checked against the file's size.
    """
    bad = f"{path.name} is not a readable safetensors file"
    try:
        header, start = read_safetensors_header(path)
        size = path.stat().st_size
    except (ValueError, OSError) as exc:
        raise CheckpointError(f"{bad}: {str(exc).removeprefix(path.name).lstrip(': ')}") from None
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _ST_DTYPES[info["dtype"]]
            shape = tuple(int(x) for x in info["shape"])
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{bad}: the entry for {name} is malformed") from None
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if min(shape, default=0) < 0 or end - begin != nbytes or begin < 0 or start + end > size:
            raise CheckpointError(f"{bad}: {name}'s bytes do not fit its shape or the file (truncated?)")
        out[name] = (dtype, shape, start + begin, start + end)
    return out


def _safetensors_source(files: list[Path]) -> _Source:
    """Tensors of safetensors files, each read into its own memory with one ``readinto``.

    Not memory-mapped on purpose: a mapped file's pages count in the process's resident memory as they
    are touched, which would double the peak while the weights are copied into the model.
    """
    where: dict[str, tuple[Path, tuple[torch.dtype, tuple[int, ...], int, int]]] = {}
    for f in files:
        for name, entry in _safetensors_index(f).items():
            where[name] = (f, entry)

    def get(name: str) -> torch.Tensor:
        path, (dtype, shape, begin, end) = where[name]
        buf = bytearray(end - begin)
        with open(path, "rb") as fh:
            fh.seek(begin)
            if fh.readinto(buf) != len(buf):
                raise CheckpointError(f"{path.name} ends inside {name} (truncated?)")
        if not buf:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(buf, dtype=dtype).reshape(shape)

    return _Source(where.keys(), lambda k: where[k][1][1], get)


@dataclass
class _Entry:
    """One tensor of the file and where it goes: ``dst`` several names = its rows split evenly."""

    src: str
    shape: tuple[int, ...]
    dst: tuple[str, ...]
    transpose: bool = False
    #: > 0: the rows are ``heads`` groups of ``len(dst)`` parts each (GPT-NeoX's fused per-head Q, K, V)
    heads: int = 0


def _gpt2_entries(cfg: GPTConfig, prefix: str, *, conv1d: bool, linear_bias: bool) -> list[_Entry]:
    """The tensors a GPT-2 layout must hold for ``cfg`` (LayerNorm biases and ``lm_head`` left to callers)."""
    d, dff, C, V = cfg.d_model, cfg.hidden, cfg.context_length, cfg.vocab_size
    assert V is not None

    def w(src: str, out_f: int, in_f: int, dst: tuple[str, ...]) -> _Entry:
        shape = (in_f, out_f) if conv1d else (out_f, in_f)
        return _Entry(prefix + src, shape, dst, transpose=conv1d)

    es = [
        _Entry(prefix + "wte.weight", (V, d), ("tok_emb.weight",)),
        _Entry(prefix + "wpe.weight", (C, d), ("pos_emb.weight",)),
    ]
    for i in range(cfg.n_layers):
        h, b = f"h.{i}.", f"blocks.{i}."
        qkv = tuple(f"{b}attn.{n}_proj" for n in "qkv")
        es.append(_Entry(prefix + h + "ln_1.weight", (d,), (b + "norm1.weight",)))
        es.append(_Entry(prefix + h + "ln_2.weight", (d,), (b + "norm2.weight",)))
        es.append(w(h + "attn.c_attn.weight", 3 * d, d, tuple(n + ".weight" for n in qkv)))
        es.append(w(h + "attn.c_proj.weight", d, d, (b + "attn.o_proj.weight",)))
        es.append(w(h + "mlp.c_fc.weight", dff, d, (b + "mlp.fc_in.weight",)))
        es.append(w(h + "mlp.c_proj.weight", d, dff, (b + "mlp.fc_out.weight",)))
        if linear_bias:
            es.append(_Entry(prefix + h + "attn.c_attn.bias", (3 * d,), tuple(n + ".bias" for n in qkv)))
            es.append(_Entry(prefix + h + "attn.c_proj.bias", (d,), (b + "attn.o_proj.bias",)))
            es.append(_Entry(prefix + h + "mlp.c_fc.bias", (dff,), (b + "mlp.fc_in.bias",)))
            es.append(_Entry(prefix + h + "mlp.c_proj.bias", (d,), (b + "mlp.fc_out.bias",)))
    es.append(_Entry(prefix + "ln_f.weight", (d,), ("norm_f.weight",)))
    return es


def _ln_bias_entries(cfg: GPTConfig, prefix: str) -> list[_Entry]:
    d = cfg.d_model
    es = []
    for i in range(cfg.n_layers):
        for theirs, ours in (("ln_1", "norm1"), ("ln_2", "norm2")):
            es.append(_Entry(f"{prefix}h.{i}.{theirs}.bias", (d,), (f"blocks.{i}.{ours}.bias",)))
    es.append(_Entry(prefix + "ln_f.bias", (d,), ("norm_f.bias",)))
    return es


#: Buffers some GPT-2 files carry that are not weights: the causal mask and its fill value.
_IGNORED = re.compile(r"(^|\.)h\.\d+\.attn\.(bias|masked_bias)$")


def _listed(items: list[str]) -> str:
    more = len(items) - _MAX_LISTED
    return ", ".join(items[:_MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def _check(src: _Source, entries: list[_Entry], where: str, implied: str, extra_ok: set[str]) -> None:
    """Raise one CheckpointError listing missing tensors, wrong shapes and unexpected tensors."""
    problems = []
    missing = [e.src for e in entries if e.src not in src]
    if missing:
        problems.append(f"missing {_listed(missing)}")
    wrong = [
        f"{e.src} is {list(src.shape(e.src))}, not {list(e.shape)}"
        for e in entries
        if e.src in src and tuple(src.shape(e.src)) != e.shape
    ]
    if wrong:
        problems.append(f"shapes do not match {implied}: {_listed(wrong)}")
    expected = {e.src for e in entries} | extra_ok
    unexpected = [k for k in src.keys if k not in expected and not _IGNORED.search(k)]
    if unexpected:
        problems.append(f"tensors this GPT has no place for: {_listed(unexpected)}")
    if problems:
        raise CheckpointError(f"{where}: " + "; ".join(problems))


def _map(src: _Source, entries: list[_Entry], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Read each entry once and turn it into our tensors (transposed / split, fresh memory, ``dtype``)."""
    out: dict[str, torch.Tensor] = {}
    for e in entries:
        t = src.get(e.src)
        if e.transpose:
            t = t.t()
        if len(e.dst) == 1:
            out[e.dst[0]] = t.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
        elif e.heads:  # [heads · n · rows, ...] -> part j: [heads · rows, ...]
            grouped = t.reshape(e.heads, len(e.dst), -1, *t.shape[1:])
            for j, name in enumerate(e.dst):
                part = grouped[:, j].reshape(-1, *t.shape[1:])
                out[name] = part.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
        else:
            for name, part in zip(e.dst, t.chunk(len(e.dst), dim=0)):
                out[name] = part.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
        del t
    return out


_SkipInitOnMeta = skip_init_on_meta  # (moved to model.sizing, which also builds on meta)


def build_from_state_dict(
    config: GPTConfig, state: dict[str, torch.Tensor], device: str | torch.device = "cpu"
) -> GPT:
    """A :class:`GPT` holding exactly ``state`` (our parameter names), without a random init first.

    The model is built on the ``meta`` device and the tensors are assigned, so no second copy of the
    weights is ever allocated. Fixed tables (sinusoidal, rope) are computed. Eval mode.
    """
    with torch.device("meta"), _SkipInitOnMeta():
        model = GPT(config)
    model.load_state_dict(state, strict=True, assign=True)
    if any(buf.is_meta for buf in model.buffers()):  # the fixed tables (sinusoidal, rope): computed
        model.pos_emb = make_positions(config)
    if any(buf.is_meta for buf in model.buffers()):  # pragma: no cover - a new buffer needs a line here
        raise RuntimeError("a buffer of the model has no value after loading")
    return model.to(device).eval()


# ---------------------------------------------------------------------------------------------
# Hugging Face GPT-2
# ---------------------------------------------------------------------------------------------
#: HF activation_function -> (our mlp, our gelu_approx). gelu_new, gelu_fast and gelu_pytorch_tanh are
#: the same function 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
_GPT2_ACTIVATIONS = {
    "gelu_new": ("gelu", "tanh"),
    "gelu_pytorch_tanh": ("gelu", "tanh"),
    "gelu_fast": ("gelu", "tanh"),
    "gelu": ("gelu", "none"),
    "relu": ("relu", "none"),
}

#: HF's alternative names for GPT-2's config fields (GPT2Config.attribute_map).
_GPT2_ALIASES = {
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "n_layer": "num_hidden_layers",
    "n_positions": "max_position_embeddings",
}


def gpt2_config(hf: dict[str, Any]) -> GPTConfig:
    """Our config for a Hugging Face GPT-2 ``config.json`` (HF's defaults for what it omits).

    ``n_layer, n_head, n_embd, n_positions, vocab_size, n_inner`` -> ``n_layers, n_heads, d_model,
    context_length, vocab_size, d_ff``; ``activation_function`` -> ``mlp`` + ``gelu_approx``;
    ``layer_norm_epsilon`` -> ``norm_eps``; ``scale_attn_weights`` -> ``attn_scale`` (sqrt_dk/none);
    ``tie_word_embeddings``; ``resid_pdrop`` -> ``dropout``. Raises :class:`CheckpointError`.
    """
    problems: list[str] = []

    def field(name: str, default: Any = None) -> Any:
        if name in hf:
            return hf[name]
        alias = _GPT2_ALIASES.get(name)
        if alias and alias in hf:
            return hf[alias]
        if default is None:
            problems.append(f"{name} is missing")
        return default

    sizes = {n: field(n) for n in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")}
    act = hf.get("activation_function", "gelu_new")
    if act not in _GPT2_ACTIVATIONS:
        problems.append(f"activation_function {act!r} is not one of {', '.join(_GPT2_ACTIVATIONS)}")
    if hf.get("add_cross_attention"):
        problems.append("add_cross_attention is set: an encoder-decoder GPT-2 is not a decoder-only GPT")
    if hf.get("scale_attn_by_inverse_layer_idx"):
        problems.append("scale_attn_by_inverse_layer_idx (scores divided by layer+1) is not supported")
    if problems:
        raise CheckpointError("config.json: " + "; ".join(problems))
    mlp, approx = _GPT2_ACTIVATIONS[act]
    cfg = GPTConfig(
        vocab_size=sizes["vocab_size"],
        context_length=sizes["n_positions"],
        n_layers=sizes["n_layer"],
        d_model=sizes["n_embd"],
        n_heads=sizes["n_head"],
        d_ff=hf.get("n_inner"),
        mlp=mlp,
        norm="layernorm",
        norm_position="pre",
        positions="learned",
        attn_scale="sqrt_dk" if hf.get("scale_attn_weights", True) else "none",
        causal=True,
        bias="all",
        tie_embeddings=bool(hf.get("tie_word_embeddings", True)),
        dropout=float(hf.get("resid_pdrop", 0.1)),
        norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
        gelu_approx=approx,
    )
    try:
        return cfg.validate()
    except ConfigError as exc:
        raise CheckpointError("config.json: " + "; ".join(exc.problems)) from None


def _names_a_file_inside(name: str) -> bool:
    """``name`` is a relative path that stays inside its folder (no ``..`` above it, not absolute)."""
    parts = Path(name.replace("\\", "/")).parts
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return False
    return bool(parts) and not Path(name).is_absolute() and depth > 0


def _hf_weight_source(directory: Path) -> tuple[_Source, str]:
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return _safetensors_source([single]), single.name
    if index.is_file():
        data = _read_json_file(index)
        wm = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wm, dict):
            raise CheckpointError(f"{index.name} has no weight_map")
        shards = sorted({directory / str(f) for f in wm.values()})
        # by name, not by resolving links: a Hugging Face cache links its shards to ../../blobs
        outside = [f for f in sorted(set(map(str, wm.values()))) if not _names_a_file_inside(f)]
        if outside:
            raise CheckpointError(
                f"{index.name} names shards outside the model folder ({_listed(outside)}): refused"
            )
        absent = [s.name for s in shards if not s.is_file()]
        if absent:
            raise CheckpointError(f"{index.name} names shards that are missing: {_listed(absent)}")
        return _safetensors_source(shards), index.name
    binf = directory / "pytorch_model.bin"
    if binf.is_file():
        sd = _torch_load(binf)
        if not isinstance(sd, dict):
            raise CheckpointError(f"{binf.name} is not a dictionary of named tensors")
        return _dict_source(sd, binf.name), binf.name
    raise CheckpointError(
        f"{str(directory)!r} has a Hugging Face config.json but no weights: model.safetensors is missing"
    )


def _hf_name_and_tokenizer(directory: Path, hf: dict[str, Any], cfg: GPTConfig) -> tuple[str, Tokenizer]:
    """A Hugging Face folder's model name (``_name_or_path``'s last part, else the folder's) and its
    tokenizer, which must fit ``cfg``'s vocabulary."""
    name = Path(str(hf.get("_name_or_path") or directory.name)).name or directory.name
    try:
        tok = load_hf_tokenizer(directory, name=name)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from None
    if tok.vocab_size > cfg.vocab_size:
        raise CheckpointError(
            f"the tokenizer has {tok.vocab_size} tokens but config.json says vocab_size={cfg.vocab_size}"
        )
    return name, tok


def load_hf_gpt2(
    directory: str | Path, device: str | torch.device = "cpu", *, dtype: torch.dtype = torch.float32
) -> Checkpoint:
    """Open a Hugging Face GPT-2-family directory (see the module docstring for the mapping)."""
    directory = Path(directory)
    hf = _read_json_file(directory / "config.json")
    if not isinstance(hf, dict):
        raise CheckpointError("config.json is not a JSON object of settings")
    cfg = gpt2_config(hf)
    check_size(load_need(cfg, what=f"loading {directory.name}"))  # before any tensor is read or built
    name, tok = _hf_name_and_tokenizer(directory, hf, cfg)

    src, fname = _hf_weight_source(directory)
    prefix = "transformer." if "transformer.wte.weight" in src else ""
    if prefix + "wte.weight" not in src:
        raise CheckpointError(f"{fname} has no token embedding (transformer.wte.weight): not GPT-2 weights")
    entries = _gpt2_entries(cfg, prefix, conv1d=True, linear_bias=True) + _ln_bias_entries(cfg, prefix)
    extra_ok = set()
    if cfg.tie_embeddings:
        extra_ok.add("lm_head.weight")  # some files store the tied copy too; it is the embedding
    else:
        entries.append(_Entry("lm_head.weight", (cfg.vocab_size, cfg.d_model), ("lm_head.weight",)))
    implied = (
        f"config.json (n_layer={cfg.n_layers}, n_embd={cfg.d_model}, n_inner={cfg.hidden}, "
        f"n_positions={cfg.context_length}, vocab_size={cfg.vocab_size})"
    )
    _check(src, entries, fname, implied, extra_ok)
    state = _map(src, entries, dtype)
    del src
    model = build_from_state_dict(cfg, state, device)
    meta = _meta("hf-gpt2", name, model, tok, directory, weights=fname)
    return Checkpoint(path=directory, config=cfg, model=model, tokenizer=tok, train_state=None, meta=meta)


# ---------------------------------------------------------------------------------------------
# Llama, Mistral, Qwen2, Qwen3, Gemma, GPT-NeoX (model.families)
# ---------------------------------------------------------------------------------------------
def load_hf_family(
    directory: str | Path, device: str | torch.device = "cpu", *, dtype: torch.dtype = torch.float32
) -> Checkpoint:
    """Open a Hugging Face folder of one of :data:`~model.io.families.FAMILIES` (the mapping is in
    :mod:`model.io.families`)."""
    from model.io.pretrained import (
        _check,
        _hf_weight_source,
        _map,
        _meta,
        _read_json_file,
        build_from_state_dict,
    )

    directory = Path(directory)
    hf = _read_json_file(directory / "config.json")
    if not isinstance(hf, dict):
        raise CheckpointError("config.json is not a JSON object of settings")
    cfg = family_config(hf)
    model_type = hf["model_type"]
    name, tok = _hf_name_and_tokenizer(directory, hf, cfg)
    src, fname = _hf_weight_source(directory)
    if cfg.n_layers > len(src.keys):  # a config.json that lies about its depth: refuse before listing
        raise CheckpointError(
            f"config.json says num_hidden_layers={cfg.n_layers} but {fname} holds only "
            f"{len(src.keys)} tensors"
        )
    entries = [_Entry(w.src, w.shape, w.dst, heads=w.heads) for w in family_entries(model_type, cfg)]
    extra_ok = {k for k in src.keys if FAMILY_IGNORED.search(k)}
    if cfg.tie_embeddings:
        extra_ok |= {"lm_head.weight", "embed_out.weight"}  # a stored copy of the tied matrix
    implied = (
        f"config.json (num_hidden_layers={cfg.n_layers}, hidden_size={cfg.d_model}, "
        f"num_attention_heads={cfg.n_heads}, num_key_value_heads={cfg.kv_heads}, head_dim={cfg.d_head}, "
        f"intermediate_size={cfg.hidden}, vocab_size={cfg.vocab_size})"
    )
    _check(src, entries, fname, implied, extra_ok)  # a lying config.json is named by the header first
    check_size(load_need(cfg, what=f"loading {name}"))  # before any tensor is read or built
    state = _map(src, entries, dtype)
    del src
    model = build_from_state_dict(cfg, state, device)
    meta = _meta(family_kind(model_type), name, model, tok, directory, weights=fname, model_type=model_type)
    return Checkpoint(path=directory, config=cfg, model=model, tokenizer=tok, train_state=None, meta=meta)


# ---------------------------------------------------------------------------------------------
# nanoGPT
# ---------------------------------------------------------------------------------------------
#: nanoGPT's GPTConfig fields, as train.py saves them in ``model_args``.
NANOGPT_FIELDS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size", "dropout")

_UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def _torch_load(path: Path) -> Any:
    """``torch.load(weights_only=True)`` (memory-mapped when the format allows); CheckpointError otherwise."""
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):
                raise
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = _UNSUPPORTED_GLOBAL.search(str(exc))
        what = f" (it asks for {found.group(1)})" if found else ""
        raise CheckpointError(
            f"{path.name} holds Python objects beyond tensors and plain data{what}; opening it would run "
            f"code stored in the file, which Attention Lab never does. Re-save just the weights, e.g. "
            f"torch.save({{'model_args': ..., 'model': model.state_dict()}}, path)"
        ) from None
    except Exception as exc:  # torch raises RuntimeError/KeyError/EOFError/... for files it cannot read
        raise CheckpointError(f"{path.name} is not a readable PyTorch checkpoint: {exc}") from None


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
            data = _read_json_file(tj)
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
    obj = _torch_load(path)
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
    check_size(load_need(cfg, what=f"loading {path.name}"))  # before any tensor is mapped or built
    sd = _strip_compile_prefix(sd)
    src = _dict_source(sd, path.name)
    linear_bias = cfg.bias == "all"
    ln_bias = "transformer.ln_f.bias" in src
    if ln_bias != cfg.norm_bias:
        cfg.norm_bias = ln_bias  # the file decides: a LayerNorm shift present or not
    entries = _gpt2_entries(cfg, "transformer.", conv1d=False, linear_bias=linear_bias)
    if ln_bias:
        entries += _ln_bias_entries(cfg, "transformer.")
    # nanoGPT ties lm_head to wte; a file whose head differs is loaded untied, exactly.
    tied = "lm_head.weight" not in sd or _same_tensor(sd["lm_head.weight"], sd.get("transformer.wte.weight"))
    if not tied:
        cfg.tie_embeddings = False
        entries.append(_Entry("lm_head.weight", (cfg.vocab_size, cfg.d_model), ("lm_head.weight",)))
    implied = (
        f"model_args (n_layer={cfg.n_layers}, n_embd={cfg.d_model}, block_size={cfg.context_length}, "
        f"vocab_size={cfg.vocab_size}, bias={linear_bias})"
    )
    _check(src, entries, path.name, implied, {"lm_head.weight"})
    state = _map(src, entries, dtype)
    del src, sd
    if tokenizer is None:
        dataset = obj.get("config", {}).get("dataset") if isinstance(obj.get("config"), dict) else None
        tokenizer = _nanogpt_tokenizer(path.parent, cfg.vocab_size, dataset)
    if tokenizer.vocab_size > cfg.vocab_size:
        raise CheckpointError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model only {cfg.vocab_size}"
        )
    model = build_from_state_dict(cfg, state, device)
    name = path.parent.name if path.stem == "ckpt" else path.stem
    extra = {k: _as_number(obj.get(k)) for k in ("iter_num", "best_val_loss") if k in obj}
    meta = _meta("nanogpt", name, model, tokenizer, path, **extra)
    return Checkpoint(path=path, config=cfg, model=model, tokenizer=tokenizer, train_state=None, meta=meta)


def _same_tensor(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    return a.data_ptr() == b.data_ptr() or bool(torch.equal(a, b))


_KIND_NAMES = {
    "attention-lab": "Attention Lab",
    "hf-gpt2": "Hugging Face GPT-2",
    "nanogpt": "nanoGPT",
    "hf-llama": "Hugging Face Llama",
    "hf-mistral": "Hugging Face Mistral",
    "hf-qwen2": "Hugging Face Qwen2",
    "hf-qwen3": "Hugging Face Qwen3",
    "hf-gemma": "Hugging Face Gemma",
    "hf-gpt_neox": "Hugging Face GPT-NeoX",
}


def describe_origin(meta: dict[str, Any], path: str | Path | None = None) -> str:
    """Where a model came from, in one line: name (kind, from ...), parameters, tokenizer.

    ``meta``: the model's metadata as :func:`open_model` gives it (empty: a model built here and
    never saved or loaded, described by an empty string); ``path`` names it when ``meta`` does not.
    """
    if not meta:
        return ""
    kind = _KIND_NAMES.get(str(meta.get("kind", "")), str(meta.get("kind", "")))
    origin = _KIND_NAMES.get(str(meta.get("source", "")), "")
    name = meta.get("name") or (Path(path).name if path else "")
    parts = [f"{name} ({kind}{', from ' + origin if origin and origin != kind else ''})"]
    if meta.get("n_params"):
        parts.append(f"{int(meta['n_params']):,} parameters")
    if meta.get("tokenizer"):
        parts.append(f"tokenizer: {meta['tokenizer']}")
    return " · ".join(parts)
