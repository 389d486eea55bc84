"""Every loader builds through the one shared step, :func:`model.io.build.build_model` (issue 40).

A spy on the steps inside it (the tensor check and the assembly of the model, looked up in
:mod:`model.io.build` only) counts one call each per model opened, for every format, and the model a
loader returns is the one the shared step built. Beside it, the loader modules are read: none reads
or assembles tensors itself, and each takes its building from :mod:`model.io.build`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import time
from pathlib import Path

import pytest
import torch

import model.io.build as build
from model.budget import sizing
from model.budget.sizing import Available, ModelTooLarge
from model.config import GPTConfig
from model.io.checkpoint.nanogpt import load_nanogpt
from model.io.checkpoint.saved import CheckpointError, load_checkpoint, save_checkpoint
from model.io.gguf.load import load_gguf
from model.io.hf.folder import load_hf_family, load_hf_gpt2
from model.nn.gpt import GPT
from model.text.tokens import CharTokenizer
from tests.gguf_files import write_gguf

IO = Path(build.__file__).parent

#: The format loaders: each reads its own format, then calls the one build step.
#: each loader, as its module under model/io
LOADERS = ("checkpoint/saved", "hf/folder", "gguf/load", "checkpoint/nanogpt")

LLAMA = dict(hidden_size=64, intermediate_size=128)  # rows of whole Q8_0 blocks


@pytest.fixture
def built(monkeypatch):
    """The models the shared step built, in order, and how many tensor checks it ran."""
    models: list[GPT] = []
    checks: list[str] = []
    real_build, real_check = build.build_from_state_dict, build.check_weights

    def assemble(*args, **kwargs):
        models.append(real_build(*args, **kwargs))
        return models[-1]

    def check(src, entries, where, *args, **kwargs):
        checks.append(where)
        return real_check(src, entries, where, *args, **kwargs)

    monkeypatch.setattr(build, "build_from_state_dict", assemble)
    monkeypatch.setattr(build, "check_weights", check)
    return models, checks


def _attention_lab(tmp_path, **_):
    tok = CharTokenizer.from_text("abcdefgh ")
    cfg = GPTConfig(vocab_size=tok.vocab_size, context_length=16, n_layers=2, d_model=16, n_heads=2)
    save_checkpoint(tmp_path / "ours", GPT(cfg.validate()), tok)
    return lambda: load_checkpoint(tmp_path / "ours", with_train_state=False)


def _hf_gpt2(tmp_path, write_hf_gpt2, gpt2_tokenizer_dir, **_):
    write_hf_gpt2(tmp_path, gpt2_tokenizer_dir)
    return lambda: load_hf_gpt2(tmp_path)


def _hf_llama(tmp_path, write_hf_family, **_):
    write_hf_family(tmp_path, "llama", **LLAMA)
    return lambda: load_hf_family(tmp_path)


def _gguf_llama(tmp_path, write_hf_family, **_):
    model = write_hf_family(tmp_path / "hf", "llama", **LLAMA)
    path = write_gguf(tmp_path / "tiny.gguf", model, tmp_path / "hf", "Q8_0")
    return lambda: load_gguf(path, stored=True)


def _gguf_gpt2(tmp_path, write_hf_gpt2, gpt2_tokenizer_dir, **_):
    model = write_hf_gpt2(tmp_path / "hf", gpt2_tokenizer_dir)
    path = write_gguf(tmp_path / "tiny.gguf", model, tmp_path / "hf", "F32")
    return lambda: load_gguf(path, stored=False)


def _nanogpt(tmp_path, write_nanogpt, nanogpt_chars, **_):
    write_nanogpt(tmp_path / "ckpt.pt")
    (tmp_path / "tokenizer.json").write_text(json.dumps(CharTokenizer(nanogpt_chars).to_dict()))
    return lambda: load_nanogpt(tmp_path / "ckpt.pt")


#: kind -> a function writing a tiny file of that kind and returning how to open it.
FILES = {
    "attention-lab": _attention_lab,
    "hf-gpt2": _hf_gpt2,
    "hf-llama": _hf_llama,
    "gguf (llama, kept as stored)": _gguf_llama,
    "gguf (gpt2)": _gguf_gpt2,
    "nanogpt": _nanogpt,
}


@pytest.mark.parametrize("kind", FILES)
def test_each_loader_builds_its_model_through_the_one_step(
    kind, tmp_path, built, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars
):
    (tmp_path / "hf").mkdir()
    opener = FILES[kind](
        tmp_path,
        write_hf_gpt2=write_hf_gpt2,
        write_hf_family=write_hf_family,
        write_nanogpt=write_nanogpt,
        gpt2_tokenizer_dir=gpt2_tokenizer_dir,
        nanogpt_chars=nanogpt_chars,
    )
    models, checks = built
    ckpt = opener()
    assert len(models) == 1 and len(checks) == 1, (kind, len(models), checks)
    assert ckpt.model is models[0]
    assert not ckpt.model.training


def _calls(path: Path) -> set[str]:
    """The names a module calls (``f(...)`` and ``mod.f(...)``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def _imports(path: Path) -> set[str]:
    """The ``model.io`` modules a module imports from."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


@pytest.mark.parametrize("loader", LOADERS)
def test_no_loader_reads_or_assembles_tensors_itself(loader):
    path = IO / f"{loader}.py"
    assert "build_model" in _calls(path)
    assert not _calls(path) & {"map_weights", "check_weights", "build_from_state_dict", "load_state_dict"}
    loaders = {"model.io." + other.replace("/", ".") for other in LOADERS if other != loader}
    assert not _imports(path) & loaders, f"{loader} imports another loader"


def test_only_the_build_step_assembles_a_model():
    """The tensor check and the assembly are called from :mod:`model.io.build` alone."""
    callers = {
        p.name
        for p in IO.rglob("*.py")
        if _calls(p) & {"map_weights", "check_weights", "build_from_state_dict"} and p.name != "weights.py"
    }
    assert callers == {"build.py"}


# ---- the one step also sizes: first, before the weights are opened (issue 56) ---------------------
@pytest.fixture
def steps(monkeypatch):
    """What the shared step did, in order: ``"size"`` (its memory check) and ``"check"`` (its tensor
    check); a size check that refuses is recorded before it raises."""
    done: list[str] = []
    real_size, real_check = build.check_size, build.check_weights

    def size(need, *args, **kwargs):
        done.append("size")
        return real_size(need, *args, **kwargs)

    def check(*args, **kwargs):
        done.append("check")
        return real_check(*args, **kwargs)

    monkeypatch.setattr(build, "check_size", size)
    monkeypatch.setattr(build, "check_weights", check)
    return done


def _opener(kind, tmp_path, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars):
    (tmp_path / "hf").mkdir()
    return FILES[kind](
        tmp_path,
        write_hf_gpt2=write_hf_gpt2,
        write_hf_family=write_hf_family,
        write_nanogpt=write_nanogpt,
        gpt2_tokenizer_dir=gpt2_tokenizer_dir,
        nanogpt_chars=nanogpt_chars,
    )


@pytest.mark.parametrize("kind", FILES)
def test_each_loader_is_sized_once_by_the_one_step_before_its_tensors_are_checked(
    kind, tmp_path, steps, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars
):
    """Our checkpoints, GPT-2 and nanoGPT sized themselves and handed the step no need; GGUF sized
    twice; the Hugging Face families were sized after their tensors were checked."""
    opener = _opener(
        kind, tmp_path, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars
    )
    opener()
    assert steps == ["size", "check"], kind


@pytest.mark.parametrize("kind", FILES)
def test_a_model_the_memory_cannot_hold_is_refused_by_the_one_step_before_anything_is_checked(
    kind, tmp_path, steps, monkeypatch, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir,
    nanogpt_chars,
):  # fmt: skip
    opener = _opener(
        kind, tmp_path, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars
    )
    monkeypatch.setattr(sizing, "available_memory", lambda device="cpu": Available(4096, "MemAvailable"))
    with pytest.raises(ModelTooLarge):
        opener()
    assert steps == ["size"], kind  # the step's own size check refused it: no layout listed, no tensor read


def _claim_ten_million_layers(kind: str, tmp_path: Path) -> None:
    """Edit the file :data:`FILES` wrote for ``kind`` so that its config claims 10⁷ layers."""
    if kind == "nanogpt":
        ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
        ckpt["model_args"]["n_layer"] = 10**7
        torch.save(ckpt, tmp_path / "ckpt.pt")
        return
    config, field = (
        (tmp_path / "ours" / "config.json", "n_layers")
        if kind == "attention-lab"
        else (tmp_path / "config.json", "n_layer")
    )
    config.write_text(json.dumps({**json.loads(config.read_text()), field: 10**7}))


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("kind", ["attention-lab", "hf-gpt2", "nanogpt"])
def test_a_config_claiming_ten_million_layers_is_refused_by_the_one_step_in_one_line(
    kind, tmp_path, steps, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars
):
    """Refused in one line naming the value, inside the step and before a row per layer is listed, in
    well under a second and 100 MB: GPT-2's and nanoGPT's by its size check, ours (sized by what the
    file holds) by the count of our layout, which the step asks for once the file's model fits."""
    opener = _opener(
        kind, tmp_path, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars
    )
    _claim_ten_million_layers(kind, tmp_path)
    before, t0 = _rss(), time.perf_counter()
    with pytest.raises((ModelTooLarge, CheckpointError), match="n_layers=10000000") as refused:
        opener()
    assert time.perf_counter() - t0 < 1.0 and _rss() - before < 100 * 2**20, kind
    assert steps == ["size"] and "\n" not in str(refused.value), kind
    assert isinstance(refused.value, CheckpointError if kind == "attention-lab" else ModelTooLarge), kind


def test_a_config_of_ours_that_lies_is_named_by_the_one_steps_tensor_check(tmp_path, steps):
    """Our loader no longer builds a model on the ``meta`` device to compare shapes itself: the layout
    of our own names goes to the step, whose one check names each tensor of another shape."""
    _attention_lab(tmp_path)
    config = tmp_path / "ours" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "d_model": 20}))  # near the file's size
    with pytest.raises(
        CheckpointError, match=r"model\.safetensors does not match config\.json \(.*\): tok_emb"
    ):
        load_checkpoint(tmp_path / "ours")
    assert steps == ["size", "check"]


def test_no_loader_sizes_memory_or_builds_a_model_itself():
    """The memory check and every model construction (``GPT(...)``, on ``meta`` or not) of a loader
    are the build step's."""
    for loader in LOADERS:
        calls = _calls(IO / f"{loader}.py")
        assert not calls & {"check_size", "GPT", "skip_init_on_meta"}, loader
        source = (IO / f"{loader}.py").read_text(encoding="utf-8")
        assert "import check as" not in source and '"meta"' not in source, loader


def test_one_function_is_named_build_model():
    """The constructor of a fresh GPT has a name of its own; ``build_model`` is the one build step."""
    defined = [
        path.relative_to(IO.parents[1]).as_posix()
        for path in (IO.parents[1] / "model").rglob("*.py")
        if any(
            isinstance(n, ast.FunctionDef) and n.name == "build_model"
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    ]
    assert defined == ["model/io/build.py"]


# ---- one check of a config that lies about its size, whichever loader read it (issue 56) -----------
#: kind -> (the file that names the weights, what the config was read from, its layer count's name)
_LIARS = {
    "attention-lab": ("model.safetensors", "config.json", "n_layers"),
    "hf-llama": ("model.safetensors", "config.json", "num_hidden_layers"),
    "gguf (llama, kept as stored)": ("tiny.gguf", "the GGUF metadata of tiny.gguf", "llama.block_count"),
}


def _claim_layers(kind: str, tmp_path: Path, layers: int, write_hf_family) -> None:
    """Edit the file :data:`FILES` wrote for ``kind`` so that its config claims ``layers`` layers."""
    if kind.startswith("gguf"):  # written again from its folder, the metadata saying so
        model = write_hf_family(tmp_path / "hf", "llama", **LLAMA)
        metadata = {"llama.block_count": (layers, "UINT32")}
        write_gguf(tmp_path / "tiny.gguf", model, tmp_path / "hf", "Q8_0", metadata=metadata)
        return
    config, field = (
        (tmp_path / "ours" / "config.json", "n_layers")
        if kind == "attention-lab"
        else (tmp_path / "config.json", "num_hidden_layers")
    )
    config.write_text(json.dumps({**json.loads(config.read_text()), field: layers}))


@pytest.mark.parametrize("kind", _LIARS)
def test_a_config_claiming_more_layers_than_the_file_has_tensors_is_refused_by_the_steps_one_count_check(
    kind, tmp_path, steps, monkeypatch, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir,
    nanogpt_chars,
):  # fmt: skip
    """The same lie (40 layers in a file of 2) through a Hugging Face folder, a GGUF file and a checkpoint
    of ours is refused by the build step's count check, in the one wording, naming the count as the
    format names it, before the layout lists a row. With that check switched off, nothing else counts:
    the lie reaches the tensor check (the Hugging Face layout kept a count check of its own)."""
    opener = _opener(
        kind, tmp_path, write_hf_gpt2, write_hf_family, write_nanogpt, gpt2_tokenizer_dir, nanogpt_chars
    )
    _claim_layers(kind, tmp_path, 40, write_hf_family)
    counted: list[str] = []
    real_counts = build.check_counts

    def counts(cfg, src, where, implied):
        counted.append(where)
        return real_counts(cfg, src, where, implied)

    monkeypatch.setattr(build, "check_counts", counts)
    with pytest.raises(CheckpointError) as refused:
        opener()
    where, config, layers = _LIARS[kind]
    one_wording = (
        rf"{re.escape(where)} does not match {re.escape(config)} \((.*, )?{re.escape(layers)}=40, .*\), "
        rf"which means 40 layers but {re.escape(where)} holds only \d+ tensors: "
        "the config does not describe these weights"
    )
    assert re.fullmatch(one_wording, str(refused.value)), str(refused.value)
    assert counted == [where] and steps == ["size"], kind  # no row listed, no tensor checked

    monkeypatch.setattr(build, "check_counts", lambda *args: None)  # the step's count check off
    with pytest.raises(CheckpointError, match="missing") as unchecked:
        opener()
    assert " holds only " not in str(unchecked.value) and steps[1:] == ["size", "check"], kind
