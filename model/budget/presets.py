"""Real models as configs, for the budget calculator: GPT-2, GPT-3, Llama 2/3, Mistral, TinyLlama, and
today's blocks: Gemma 2 and 3 (sandwich norms, local/global layers, soft-capping), OLMo 2 (norms on
the sublayer outputs), Mixtral, Qwen3-MoE and gpt-oss (mixtures of experts; gpt-oss's attention sinks)
and DeepSeek-V3 (latent attention, shared experts, dense first layers).

Each :class:`Preset` holds the exact architecture as :class:`~model.config.GPTConfig` fields (from
the model's paper or released ``config.json``) plus what is publicly known about its training:
tokens, reported GPU-hours and the device, its dense 16-bit peak FLOP/s and the precision. Fields
that are not public are ``None``. Pure Python: no torch.

Configs saved from the app (``*.json`` files or checkpoint directories holding ``config.json``)
are listed by :func:`saved_configs` and loaded by :func:`load_config`.

Where a real model differs in a way that changes no count, ``notes`` says so (GPT-3's alternating
sparse attention, Mistral's sliding window, GPT-2's tanh GELU); where it has something a config cannot
express that does change the count (OLMo 2's QK-norm over all heads, DeepSeek-V3's router correction
bias and multi-token-prediction module, Gemma 3's vision tower), ``notes`` gives the difference in
parameters. The published parameter counts are checked in the tests, not stored here.

The presets are listed in :mod:`model.budget.presets_dense` (the classic blocks) and
:mod:`model.budget.presets_today` (today's); :class:`Preset` is :mod:`model.budget.preset_type`'s. This
module finds them by name and lists the saved configs.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path

from model.budget.preset_type import A100_BF16 as A100_BF16
from model.budget.preset_type import H100_SXM_BF16 as H100_SXM_BF16
from model.budget.preset_type import Preset
from model.budget.presets_dense import _ALL
from model.budget.presets_today import _MOE_TODAY
from model.config import ConfigError, GPTConfig

PRESETS: dict[str, Preset] = {p.name: p for p in (*_ALL, *_MOE_TODAY)}

_ALIASES = {
    "gpt2-small": "gpt2",
    "gpt-2": "gpt2",
    "gpt3": "gpt3-175b",
    "gpt-3": "gpt3-175b",
    "tinyllama": "tinyllama-1.1b",
    "mistral": "mistral-7b",
    "gemma-2-9b": "gemma2-9b",
    "gemma-3-4b": "gemma3-4b",
    "gemma-3-4b-(text)": "gemma3-4b",
    "olmo-2-7b": "olmo2-7b",
    "mixtral": "mixtral-8x7b",
    "qwen3-30b": "qwen3-30b-a3b",
    "gpt-oss": "gpt-oss-20b",
    "deepseek": "deepseek-v3",
}


def _key(name: str) -> str:
    k = name.strip().lower().replace("_", "-").replace(" ", "-")
    k = (
        k.replace("llama-2", "llama2")
        .replace("llama-3", "llama3")
        .replace("gpt-2", "gpt2")
        .replace("gpt-3", "gpt3")
    )
    return _ALIASES.get(k, k)


def names() -> list[str]:
    """Preset names in display order (small to large within each family)."""
    return list(PRESETS)


def matching(cfg: GPTConfig) -> Preset | None:
    """The first preset (in :func:`names` order) whose config equals ``cfg`` field for field, or None:
    what an edited config is, whatever preset the editing started from."""
    target = cfg.to_dict()
    return next((p for p in PRESETS.values() if p.gpt_config().to_dict() == target), None)


def get(name: str) -> Preset:
    """The preset called ``name`` (case and ``-``/``_``/space insensitive; "gpt2-small", "Llama 2 7B"
    work). Unknown names raise :class:`ConfigError` with the closest match."""
    key = _key(name)
    if key in PRESETS:
        return PRESETS[key]
    near = difflib.get_close_matches(key, list(PRESETS) + list(_ALIASES), n=1, cutoff=0.5)
    hint = f" (did you mean {_ALIASES.get(near[0], near[0])!r}?)" if near else ""
    raise ConfigError([f"unknown preset {name!r}{hint}; `attention-lab budget --list-presets` lists them"])


def load_config(path: str | Path) -> GPTConfig:
    """A config from a JSON file, or from a checkpoint directory's ``config.json``; not validated
    (the caller lists the problems). Raises :class:`ConfigError` for a missing or malformed file."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    return GPTConfig.load(path, validate=False)


@dataclass(frozen=True)
class SavedConfig:
    """A config saved from the app: its display ``name`` (file stem or checkpoint folder), ``path``."""

    name: str
    path: Path
    config: GPTConfig


def saved_configs(directory: str | Path) -> list[SavedConfig]:
    """Every config saved under ``directory``: ``*.json`` files in it and ``*/config.json`` of
    checkpoint folders one level down, sorted by name. Files that are not a GPTConfig (other JSON,
    unreadable, unknown fields) are skipped; a missing directory gives an empty list."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    candidates = [(p.stem, p) for p in directory.glob("*.json")]
    candidates += [(p.parent.name, p) for p in directory.glob("*/config.json")]
    out = []
    for name, p in candidates:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            cfg = GPTConfig.from_dict(data, validate=False)
        except (OSError, UnicodeDecodeError, ValueError, TypeError):
            continue
        out.append(SavedConfig(name, p, cfg))
    return sorted(out, key=lambda s: (s.name, str(s.path)))


__all__ = ["PRESETS", "Preset", "SavedConfig", "get", "load_config", "names", "saved_configs"]
