"""The models already on the machine (model/io/local/models.py), found in fake stores under tmp_path:
an Ollama store (manifests + GGUF blobs), LM Studio folders, a Hugging Face cache laid out as
huggingface_hub lays it out, and a package's GGUF file. No real home folder is ever looked in."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from model.io.local.models import (
    HF_CACHE,
    LM_STUDIO,
    LMSTUDIO_ENV,
    OLLAMA,
    PACKAGE,
    LocalScan,
    default_locations,
    find_local_models,
)
from model.io.pretrained import detect

gguf = pytest.importorskip("gguf", reason="the gguf package (GGUF writer) is not installed")

#: plenty: the fake models are tiny, and no test depends on this machine's free memory
MEMORY = 1 << 40


def write_gguf(
    path: Path, arch: str = "llama", *, name: str = "", experts: int = 0, iq2: bool = False
) -> Path:
    """A GGUF file with a llama-shaped header (1 layer, d 8, 2 heads) and two small tensors (a token
    embedding, an MLP matrix: as IQ2_XXS when ``iq2``); ``experts`` > 0 makes it mixture-of-experts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_name(name or f"tiny {arch}")
    w.add_block_count(1)
    w.add_context_length(32)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    if experts:
        w.add_expert_count(experts)
    w.add_tensor("token_embd.weight", np.zeros((16, 8), np.float32))
    if iq2:
        w.add_tensor(
            "blk.0.ffn_up.weight", np.zeros((2, 66), np.uint8), raw_dtype=gguf.GGMLQuantizationType.IQ2_XXS
        )
    else:
        w.add_tensor("blk.0.ffn_up.weight", np.ones((16, 8), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def ollama_pull(root: Path, name: str, blob_source: Path | bytes, *, registry="registry.ollama.ai") -> Path:
    """Store a model as ``ollama pull`` does: the blob by its digest, a manifest naming it. ``name``
    as Ollama spells it (``[namespace/]model:tag``). Returns the blob."""
    data = blob_source if isinstance(blob_source, bytes) else blob_source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    model, tag = name.split(":")
    namespace, _, model = model.rpartition("/")
    manifest = root / "manifests" / registry / (namespace or "library") / model / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": len(data)},
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64, "size": 12},
    ]
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    return blob


LLAMA_CONFIG = {
    "model_type": "llama",
    "vocab_size": 64,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 64,
    "torch_dtype": "bfloat16",
}


def hf_cache_repo(
    cache: Path, repo_id: str, files: dict[str, bytes | str], *, rev: str = "a" * 40, ref: str = "main"
) -> Path:
    """A model repo in a Hugging Face cache, as huggingface_hub writes it: blobs by hash, the snapshot's
    files linked to them, ``refs/<ref>`` holding the commit. Returns the snapshot folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / rev
    for rel, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if ref:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(rev)
    return snapshot


def scan(tmp_path: Path, **kw) -> tuple[LocalScan, dict[str, object]]:
    """A scan of only what ``kw`` names (every other source empty); (scan, name -> LocalModel)."""
    args = dict(ollama=[], lmstudio=[], hf_cache=[], packages=[], usable_memory=MEMORY)
    args.update(kw)
    s = LocalScan(**args)
    return s, {m.name: m for m in s.run()}


# ---------------------------------------------------------------------------------------------
# Ollama
# ---------------------------------------------------------------------------------------------
def test_ollama_manifest_names_its_gguf_blob(tmp_path):
    root = tmp_path / "ollama"
    src = write_gguf(tmp_path / "src.gguf", name="Tiny Llama")
    blob = ollama_pull(root, "tinyllama:latest", src)
    ollama_pull(root, "someone/tinyllama:q4", src)
    ollama_pull(root, "user/repo:Q4_K_M", src, registry="hf.co")
    s, found = scan(tmp_path, ollama=[root])
    assert set(found) == {"tinyllama:latest", "someone/tinyllama:q4", "hf.co/user/repo:Q4_K_M"}
    m = found["tinyllama:latest"]
    assert m.source == OLLAMA and m.path == blob and m.opens and m.problem == ""
    assert m.family == "llama" and m.n_params == 16 * 8 * 2 and m.size_bytes == blob.stat().st_size
    assert m.quantization == "F32 (50%), F16 (50%)" and m.detail == "Tiny Llama"
    assert detect(m.path) == ("gguf", blob)  # what open_model opens
    assert s.locations[0].found == 3 and s.locations[0].note == ""


def test_ollama_corrupt_manifests_and_blobs_are_refused_rows(tmp_path):
    root = tmp_path / "ollama"
    whole = write_gguf(tmp_path / "whole.gguf").read_bytes()
    ollama_pull(root, "truncated:latest", whole[: len(whole) // 2])
    ollama_pull(root, "notgguf:latest", b"this is a safetensors file, honest" * 2)
    manifests = root / "manifests" / "registry.ollama.ai" / "library"
    (manifests / "broken").mkdir(parents=True)
    (manifests / "broken" / "latest").write_text("{not json")
    (manifests / "nolayer").mkdir()
    (manifests / "nolayer" / "latest").write_text(json.dumps({"layers": [{"mediaType": "x"}]}))
    (manifests / "noblob").mkdir()
    digest = "sha256:" + "ab" * 32
    (manifests / "noblob" / "7b").write_text(
        json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": digest}]})
    )
    (manifests / "baddigest").mkdir()
    (manifests / "baddigest" / "latest").write_text(
        json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "../../etc"}]})
    )
    _, found = scan(tmp_path, ollama=[root])
    assert set(found) == {
        "truncated:latest",
        "notgguf:latest",
        "broken:latest",
        "nolayer:latest",
        "noblob:7b",
        "baddigest:latest",
    }
    assert not any(m.opens for m in found.values())
    assert all(m.problem and "\n" not in m.problem for m in found.values())
    assert "not valid JSON" in found["broken:latest"].problem
    assert "no model layer" in found["nolayer:latest"].problem
    assert "missing" in found["noblob:7b"].problem
    assert "not sha256" in found["baddigest:latest"].problem
    assert "truncated" in found["truncated:latest"].problem
    assert found["notgguf:latest"].problem == "the blob is not a GGUF file (it does not start with 'GGUF')"


def test_refusals_name_the_architecture_moe_and_quant_type(tmp_path):
    root = tmp_path / "ollama"
    ollama_pull(root, "mamba:tiny", write_gguf(tmp_path / "a.gguf", "mamba"))  # a state-space model
    ollama_pull(root, "mixtral:tiny", write_gguf(tmp_path / "b.gguf", experts=8))
    ollama_pull(root, "iq2:tiny", write_gguf(tmp_path / "c.gguf", iq2=True))
    _, found = scan(tmp_path, ollama=[root])
    mamba, moe, iq2 = found["mamba:tiny"], found["mixtral:tiny"], found["iq2:tiny"]
    assert not mamba.opens and "architecture 'mamba'" in mamba.problem and mamba.family == "mamba"
    assert not moe.opens and "mixture-of-experts" in moe.problem
    assert not iq2.opens and "IQ2_XXS" in iq2.problem and iq2.quantization.startswith("IQ2_XXS")


def test_too_large_for_the_memory_is_refused_with_the_numbers(tmp_path):
    write_gguf(tmp_path / "lm" / "pub" / "repo" / "m.gguf")
    _, found = scan(tmp_path, lmstudio=[tmp_path / "lm"], usable_memory=1000)
    assert not found["m"].opens and "of memory to open" in found["m"].problem


# ---------------------------------------------------------------------------------------------
# LM Studio
# ---------------------------------------------------------------------------------------------
def test_lmstudio_finds_gguf_files_in_publisher_repo_folders(tmp_path):
    new, old = tmp_path / ".lmstudio" / "models", tmp_path / ".cache" / "lm-studio" / "models"
    a = write_gguf(new / "lmstudio-community" / "Tiny-GGUF" / "Tiny-Q8_0.gguf")
    write_gguf(old / "TheBloke" / "Old-GGUF" / "old.Q4_0.GGUF", "qwen2")
    (new / "lmstudio-community" / "Tiny-GGUF" / "README.md").write_text("not a model")
    s, found = scan(tmp_path, lmstudio=[new, old])
    assert set(found) == {"Tiny", "old"}  # named as the model, less the quantization (gguf_model_name)
    assert found["Tiny"].path == a and found["Tiny"].source == LM_STUDIO
    assert found["Tiny"].detail == "lmstudio-community/Tiny-GGUF" and found["Tiny"].opens
    assert found["old"].family == "qwen2"
    assert [loc.found for loc in s.locations] == [1, 1]


def test_split_files_are_listed_once_and_refused(tmp_path):
    root = tmp_path / "lm"
    first = write_gguf(root / "p" / "r" / "big-00001-of-00002.gguf")
    second = write_gguf(root / "p" / "r" / "big-00002-of-00002.gguf")
    _, found = scan(tmp_path, lmstudio=[root])
    assert list(found) == ["big"]
    m = found["big"]
    assert not m.opens and "split into 2 files" in m.problem
    assert m.size_bytes == first.stat().st_size + second.stat().st_size


def test_link_loops_and_huge_trees_are_bounded(tmp_path):
    root = tmp_path / "lm"
    write_gguf(root / "p" / "r" / "m.gguf")
    (root / "p" / "r" / "loop").symlink_to(root)  # a folder that holds itself
    (root / "same").symlink_to(root / "p")  # the same file reached twice
    s, found = scan(tmp_path, lmstudio=[root])
    assert list(found) == ["m"]
    wide = tmp_path / "wide"
    wide.mkdir()
    for i in range(60):
        (wide / f"f{i:03d}.txt").write_text("")
    write_gguf(wide / "zz" / "zz.gguf")  # below the folder that uses up the budget
    s = LocalScan(ollama=[], lmstudio=[wide], hf_cache=[], packages=[], usable_memory=MEMORY, max_entries=20)
    assert s.run() == []
    assert "stopped after 20 entries" in s.locations[0].note


def test_absent_and_unreadable_folders_are_notes_not_errors(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("")
    s, found = scan(tmp_path, ollama=[tmp_path / "nope"], lmstudio=[tmp_path / "gone"], hf_cache=[f])
    assert found == {}
    assert [loc.note for loc in s.locations] == ["not there", "not there", "not there"]
    assert s.seconds > 0


# ---------------------------------------------------------------------------------------------
# the Hugging Face cache
# ---------------------------------------------------------------------------------------------
def test_hf_cache_snapshots_with_config_are_described_from_config(tmp_path):
    cache = tmp_path / "hub"
    files = {"config.json": json.dumps(LLAMA_CONFIG), "tokenizer.json": "{}", "model.safetensors": b"x" * 100}
    snap = hf_cache_repo(cache, "org/tiny-llama", files)
    hf_cache_repo(cache, "org/tiny-llama", files, rev="b" * 40, ref="step1000")
    phi = dict(LLAMA_CONFIG, model_type="olmoe")  # a family the app does not open (Phi-3 opens)
    hf_cache_repo(cache, "org/phi", {"config.json": json.dumps(phi), "model.safetensors": b"y"})
    hf_cache_repo(cache, "org/partial", {"config.json": json.dumps(LLAMA_CONFIG)})
    hf_cache_repo(
        cache,
        "org/ggufs",
        {"README.md": "hi", "sub/t-Q8_0.gguf": write_gguf(tmp_path / "g.gguf").read_bytes()},
    )
    s, found = scan(tmp_path, hf_cache=[cache])
    assert set(found) == {
        "org/tiny-llama",
        "org/tiny-llama@step1000",
        "org/phi",
        "org/partial",
        "org/ggufs/sub/t-Q8_0.gguf",
    }
    m = found["org/tiny-llama"]
    assert m.source == HF_CACHE and m.path == snap and m.opens, m.problem
    assert m.family == "llama" and m.quantization == "bfloat16" and m.size_bytes > 100
    # embedding and head 64·16 each, 2 layers of (q and o 16·16, k and v 16·8, MLP 3·16·32, norms
    # 2·16), the final norm 16
    assert m.n_params == 2 * 64 * 16 + 2 * (2 * 256 + 2 * 128 + 3 * 512 + 32) + 16
    assert "revision aaaaaaaaaa (main)" == m.detail
    assert not found["org/phi"].opens and "'olmoe'" in found["org/phi"].problem
    assert str(cache) not in found["org/phi"].problem
    partial = found["org/partial"]
    assert not partial.opens and "no weights" in partial.problem and "no tokenizer" in partial.problem
    g = found["org/ggufs/sub/t-Q8_0.gguf"]
    assert g.opens and g.family == "llama" and detect(g.path)[0] == "gguf"
    assert s.locations[0].found == 5


def test_hf_cache_shards_and_damaged_repos(tmp_path):
    cache = tmp_path / "hub"
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    files = {
        "config.json": json.dumps(LLAMA_CONFIG),
        "tokenizer.json": "{}",
        "model.safetensors.index.json": json.dumps(index),
        "model-00001-of-00002.safetensors": b"1",
    }
    hf_cache_repo(cache, "org/sharded", files)
    (cache / "models--org--damaged").mkdir(parents=True)  # no snapshots folder
    (cache / "datasets--org--data" / "snapshots").mkdir(parents=True)
    _, found = scan(tmp_path, hf_cache=[cache])
    assert set(found) == {"org/sharded", "org/damaged"}
    assert "model-00002-of-00002.safetensors missing" in found["org/sharded"].problem
    assert not found["org/damaged"].opens and "damaged" in found["org/damaged"].problem


def test_hf_cache_from_the_environment(tmp_path, monkeypatch):
    cache = tmp_path / "elsewhere"
    files = {"config.json": json.dumps(LLAMA_CONFIG), "tokenizer.json": "{}", "model.safetensors": b"x"}
    hf_cache_repo(cache, "org/tiny", files)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    found = find_local_models(ollama=[], lmstudio=[], packages=[], usable_memory=MEMORY)
    assert [m.name for m in found] == ["org/tiny"]


# ---------------------------------------------------------------------------------------------
# defaults, packages, speed
# ---------------------------------------------------------------------------------------------
def test_default_locations_come_from_env_and_home(tmp_path):
    home = tmp_path / "home"
    d = default_locations({}, home)
    assert d[OLLAMA] == [home / ".ollama" / "models"]
    assert d[LM_STUDIO] == [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    assert d[HF_CACHE] == [home / ".cache" / "huggingface" / "hub"]
    env = {
        "OLLAMA_MODELS": str(tmp_path / "o"),
        LMSTUDIO_ENV: os.pathsep.join([str(tmp_path / "l1"), str(tmp_path / "l2")]),
        "HF_HOME": str(tmp_path / "hf"),
    }
    d = default_locations(env, home)
    assert d[OLLAMA] == [tmp_path / "o"]
    assert d[LM_STUDIO] == [tmp_path / "l1", tmp_path / "l2"]
    assert d[HF_CACHE] == [tmp_path / "hf" / "hub"]
    assert default_locations({"XDG_CACHE_HOME": str(tmp_path / "x")}, home)[HF_CACHE] == [
        tmp_path / "x" / "huggingface" / "hub"
    ]


def test_a_scan_of_a_fake_home_finds_every_source(tmp_path):
    home = tmp_path / "home"
    ollama_pull(home / ".ollama" / "models", "tiny:latest", write_gguf(tmp_path / "a.gguf"))
    write_gguf(home / ".lmstudio" / "models" / "p" / "r" / "lm.gguf")
    files = {"config.json": json.dumps(LLAMA_CONFIG), "tokenizer.json": "{}", "model.safetensors": b"x"}
    hf_cache_repo(home / ".cache" / "huggingface" / "hub", "org/tiny", files)
    pkg = write_gguf(tmp_path / "site-packages" / "some_pkg" / "Packaged.gguf")
    s = LocalScan(env={}, home=home, packages=[("Packaged", pkg), ("Missing", None)], usable_memory=MEMORY)
    models = s.run()
    assert [(m.source, m.name) for m in models] == [
        (OLLAMA, "tiny:latest"),
        (LM_STUDIO, "lm"),
        (HF_CACHE, "org/tiny"),
        (PACKAGE, "Packaged"),
    ]
    assert all(m.opens for m in models)
    assert [loc.source for loc in s.locations] == [OLLAMA, LM_STUDIO, LM_STUDIO, HF_CACHE, PACKAGE, PACKAGE]
    assert s.locations[-1].note == "not installed"


def test_the_packaged_smollm2_is_found_from_its_header(smollm2_path):
    (m,) = find_local_models(ollama=[], lmstudio=[], hf_cache=[], usable_memory=MEMORY)
    assert m.source == PACKAGE and m.name == "SmolLM2-135M-Instruct" and m.path == smollm2_path
    assert m.opens and m.family == "llama" and m.n_params == 134_515_008
    assert m.quantization.startswith("Q4_1")


def test_a_second_scan_reads_no_header_again(tmp_path, monkeypatch):
    import model.io.local.reading as lm

    root = tmp_path / "lm"
    for i in range(3):
        write_gguf(root / "p" / f"r{i}" / f"m{i}.gguf")
    scan(tmp_path, lmstudio=[root])
    monkeypatch.setattr(lm, "summarize_gguf", lambda path: pytest.fail(f"header of {path} read again"))
    _, found = scan(tmp_path, lmstudio=[root])
    assert len(found) == 3 and all(m.opens for m in found.values())
