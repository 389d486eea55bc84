"""The Hugging Face cache, as a look at the machine's models reads it (:mod:`model.io.local.models`):
``huggingface_hub.scan_cache_dir`` of each cache, every model repo's snapshot revision with a
``config.json`` (checked by :func:`model.io.pretrained.detect`, the family's config mapping, its
weights and tokenizer present, the memory it would take) and every ``.gguf`` file of a snapshot; a repo
the cache scan could not read is listed refused."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from model.budget.parameters import parameters
from model.budget.sizing import load_need
from model.io.hf.families import family_config
from model.io.hf.gpt2 import gpt2_config
from model.io.loaded import CheckpointError
from model.io.local.found import LocalModel
from model.io.local.look import Look
from model.io.local.places import HF_CACHE
from model.io.local.reading import _SPLIT, _one_line, _small_json, _split_size
from model.io.pretrained import detect
from model.io.weights import listed

__all__ = ["hf_models"]


def hf_models(look: Look, caches: Sequence[Path]) -> Iterator[LocalModel]:
    """The models of each of ``caches`` (Hugging Face hub cache folders), repo by repo."""
    for cache in caches:
        loc = look.location(HF_CACHE, cache)
        if not cache.is_dir():
            loc.note = "not there"
            continue
        try:
            from huggingface_hub import scan_cache_dir

            info = scan_cache_dir(cache)
        except Exception as exc:
            loc.note = f"cannot be read: {_one_line(exc)}"
            continue
        for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
            if repo.repo_type != "model":
                continue
            revisions = sorted(repo.revisions, key=lambda r: ("main" not in r.refs, -r.last_modified))
            for rev in revisions:
                for model in _hf_revision(look, repo.repo_id, rev):
                    loc.found += 1
                    yield model
        for warning in info.warnings:
            damaged = _hf_corrupt(cache, warning)
            if damaged is not None:
                loc.found += 1
                yield damaged


def _hf_revision(look: Look, repo_id: str, rev: Any) -> list[LocalModel]:
    refs = sorted(rev.refs)
    at = refs[0] if refs else rev.commit_hash[:10]
    name = repo_id if "main" in refs else f"{repo_id}@{at}"
    detail = f"revision {rev.commit_hash[:10]}" + (f" ({', '.join(refs)})" if refs else "")
    folder = Path(rev.snapshot_path)
    files = {}
    for f in rev.files:
        try:
            files[Path(f.file_path).relative_to(folder).as_posix()] = f
        except ValueError:
            continue
    out = []
    if "config.json" in files:
        try:
            out.append(_hf_folder(look, folder, name, set(files), int(rev.size_on_disk), detail))
        except Exception as exc:  # never raised for what the cache holds: refused instead
            out.append(LocalModel(name, folder, HF_CACHE, opens=False, problem=_one_line(exc)))
    for rel in sorted(files):
        split = _SPLIT.search(rel)
        if not rel.lower().endswith(".gguf") or (split and int(split.group(1)) != 1):
            continue
        path = folder / rel
        size = _split_size(path) if split else int(files[rel].size_on_disk)
        out.append(look.gguf(path, name=f"{name}/{rel}", source=HF_CACHE, detail=detail, size=size))
    return out


def _hf_folder(look: Look, folder: Path, name: str, files: set[str], size: int, detail: str) -> LocalModel:
    """A snapshot with a config.json: detect, the family's config mapping, weights and tokenizer
    present, the memory it would take."""
    problems: list[str] = []
    hf: dict[str, Any] = {}
    cfg_path = folder / "config.json"
    try:
        raw = _small_json(cfg_path)
        hf = raw if isinstance(raw, dict) else {}
    except CheckpointError as exc:
        problems.append(_one_line(exc).replace(str(cfg_path), "config.json"))
    family = str(hf.get("model_type") or "")
    dtype = hf.get("torch_dtype") or hf.get("dtype") or ""
    kind = ""
    if not problems:
        try:
            kind, _ = detect(folder)
        except CheckpointError as exc:
            problems.append(_one_line(exc).replace(str(cfg_path), "config.json"))
    n_params = None
    if kind.startswith("hf-"):
        try:
            cfg = gpt2_config(hf) if kind == "hf-gpt2" else family_config(hf)
            n_params = int(parameters(cfg).total)
            need = load_need(cfg).total
        except Exception as exc:  # CheckpointError, ConfigError: the config says what is missing
            problems.append(_one_line(exc))
            need = 0
        problems += _hf_files_missing(folder, files)
        if not problems and need:
            too_large = look.too_large(need)
            if too_large:
                problems.append(too_large)
    return LocalModel(
        name=name,
        path=folder,
        source=HF_CACHE,
        family=family or kind,
        size_bytes=size,
        quantization=str(dtype),
        n_params=n_params,
        opens=not problems,
        problem="; ".join(problems),
        detail=detail,
    )


def _hf_files_missing(folder: Path, files: set[str]) -> list[str]:
    """What open_model would miss in a Hugging Face snapshot: its weights, its tokenizer."""
    problems = []
    if "model.safetensors" not in files and "pytorch_model.bin" not in files:
        index = "model.safetensors.index.json"
        if index in files:
            try:
                data = _small_json(folder / index)
                shards = sorted({str(s) for s in data["weight_map"].values()})
            except (CheckpointError, AttributeError, KeyError, TypeError) as exc:
                problems.append(f"{index} is unreadable ({_one_line(exc)})")
            else:
                absent = [s for s in shards if s not in files]
                if absent:
                    problems.append(f"only partly downloaded: {listed(absent)} missing")
        else:
            problems.append(
                "no weights here (model.safetensors is missing: only part of the repo was fetched?)"
            )
    if "tokenizer.json" not in files and not {"vocab.json", "merges.txt"} <= files:
        problems.append("no tokenizer (tokenizer.json, or vocab.json and merges.txt)")
    return problems


def _hf_corrupt(cache: Path, warning: BaseException) -> LocalModel | None:
    """A model repo the cache scan could not read, as a refused entry (other repo types: None)."""
    text = _one_line(warning)
    m = re.search(r"models--[^/\\\s()]+", text)
    if m is None:
        return None
    repo_id = m.group(0).removeprefix("models--").replace("--", "/")
    return LocalModel(
        repo_id,
        cache / m.group(0),
        HF_CACHE,
        opens=False,
        problem=f"its cache folder is damaged: {text.replace(str(cache), '…')}",
    )
