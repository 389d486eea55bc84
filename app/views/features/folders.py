"""Where the Features tab keeps its SAE folders, and what a folder of a stopped run holds.

An SAE trained in the window goes to ``<cache>/sae/<model>-<site>-L<layer>-x<expansion>`` (the cache
folder of :func:`model.files.cache_root`, ``$ATTENTION_LAB_CACHE`` when set), ``-2``, ``-3``, ... when
that name holds another SAE already; the user may pick any folder instead. A run stopped by Cancel or
by closing the app leaves the trainer's state beside the SAE (:data:`model.interp.sae.train.STATE_FILE`);
:func:`run_state` reads its settings and step from the file's header alone, so that the tab offers
Resume with the very settings the run had (the trainer refuses any other).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from model.files import cache_root
from model.interp.sae.site import Site
from model.interp.sae.train import STATE_FILE
from model.safetensors_file import read_safetensors_header


def sae_place() -> Path:
    """The folder the window's SAE folders go under."""
    return cache_root() / "sae"


def default_folder(model_name: str, site: Site, expansion: int) -> Path:
    """A fresh folder for an SAE of ``model_name`` on ``site`` with ``expansion`` × d_in features."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model_name).strip("-.") or "model"
    base = sae_place() / f"{slug[:60]}-{site.kind}-L{site.layer}-x{expansion}"
    folder, n = base, 1
    while folder.exists() and any(folder.iterdir()):
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    return folder


def run_state(folder: str | Path) -> dict | None:
    """The state of the run that wrote ``folder`` (``settings``: the trainer's settings as a dict,
    ``step``, ``finished``, ``curves``: name -> the values of every step so far), read from its header;
    None when the folder holds no run's state or an unreadable one."""
    path = Path(folder) / STATE_FILE
    if not path.is_file():
        return None
    try:
        header, _ = read_safetensors_header(path)
        meta = json.loads(header["__metadata__"]["state"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("settings"), dict):
        return None
    curves = meta.get("curves") if isinstance(meta.get("curves"), dict) else {}
    step, finished = int(meta.get("step", 0)), bool(meta.get("finished"))
    return {"settings": meta["settings"], "step": step, "finished": finished, "curves": curves}


__all__ = ["default_folder", "run_state", "sae_place"]
