"""An SAE's folder in SAELens's own format: ``cfg.json`` + ``sae_weights.safetensors``.

:func:`save_sae` writes a folder SAELens opens (``SAE.load_from_disk``, its 6.x loader, and the 5.x
one): ``sae_weights.safetensors`` holds ``W_enc`` [d_in, d_sae], ``b_enc`` [d_sae], ``W_dec``
[d_sae, d_in] and ``b_dec`` [d_in] as float32, and ``cfg.json`` names them with the fields both
loaders read: 6.x's ``architecture``, ``d_in``, ``d_sae``, ``k``, ``dtype``, ``apply_b_dec_to_input``,
``normalize_activations``, ``reshape_activations`` (``"hook_z"`` for a ``z`` site: SAELens then reads
TransformerLens's ``hook_z`` [..., H, d_k] and flattens it head-major, as :func:`~.site.flatten` does)
and ``metadata`` (``hook_name``, ``model_name``, ``sae_lens_version``); and 5.x's flat ``hook_name``,
``hook_layer``, ``activation_fn_str`` / ``activation_fn_kwargs``, ... which 6.x ignores. The folder is
written whole (a sibling temporary folder, then one exchange: :mod:`model.atomic_dir`), with any
``extra`` files of the caller (the trainer's state) in the same step.

:func:`load_sae` opens such a folder, ours or SAELens's (6.x or older field names), for a model the app
opens. Everything about the folder is checked before a tensor is allocated, and a refusal is one
line (:class:`SAEFileError`): ``cfg.json`` not a JSON object or larger than :data:`MAX_CFG_BYTES`, a
field missing or of the wrong kind, an architecture other than ``topk`` / ``standard`` (ReLU), a hook
name that is no site, a per-head SAE (``hook_head_index``), activation normalisation, ``d_in`` not
the site's width in the given model (:meth:`~.site.Site.d_in`), a size whose float32 weights would not
fit in memory; then the safetensors header (:mod:`model.safetensors_file`): exactly the four tensors,
each of the shape ``cfg.json`` implies, of its ``dtype``, with bytes that match and lie in the file.
Only then are the tensors read (safetensors, never pickle), and refused if any value is NaN or
infinite. A TopK SAE saved with ``rescale_acts_by_decoder_norm`` (SAELens's training default) is
folded on load, ``W_enc·n``, ``b_enc·n``, ``W_dec/n`` with ``n = ‖W_dec,i‖``, which gives SAELens's
own encode and decode.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from safetensors.torch import save as tensors_to_bytes

from model.atomic import writing
from model.atomic_dir import clean_stale_temps, replace_dir, temp_dir_for, write_synced
from model.budget.sizing import usable_bytes
from model.errors import AttentionLabError
from model.files import check_input, parse_json
from model.interp.sae.sae import SAEConfig, SparseAutoencoder
from model.interp.sae.site import Site, SiteError
from model.safetensors_file import safetensors_entries

CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"

#: The SAELens format version the files written here follow (its 6.x ``cfg.json``).
SAELENS_FORMAT_VERSION = "6.0.0"

#: The largest ``cfg.json`` read (SAELens's are a few kB).
MAX_CFG_BYTES = 1 << 20

#: The widest SAE opened, whatever the memory: 2^24 features, 2^20 inputs.
MAX_D_SAE, MAX_D_IN = 1 << 24, 1 << 20

#: safetensors dtype -> (its ``cfg.json`` names, bytes per value, the torch dtype).
DTYPES: dict[str, tuple[tuple[str, ...], int, torch.dtype]] = {
    "F32": (("float32", "torch.float32"), 4, torch.float32),
    "F16": (("float16", "torch.float16"), 2, torch.float16),
    "BF16": (("bfloat16", "torch.bfloat16"), 2, torch.bfloat16),
    "F64": (("float64", "torch.float64"), 8, torch.float64),
}


class SAEFileError(AttentionLabError, ValueError):
    """An SAE folder that cannot be opened (one line naming the file, the field and the value)."""


def cfg_dict(config: SAEConfig) -> dict[str, Any]:
    """``cfg.json`` of ``config``: SAELens 6.x's fields, its 5.x flat ones, and ours under
    ``attention_lab`` (module docstring)."""
    site = config.site
    topk = config.architecture == "topk"
    return {
        "architecture": config.architecture,
        "d_in": config.d_in,
        "d_sae": config.d_sae,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": config.apply_b_dec_to_input,
        "normalize_activations": "none",
        "reshape_activations": "hook_z" if site.kind == "z" else "none",
        **({"k": config.k, "rescale_acts_by_decoder_norm": False} if topk else {}),
        "metadata": {
            "model_name": config.model_name,
            "hook_name": site.hook_name,
            "hook_head_index": None,
            "sae_lens_version": SAELENS_FORMAT_VERSION,
            "sae_lens_training_version": SAELENS_FORMAT_VERSION,
        },
        # SAELens 5.x reads these flat fields (6.x keeps only its own, above)
        "model_name": config.model_name,
        "hook_name": site.hook_name,
        "hook_layer": site.layer,
        "hook_head_index": None,
        "activation_fn_str": "topk" if topk else "relu",
        "activation_fn_kwargs": {"k": config.k} if topk else {},
        "finetuning_scaling_factor": False,
        "context_size": int(config.extra.get("seq_len", 0)),
        "prepend_bos": bool(config.extra.get("prepend_bos", False)),
        "dataset_path": str(config.extra.get("corpus", "")),
        "dataset_trust_remote_code": False,
        "sae_lens_training_version": SAELENS_FORMAT_VERSION,
        "l1_coefficient": config.l1_coefficient,
        "attention_lab": {"site": {"kind": site.kind, "layer": site.layer}, **config.extra},
    }


def save_sae(sae: SparseAutoencoder, folder: str | Path, *, extra: Mapping[str, bytes] | None = None) -> Path:
    """Write ``sae`` into ``folder`` in SAELens's format, whole (module docstring); ``extra``: more files
    (name -> bytes) written in the same step. What was in ``folder`` before is replaced. Returns it."""
    folder = Path(folder)
    tensors = {name: p.detach().float().contiguous().cpu() for name, p in sae.named_parameters()}
    weights = tensors_to_bytes(tensors, metadata={"format": "pt"})
    text = json.dumps(cfg_dict(sae.config), indent=2) + "\n"
    with writing(folder):
        folder.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(folder)
        tmp = temp_dir_for(folder)
        try:
            write_synced(tmp / WEIGHTS_FILE, weights)
            write_synced(tmp / CFG_FILE, text.encode())
            for name, data in (extra or {}).items():
                write_synced(tmp / name, data)
            replace_dir(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return folder


# ---- reading ----------------------------------------------------------------------------------
def _read_cfg(folder: Path) -> dict[str, Any]:
    check_input(folder, error=SAEFileError, kind="folder")
    path = check_input(folder / CFG_FILE, error=SAEFileError)  # a FIFO or device is never opened
    try:
        size = path.stat().st_size
        if size > MAX_CFG_BYTES:
            raise SAEFileError(f"{CFG_FILE}: {size:,} bytes, more than an SAE's config ({MAX_CFG_BYTES:,})")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SAEFileError(f"{folder}: no {CFG_FILE} (not an SAE folder in SAELens's format)") from None
    except OSError as exc:
        raise SAEFileError(f"{path} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SAEFileError(f"{CFG_FILE} is not UTF-8 text") from None
    raw = parse_json(text, error=SAEFileError, what=CFG_FILE)
    if not isinstance(raw, dict):
        raise SAEFileError(f"{CFG_FILE} is not a JSON object")
    return raw


def _object(raw: dict, name: str) -> dict[str, Any]:
    """``raw[name]`` when it is a JSON object, else an empty one."""
    value = raw.get(name)
    return value if isinstance(value, dict) else {}


def _whole(raw: dict, name: str, value: Any, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SAEFileError(
            f"{CFG_FILE}: {name} is {str(value)[:40]!r}, not a whole number from {low} to {high:,}"
        )
    return value


def _choice(name: str, value: Any, allowed: tuple) -> Any:
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed if a is not None)
        raise SAEFileError(f"{CFG_FILE}: {name} {str(value)[:40]!r} is not one this app reads ({shown})")
    return value


def read_sae_config(folder: str | Path, *, model_config=None) -> tuple[SAEConfig, dict[str, Any]]:
    """(the :class:`SAEConfig` of the folder's ``cfg.json``, how its file is stored: ``dtype``,
    ``rescale``) with every check of the module docstring that needs no tensor; ``model_config``: the
    model it is for (its site and ``d_in`` checked against it)."""
    folder = Path(folder)
    raw = _read_cfg(folder)
    meta = _object(raw, "metadata")
    hook = meta.get("hook_name") or raw.get("hook_name") or raw.get("hook_point")
    if not isinstance(hook, str):
        raise SAEFileError(f"{CFG_FILE}: no hook_name (metadata.hook_name, or hook_name / hook_point)")
    try:
        site = Site.from_hook_name(hook)
    except SiteError as exc:
        raise SAEFileError(f"{CFG_FILE}: {exc}") from None
    head = meta.get("hook_head_index", raw.get("hook_head_index"))
    if head is not None:
        raise SAEFileError(f"{CFG_FILE}: hook_head_index {head!r}: an SAE of one head's z is not read here")
    act = raw.get("activation_fn", raw.get("activation_fn_str"))
    kwargs = _object(raw, "activation_fn_kwargs")
    arch = raw.get("architecture", "topk" if act == "topk" else "standard")
    if arch == "standard" and act == "topk":  # SAELens before 6: a TopK SAE was "standard" + topk
        arch = "topk"
    _choice("architecture", arch, ("topk", "standard"))
    if arch == "standard":
        _choice("activation_fn", act if act is not None else "relu", ("relu",))
    d_in = _whole(raw, "d_in", raw.get("d_in"), 1, MAX_D_IN)
    d_sae = _whole(raw, "d_sae", raw.get("d_sae"), 1, MAX_D_SAE)
    k = _whole(raw, "k", raw.get("k", kwargs.get("k")), 1, d_sae) if arch == "topk" else 32
    _choice("normalize_activations", raw.get("normalize_activations", "none"), ("none", None, False))
    _choice("reshape_activations", raw.get("reshape_activations", "none"), ("none", "hook_z", None))
    _choice("finetuning_scaling_factor", raw.get("finetuning_scaling_factor", False), (False, None))
    bias_in = _choice("apply_b_dec_to_input", raw.get("apply_b_dec_to_input", True), (True, False))
    rescale = _choice(
        "rescale_acts_by_decoder_norm", raw.get("rescale_acts_by_decoder_norm", False), (True, False)
    )
    dtype = raw.get("dtype", "float32")
    stored = next((code for code, (names, _, _) in DTYPES.items() if dtype in names), None)
    if stored is None:
        raise SAEFileError(
            f"{CFG_FILE}: dtype {str(dtype)[:40]!r} is not float32, float16, bfloat16 or float64"
        )
    need = 4 * (2 * d_in * d_sae + d_in + d_sae)
    if need > usable_bytes():
        raise SAEFileError(
            f"{CFG_FILE}: d_in {d_in:,} × d_sae {d_sae:,} is {need / 2**30:,.1f} GiB of float32 weights, "
            "more "
            "than this machine's memory can hold"
        )
    if model_config is not None:
        try:
            site.check(model_config)
        except SiteError as exc:
            raise SAEFileError(f"{CFG_FILE}: hook_name {hook}: {exc}") from None
        want = site.d_in(model_config)
        if d_in != want:
            raise SAEFileError(
                f"{CFG_FILE}: d_in is {d_in} but the model's {site.label()} is {want} wide: "
                "an SAE of another model"
            )
    l1 = raw.get("l1_coefficient", 5.0)
    ours = _object(raw, "attention_lab")
    extra = {key: value for key, value in ours.items() if key != "site"}
    config = SAEConfig(
        site, d_in, d_sae, architecture=arch, k=k, apply_b_dec_to_input=bias_in,
        l1_coefficient=float(l1) if isinstance(l1, int | float) and math.isfinite(l1) else 5.0,
        model_name=str(meta.get("model_name") or raw.get("model_name") or ""), extra=extra,
    )  # fmt: skip
    return config, {"dtype": stored, "rescale": rescale}


def _check_weights(path: Path, config: SAEConfig, dtype: str) -> None:
    """The safetensors header of ``path`` against ``config`` (module docstring); reads the header only."""
    check_input(path, error=SAEFileError)
    try:
        entries, start = safetensors_entries(path)
        size = path.stat().st_size
    except FileNotFoundError:
        raise SAEFileError(f"{path.parent}: no {WEIGHTS_FILE}") from None
    except (OSError, ValueError) as exc:
        raise SAEFileError(str(exc) if isinstance(exc, ValueError) else f"{path}: {exc.strerror}") from None
    d_in, d_sae = config.d_in, config.d_sae
    want = {"W_enc": (d_in, d_sae), "b_enc": (d_sae,), "W_dec": (d_sae, d_in), "b_dec": (d_in,)}
    if set(entries) != set(want):
        raise SAEFileError(
            f"{WEIGHTS_FILE} holds {', '.join(sorted(entries)) or 'nothing'}; an SAE is {', '.join(want)}"
        )
    for name, shape in want.items():
        e = entries[name]
        if e.shape != shape:
            raise SAEFileError(f"{WEIGHTS_FILE}: {name} is {list(e.shape)} but cfg.json says {list(shape)}")
        if e.dtype != dtype:
            raise SAEFileError(
                f"{WEIGHTS_FILE}: {name} is {e.dtype} but cfg.json's dtype is {DTYPES[dtype][0][0]}"
            )
        if e.end - e.begin != math.prod(shape) * DTYPES[dtype][1] or start + e.end > size:
            raise SAEFileError(
                f"{WEIGHTS_FILE}: {name}'s bytes do not match its shape (truncated or corrupt?)"
            )


def load_sae(folder: str | Path, *, model_config=None) -> SparseAutoencoder:
    """The SAE of ``folder`` (ours or SAELens's), checked before anything is allocated (module
    docstring), as float32 in evaluation mode. ``model_config``: the model it is for."""
    folder = Path(folder)
    config, stored = read_sae_config(folder, model_config=model_config)
    path = folder / WEIGHTS_FILE
    _check_weights(path, config, stored["dtype"])
    try:
        tensors = load_file(path)
    except Exception as exc:  # the header was checked; what is left is the file changing under us
        raise SAEFileError(
            f"{WEIGHTS_FILE} cannot be read: {str(exc).splitlines()[0] if str(exc) else exc}"
        ) from None
    tensors = {name: t.float() for name, t in tensors.items()}
    for name, t in tensors.items():
        if not torch.isfinite(t).all():
            raise SAEFileError(f"{WEIGHTS_FILE}: {name} holds NaN or infinite values")
    if stored["rescale"]:
        n = tensors["W_dec"].norm(dim=1)
        if not (n > 0).all():
            raise SAEFileError(
                f"{WEIGHTS_FILE}: a decoder row is zero, which rescale_acts_by_decoder_norm cannot fold"
            )
        tensors["W_enc"] *= n
        tensors["b_enc"] *= n
        tensors["W_dec"] /= n[:, None]
    sae = SparseAutoencoder(config)
    with torch.no_grad():
        for name, p in sae.named_parameters():
            p.copy_(tensors[name])
    return sae.eval()


__all__ = [
    "CFG_FILE",
    "MAX_CFG_BYTES",
    "WEIGHTS_FILE",
    "SAEFileError",
    "cfg_dict",
    "load_sae",
    "read_sae_config",
    "save_sae",
]
