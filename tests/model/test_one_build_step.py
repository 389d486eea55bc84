"""Every loader builds through the one shared step, :func:`model.io.build.build_model` (issue 40).

A spy on the steps inside it (the tensor check and the assembly of the model, looked up in
:mod:`model.io.build` only) counts one call each per model opened, for every format, and the model a
loader returns is the one the shared step built. Beside it, the loader modules are read: none reads
or assembles tensors itself, and each takes its building from :mod:`model.io.build`.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import model.io.build as build
from model.config import GPTConfig
from model.io.checkpoint import load_checkpoint, save_checkpoint
from model.io.gguf import load_gguf
from model.io.hf import load_hf_family, load_hf_gpt2
from model.io.nanogpt import load_nanogpt
from model.nn.gpt import GPT
from model.text.tokens import CharTokenizer
from tests.gguf_files import write_gguf

IO = Path(build.__file__).parent

#: The format loaders: each reads its own format, then calls the one build step.
LOADERS = ("checkpoint", "hf", "gguf", "nanogpt")

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
    loaders = {f"model.io.{other}" for other in LOADERS if other != loader}
    assert not _imports(path) & loaders, f"{loader} imports another loader"


def test_only_the_build_step_assembles_a_model():
    """The tensor check and the assembly are called from :mod:`model.io.build` alone."""
    callers = {
        p.name
        for p in IO.glob("*.py")
        if _calls(p) & {"map_weights", "check_weights", "build_from_state_dict"} and p.name != "weights.py"
    }
    assert callers == {"build.py"}
