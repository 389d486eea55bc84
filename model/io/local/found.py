"""What a look at the machine's models reports (:mod:`model.io.local.models`): a :class:`LocalModel`
for each model found, a :class:`Location` for each place looked in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalModel", "Location"]


@dataclass(frozen=True)
class LocalModel:
    """One model found on the machine.

    ``path``: what :func:`model.io.pretrained.open_model` opens (a GGUF file, a snapshot folder);
    ``source``: one of :data:`model.io.local.places.SOURCES`; ``family``: the ``model_type`` a GGUF
    opens as (its architecture when it does not open) or ``config.json``'s ``model_type``;
    ``size_bytes``: on disk; ``quantization``: GGUF's types by share of values, or a Hugging Face
    folder's dtype (``"bfloat16"``); ``n_params`` when the header or config says; ``opens`` and
    ``problem`` (why not, one line); ``detail``: what else identifies it (the GGUF's own name, the
    publisher and repo, the revision).
    """

    name: str
    path: Path
    source: str
    family: str = ""
    size_bytes: int = 0
    quantization: str = ""
    n_params: int | None = None
    opens: bool = True
    problem: str = ""
    detail: str = ""


@dataclass
class Location:
    """A place that was looked in: ``where`` (a folder, or a package's name), how many models were
    ``found`` there and a ``note`` when it is absent, unreadable or was not walked to its end."""

    source: str
    where: str
    found: int = 0
    note: str = ""
