"""Open a model from local files, whatever made it: Attention Lab, Hugging Face, or nanoGPT.

:func:`open_model` decides by content, never by file name (:func:`detect`):

* **attention-lab** — a directory whose ``config.json`` holds our :class:`~model.config.GPTConfig`
  fields: handed to :func:`model.io.checkpoint.saved.load_checkpoint`.
* **hf-gpt2** — a Hugging Face GPT-2-family directory: ``config.json`` with ``model_type: "gpt2"``, the
  weights in ``model.safetensors`` (or sharded with ``model.safetensors.index.json``, or a
  ``pytorch_model.bin`` read with ``torch.load(weights_only=True)``), and the tokenizer as
  ``tokenizer.json`` or ``vocab.json`` + ``merges.txt``: :mod:`model.io.hf.gpt2`.
* **hf-llama**, **hf-mistral**, ... — the families of :mod:`model.io.hf.families`, opened by
  :func:`model.io.hf.folder.load_hf_family`.
* **nanogpt** — a ``torch.save`` file (``ckpt.pt``), or a directory holding exactly one, with
  ``model_args`` and ``model``: :mod:`model.io.checkpoint.nanogpt`.
* **gguf** — a llama.cpp GGUF file (any name: Ollama's blobs have none), or a directory holding
  exactly one: config, tokenizer and quantized weights in one file, :mod:`model.io.gguf.load`.

Every foreign model is checked tensor by tensor against what its config implies, then built without
a random initialisation first, by the one build step every loader shares (:mod:`model.io.build`).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import torch

from model.budget.arithmetic import human_bytes
from model.config import ConfigError, GPTConfig
from model.files import check_input, read_json
from model.io.build import describe_tokenizer
from model.io.checkpoint.nanogpt import load_nanogpt, nanogpt_config
from model.io.checkpoint.saved import Checkpoint, CheckpointError, load_checkpoint
from model.io.gguf.file import is_gguf, read_header
from model.io.gguf.load import gguf_config, load_gguf
from model.io.hf.families import FAMILIES, family_config
from model.io.hf.folder import load_hf_family, load_hf_gpt2
from model.io.hf.gpt2 import gpt2_config
from model.text.bpe import special_token_text
from model.text.chat import ChatTemplate, chat_template_for
from model.text.tokens import Tokenizer

#: The kinds of model :func:`open_model` opens, as written to ``Checkpoint.meta["kind"]``; the
#: Llama-era families (``hf-llama``, ``hf-mistral``, ...) are those of :mod:`model.io.hf.families`.
KINDS = ("attention-lab", "hf-gpt2", "nanogpt", "gguf", *(f"hf-{t}" for t in FAMILIES))


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


def _looks_like_ours(cfg: dict) -> bool:
    inner = cfg.get("config") if isinstance(cfg.get("config"), dict) else cfg
    return isinstance(inner, dict) and bool({"d_model", "n_layers"} & set(inner))


def detect(path: str | Path) -> tuple[str, Path]:
    """What :func:`open_model` would open: ``(kind, path)`` with kind one of :data:`KINDS`.

    ``path`` may be a model directory, a nanoGPT checkpoint file, or any file inside a model
    directory (e.g. the ``config.json`` a file dialog picked). Raises :class:`CheckpointError` saying
    what is missing.
    """
    if not str(path).strip():  # Path("") is ".", the current folder: not what an empty name meant
        raise CheckpointError("the model path is empty: name a model folder or file")
    path = check_input(path, error=CheckpointError, kind="any")
    if not path.exists():
        raise CheckpointError(f"{str(path)!r} does not exist")
    if path.is_file():
        if is_gguf(path):
            return "gguf", path
        if path.suffix.lower() == ".gguf":
            raise CheckpointError(f"{path.name} is not a GGUF file (it does not start with 'GGUF')")
        if _is_torch_file(path):
            return "nanogpt", path
        path = path.parent
    if not (path / "config.json").exists() and (path / "run.json").is_file():
        path = path / "checkpoint"  # a run folder (model/io/runs/folder.py): its newest checkpoint
        if not path.is_dir():
            raise CheckpointError(f"the run in {str(path.parent)!r} has saved no checkpoint yet")
    cfg_path = check_input(path / "config.json", error=CheckpointError)
    if cfg_path.is_file():
        cfg = read_json(cfg_path, error=CheckpointError, what=str(cfg_path))
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
    single_files = (("gguf", is_gguf, "GGUF files"), ("nanogpt", _is_torch_file, "PyTorch checkpoints"))
    for kind, is_kind, what in single_files:  # a folder holding one model file opens as that file
        found = sorted(p for p in path.iterdir() if p.is_file() and is_kind(p))
        if len(found) == 1:
            return kind, found[0]
        if found:
            names = ", ".join(p.name for p in found)
            raise CheckpointError(f"{str(path)!r} holds several {what} ({names}): open one of them")
    raise CheckpointError(
        f"{str(path)!r} holds no model: expected config.json with model.safetensors (an Attention Lab or "
        f"Hugging Face GPT-2 directory), a nanoGPT ckpt.pt or a GGUF file"
    )


# ---------------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------------
def keeps_stored_applies(kind: str) -> bool:
    """Whether a model of ``kind`` (one of :data:`KINDS`) can keep its matrices as stored
    (:mod:`model.io.stored`): a GGUF file's quantized or float blocks, a Llama-era family folder's
    float16 / bfloat16 safetensors. Our checkpoints, nanoGPT's and GPT-2 folders are read into
    float32 whatever is asked."""
    return kind == "gguf" or (kind.startswith("hf-") and kind != "hf-gpt2")


def stored_note(kind: str, stored: bool | None) -> str:
    """The one line saying that ``stored`` (asked: True kept as stored, False decoded once) does not
    apply to a model of ``kind``; "" when it does or was not asked."""
    if stored is None or keeps_stored_applies(kind):
        return ""
    what = _KIND_NAMES.get(kind, kind)
    return (
        "keeping weights as stored applies to GGUF and Llama-era Hugging Face models; "
        f"this one ({what}) is read into float32"
    )


def open_model(
    path: str | Path,
    device: str | torch.device = "cpu",
    *,
    tokenizer: Tokenizer | None = None,
    dtype: torch.dtype = torch.float32,
    stored: bool | None = None,
) -> Checkpoint:
    """Open any model :func:`detect` recognises, in eval mode on ``device``.

    ``meta`` always has ``kind`` (one of :data:`KINDS`), ``name``, ``n_params`` (parameters, tied
    matrices counted once), ``tokenizer`` (one line) and ``path``. ``tokenizer`` overrides the one
    found beside a nanoGPT checkpoint (which has none of its own). ``stored``: True keeps the matrices
    as the file stores them, decoded to float32 one layer at a time; False decodes them once; None
    chooses (:func:`~model.io.stored.keeps_stored_by_default`). Where it does not apply
    (:func:`keeps_stored_applies`) ``meta["note"]`` says so in one line (:func:`stored_note`).
    Raises :class:`CheckpointError`.
    """
    kind, where = detect(path)
    if kind == "hf-gpt2":
        ckpt = load_hf_gpt2(where, device, dtype=dtype)
    elif kind.startswith("hf-"):
        ckpt = load_hf_family(where, device, dtype=dtype, stored=stored)
    if kind.startswith("hf-"):
        ckpt.tokenizer.stop_ids = hf_stop_ids(where, ckpt.tokenizer)
        ckpt.tokenizer.chat_template = hf_chat_template(where, ckpt.tokenizer)
    elif kind == "gguf":  # its tokenizer knows its EOS and end-of-turn tokens (model.text.gguf_tokens)
        ckpt = load_gguf(where, device, dtype=dtype, stored=stored)
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
    note = stored_note(kind, stored)
    if note and isinstance(ckpt.meta, dict):
        ckpt.meta["note"] = note
    return ckpt


def hf_stop_ids(folder: Path, tokenizer: Tokenizer) -> frozenset[int]:
    """The ids a Hugging Face model's generation stops at, as transformers' ``generate`` takes them:
    ``eos_token_id`` of ``generation_config.json`` and ``config.json`` (a number or a list) and the
    ``eos_token`` of ``tokenizer_config.json``; ids outside the vocabulary are left out."""
    ids: set[int] = set()
    for name in ("generation_config.json", "config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = read_json(path, error=CheckpointError, what=str(path))
        except CheckpointError:
            continue  # the loader has read config.json already; a broken generation config stops nothing
        value = data.get("eos_token_id") if isinstance(data, dict) else None
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                ids.add(v)
    special = getattr(tokenizer, "token_id", None)
    path = folder / "tokenizer_config.json"
    if special is not None and path.is_file():
        try:
            cfg = read_json(path, error=CheckpointError, what=str(path))
        except CheckpointError:
            cfg = {}
        eos = special_token_text(cfg.get("eos_token")) if isinstance(cfg, dict) else None
        found = special(eos) if eos is not None else None
        if found is not None:
            ids.add(int(found))
    return frozenset(i for i in ids if 0 <= i < tokenizer.vocab_size)


#: The largest chat template file read (real ones are a few kB)
MAX_TEMPLATE_BYTES = 1_000_000


def hf_chat_template(folder: Path, tokenizer: Tokenizer) -> ChatTemplate | None:
    """A Hugging Face folder's chat template, as transformers finds it: ``chat_template.jinja`` when
    present, else ``tokenizer_config.json``'s ``chat_template`` (a string, or a list of named
    templates: the one named ``default``); None when there is none or it cannot be read (the model
    opens all the same, without Chat mode)."""
    cfg: Any = {}
    path = folder / "tokenizer_config.json"
    if path.is_file():
        try:
            cfg = read_json(path, error=CheckpointError, what=str(path))
        except CheckpointError:
            cfg = {}
    cfg = cfg if isinstance(cfg, dict) else {}
    text = cfg.get("chat_template")
    if isinstance(text, list):
        named = [t.get("template") for t in text if isinstance(t, dict) and t.get("name") == "default"]
        text = named[0] if named else None
    source = f"{path} (chat_template)"
    jinja = folder / "chat_template.jinja"
    try:
        if jinja.is_file() and jinja.stat().st_size <= MAX_TEMPLATE_BYTES:
            text, source = jinja.read_text(encoding="utf-8"), str(jinja)
    except (OSError, UnicodeDecodeError):
        pass
    bos, eos = special_token_text(cfg.get("bos_token")), special_token_text(cfg.get("eos_token"))
    return chat_template_for(text, tokenizer, bos_token=bos, eos_token=eos, source=source)


_KIND_NAMES = {
    "attention-lab": "Attention Lab",
    "hf-gpt2": "Hugging Face GPT-2",
    "nanogpt": "nanoGPT",
    "gguf": "GGUF",
    "hf-llama": "Hugging Face Llama",
    "hf-mistral": "Hugging Face Mistral",
    "hf-qwen2": "Hugging Face Qwen2",
    "hf-qwen3": "Hugging Face Qwen3",
    "hf-gemma": "Hugging Face Gemma",
    "hf-gpt_neox": "Hugging Face GPT-NeoX",
    "hf-mixtral": "Hugging Face Mixtral",
    "hf-qwen3_moe": "Hugging Face Qwen3-MoE",
    "hf-qwen2_moe": "Hugging Face Qwen2-MoE",
    "hf-deepseek_v3": "Hugging Face DeepSeek-V3",
    "hf-gpt_oss": "Hugging Face gpt-oss",
    "hf-gemma2": "Hugging Face Gemma 2",
    "hf-gemma3_text": "Hugging Face Gemma 3",
    "hf-olmo2": "Hugging Face OLMo 2",
    "hf-phi3": "Hugging Face Phi-3",
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
    said = ", ".join(w for w in (kind, f"from {origin}" if origin and origin != kind else "") if w)
    parts = [f"{name} ({said})" if said else name]
    if meta.get("n_params"):
        parts.append(f"{int(meta['n_params']):,} parameters")
    if meta.get("quantization"):
        parts.append(
            f"quantized weights {meta['quantization']}: the attention of the quantized model, the one you run"
        )
    if meta.get("stored_bytes"):
        parts.append(
            f"matrices kept as stored ({human_bytes(int(meta['stored_bytes']))} mapped from the file), "
            "made float32 one layer at a time"
        )
    if meta.get("tokenizer"):
        parts.append(f"tokenizer: {meta['tokenizer']}")
    return " · ".join(parts)


def config_of(path: str | Path) -> GPTConfig:
    """The config of anything :func:`open_model` opens, read without a weight: our own config JSON or
    checkpoint (or run) folder, a Hugging Face ``config.json`` (a file, or its folder) of the families
    opened here, a GGUF file's header, a nanoGPT checkpoint's ``model_args`` (read with
    ``torch.load(weights_only=True)``). Not validated when it is ours (the caller lists the problems);
    the others are. Raises :class:`CheckpointError` or :class:`ConfigError` in one line."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() == ".json":
        data = read_json(path, error=lambda line: ConfigError([line]), what=str(path))
        if isinstance(data, dict) and "model_type" in data:  # a Hugging Face config.json
            return _hf_config(data, path)
        return GPTConfig.load(path, validate=False)
    kind, found = detect(path)
    if kind == "gguf":
        return gguf_config(read_header(found))[2]
    if kind == "nanogpt":
        from model.io.weights import torch_load

        obj = torch_load(found)
        args = obj.get("model_args") if isinstance(obj, dict) else None
        if not isinstance(args, dict):
            raise CheckpointError(
                f"{found.name} is a PyTorch file but not a nanoGPT checkpoint (no model_args)"
            )
        return nanogpt_config(args)
    cfg_path = found / "config.json"
    if kind == "attention-lab":
        return GPTConfig.load(cfg_path, validate=False)
    return _hf_config(read_json(cfg_path, error=CheckpointError, what=str(cfg_path)), cfg_path)


def _hf_config(hf: dict[str, Any], where: Path) -> GPTConfig:
    model_type = hf.get("model_type")
    if model_type == "gpt2":
        return gpt2_config(hf)
    if model_type in FAMILIES:
        return family_config(hf)
    raise CheckpointError(
        f"{where} says model_type {model_type!r}; Attention Lab reads gpt2, {', '.join(FAMILIES)} and its own"
    )


__all__ = ["KINDS", "config_of", "describe_origin", "detect", "open_model"]
