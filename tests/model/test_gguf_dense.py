"""GGUF files of Gemma 2, Gemma 3 (text), Phi-3 and OLMo 2, opened exactly (model/io/gguf/dense.py).

Each case is a tiny random transformers model of the family (uneven weights, tests/conftest.py) converted
as llama.cpp's ``convert_hf_to_gguf.py`` converts it (tests/gguf_dense_files.py: llama.cpp's own tensor
names from ``gguf``'s table, Gemma's ``1 + γ`` norms, the metadata each converter writes and no more).
The reference is ``transformers``' own GGUF loading of the same file where it reads the architecture
(gemma2, gemma3, phi3), else (olmo2) the same weights, dequantized, opened through our Hugging Face
folder path (itself equal to transformers, tests/model/test_families_today.py): logits within 1e-4 of
the reference's largest, eager attention weights within 1e-5, on prompts longer than twice the sliding
window for the local/global families. Gemma's head size is 256 because transformers reads no query
scalar from the file and takes Gemma's default (256), as llama.cpp scales by the head size.

The mixed-quantization case is a Gemma 3 file as a Q4_K_M one mixes its types: Q4_K, Q6_K (random blocks
with finite scales: ``gguf`` cannot make K-quants), Q5_0 and Q8_0 matrices beside F32 norms; it and the
Q8_0 cases are also opened kept as stored, equal bit for bit to the widened model.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize
from transformers import AutoModelForCausalLM, PreTrainedModel

from model.interp.trace import run_with_trace
from model.io.checkpoint.saved import Checkpoint, CheckpointError
from model.io.gguf.file import read_header
from model.io.gguf.load import load_gguf, summarize_gguf
from model.io.local.models import LM_STUDIO, LocalScan
from model.io.pretrained import open_model
from tests.gguf_dense_files import ARCH, dense_tensors, gemma_vocabulary, write_dense_gguf
from tests.gguf_files import random_k_quant

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

_GEMMA = dict(
    num_attention_heads=2, num_key_value_heads=1, head_dim=256, sliding_window=4, tie_word_embeddings=True
)
#: family -> the tiny model's config overrides (2 layers but Gemma 3's 6: one global layer after 5 local)
FAMILIES = {
    "gemma2": dict(hidden_size=64, intermediate_size=128, **_GEMMA),
    "gemma3_text": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=6, **_GEMMA),
    "phi3": dict(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1),
    "olmo2": dict(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=2),
    # rows of whole 256-value super-blocks, for the K-quants
    "gemma3-256": dict(hidden_size=256, intermediate_size=256, **_GEMMA),
}
#: case -> (family, ggml type of the matrices; "Q4_K_M": Q4_K, Q6_K, Q5_0 and Q8_0 in turn)
CASES = {
    "gemma2-F32": ("gemma2", "F32"),
    "gemma3-F32": ("gemma3_text", "F32"),
    "phi3-F32": ("phi3", "F32"),
    "olmo2-F32": ("olmo2", "F32"),
    "gemma2-Q8_0": ("gemma2", "Q8_0"),
    "phi3-Q8_0": ("phi3", "Q8_0"),
    "olmo2-Q8_0": ("olmo2", "Q8_0"),
    "gemma3-Q4_K_M": ("gemma3-256", "Q4_K_M"),
}
MIXED = ("Q4_K", "Q6_K", "Q5_0", "Q8_0")
#: the architectures transformers opens from GGUF
TRANSFORMERS_READS = ("gemma2", "gemma3", "phi3")


@dataclass
class Case:
    path: Path
    arch: str
    original: torch.nn.Module
    ours: Checkpoint
    reference: torch.nn.Module | Checkpoint  # transformers' load of the file, or our HF-folder open


def _mixed_types(model) -> dict[str, str]:
    matrices = [n for n, w in dense_tensors(model) if w.ndim == 2]
    return {n: MIXED[i % len(MIXED)] for i, n in enumerate(matrices)}


def _k_blocks(name: str, shape: tuple[int, ...], type_name: str) -> bytes | None:
    return random_k_quant(shape, type_name, seed=len(name)) if type_name.endswith("_K") else None


def _dequantized_folder(path: Path, original, tokenizer_folder: Path, where: Path) -> Path:
    """A Hugging Face folder of ``original``'s family holding the weights the GGUF file ``path`` holds,
    dequantized by ``gguf`` (norms less the 1 of Gemma's ``1 + γ``): the same weights, for our HF path."""
    model = copy.deepcopy(original)
    cfg = model.config
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[ARCH[cfg.model_type].upper()], cfg.num_hidden_layers)
    stored = {t.name: t for t in gguf.GGUFReader(path).tensors}
    with torch.no_grad():
        for name, p in model.named_parameters():
            t = stored[names.get_name(name, try_suffixes=(".weight", ".bias"))]
            w = dequantize(t.data, t.tensor_type).reshape(p.shape)
            p.copy_(torch.from_numpy(np.array(w, dtype=np.float32)))
    model.save_pretrained(str(where))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (where / f).write_bytes((tokenizer_folder / f).read_bytes())
    return where


@pytest.fixture(scope="module")
def cases(tmp_path_factory, write_hf_family):
    """case -> :class:`Case`, each written and opened once (each file in a folder of its own)."""
    folders: dict = {}
    made: dict[str, Case] = {}

    def get(case: str) -> Case:
        if case not in made:
            family, qtype = CASES[case]
            if family not in folders:
                folder = tmp_path_factory.mktemp(f"hf-{family}")
                model_type = family.split("-")[0] if family != "gemma3-256" else "gemma3_text"
                folders[family] = folder, write_hf_family(folder, model_type, **FAMILIES[family])
            folder, original = folders[family]
            where = tmp_path_factory.mktemp(f"gguf-{case}")
            pad = {"tokenizer.ggml.padding_token_id": 0}  # else transformers takes Phi-3's 32000
            kw: dict = dict(metadata=pad)
            if qtype == "Q4_K_M":
                kw.update(types=_mixed_types(original), raw=_k_blocks)
            path = write_dense_gguf(
                where / f"{case}.gguf", original, folder, "F32" if kw.get("types") else qtype, **kw
            )
            arch = ARCH[original.config.model_type]
            if arch in TRANSFORMERS_READS:
                reference = AutoModelForCausalLM.from_pretrained(
                    str(where), gguf_file=path.name, attn_implementation="eager"
                ).eval()
            else:
                hf = _dequantized_folder(path, original, folder, tmp_path_factory.mktemp(f"hf-same-{case}"))
                reference = open_model(hf)
            made[case] = Case(path, arch, original, open_model(path), reference)
        return made[case]

    return get


@pytest.fixture(params=list(CASES))
def case(request, cases) -> Case:
    return cases(request.param)


def _logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        out = model(ids)
    return out[0] if isinstance(out, tuple) else out.logits


def _attention(model, ids) -> torch.Tensor:
    """[L, H, T, T] eager attention weights (transformers') or the trace's (ours)."""
    if isinstance(model, PreTrainedModel):
        with torch.no_grad():
            return torch.stack(model(ids, output_attentions=True).attentions)[:, 0]
    return torch.from_numpy(run_with_trace(model, ids, kinds=("pattern",)).stack("pattern"))


def _reference_model(case: Case):
    return case.reference.model if isinstance(case.reference, Checkpoint) else case.reference


def _ids(ckpt: Checkpoint, text: str, n: int) -> torch.Tensor:
    return torch.tensor([ckpt.tokenizer.encode(text)[:n]])


def test_logits_equal_reference(case, tricky_texts):
    assert case.ours.meta["architecture"] == case.arch
    worst = 0.0
    for text in tricky_texts:
        ids = _ids(case.ours, text, 48)
        expected = _logits(_reference_model(case), ids)
        assert expected.std().item() > 0.1  # uneven random weights: far from a constant
        worst = max(
            worst, ((_logits(case.ours.model, ids) - expected).abs().max() / expected.abs().max()).item()
        )
    assert worst <= 1e-4


def test_attention_equals_reference_past_the_window(case, tricky_texts):
    ids = _ids(case.ours, " ".join(tricky_texts), 24)
    window = case.ours.config.attention.sliding_window
    assert ids.shape[1] == 24 and (window is None or ids.shape[1] > 2 * window)
    theirs = _reference_model(case)
    expected = _attention(theirs, ids)
    ours = _attention(case.ours.model, ids)
    assert ours.shape == expected.shape
    assert (ours - expected).abs().max().item() <= 1e-5


@pytest.mark.parametrize("case_name", [c for c, (_, q) in CASES.items() if q == "F32"])
def test_an_f32_file_is_the_original_model(cases, case_name, tricky_texts):
    """The conversion round trip is exact: the F32 file opens as the model it was written from."""
    case = cases(case_name)
    ids = _ids(case.ours, tricky_texts[0], 24)
    expected = _logits(case.original, ids)
    assert ((_logits(case.ours.model, ids) - expected).abs().max() / expected.abs().max()).item() <= 1e-5


def test_what_each_architecture_implies(cases):
    """What the file does not say, taken from the architecture as llama.cpp takes it."""
    g2, g3 = cases("gemma2-F32").ours.config, cases("gemma3-F32").ours.config
    assert (
        g2.attention.window_pattern,
        g2.attention.sliding_window,
        g2.attention.attn_softcap,
        g2.core.final_softcap,
    ) == ("LG", 4, 50.0, 30.0)
    assert (
        g2.normalization.norm_position == "sandwich"
        and g2.core.tie_embeddings
        and g2.attention.attn_scale_dim is None
    )
    assert (
        g3.attention.window_pattern,
        g3.attention.sliding_window,
        g3.positional.rope_local_base,
        g3.positional.rope_base,
    ) == ("LLLLLG", 4, 1e4, 1e6)
    assert g3.attention.qk_rmsnorm and g3.attention.attn_softcap is None and g3.core.final_softcap is None
    phi3, olmo2 = cases("phi3-F32").ours.config, cases("olmo2-F32").ours.config
    assert phi3.attention.sliding_window is None and not phi3.core.tie_embeddings
    assert olmo2.normalization.norm_position == "output" and olmo2.attention.qk_norm_scope == "all"


def test_gemma3_global_rope_scaling_leaves_the_local_layers_unscaled(tmp_path, write_hf_family, tricky_texts):
    """Gemma 3 4B and up scale the global layers' RoPE (linear, ×8: ``rope.scaling.*``); the local
    layers keep θ = 10 000 unscaled, which the file does not say (transformers' GGUF loading reads no
    scaling: the reference is the model the F32 file was written from)."""
    rope = {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    }
    original = write_hf_family(tmp_path, "gemma3_text", rope_parameters=rope, **FAMILIES["gemma3_text"])
    ckpt = load_gguf(write_dense_gguf(tmp_path / "g.gguf", original, tmp_path))
    cfg = ckpt.config
    assert (
        cfg.positional.rope_scaling,
        cfg.positional.rope_factor,
        cfg.positional.rope_base,
        cfg.positional.rope_local_base,
    ) == (
        "linear",
        8.0,
        1e6,
        1e4,
    )
    ids = _ids(ckpt, " ".join(tricky_texts), 24)
    expected = _logits(original, ids)
    assert ((_logits(ckpt.model, ids) - expected).abs().max() / expected.abs().max()).item() <= 1e-5


@pytest.mark.parametrize("model_type, depth", [("gemma2", 46), ("gemma3_text", 62)])
def test_the_27b_depths_scale_queries_by_d_over_h(tmp_path, write_hf_family, model_type, depth):
    """The file holds no query scalar: llama.cpp scales scores by 1/√d_k, but by 1/√(d/H) for the 27B
    models (query_pre_attn_scalar 144 and 168), which it knows by their depth (46 and 62 layers)."""
    sizes = dict(hidden_size=64, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1)
    original = write_hf_family(
        tmp_path, model_type, num_hidden_layers=depth, head_dim=16, query_pre_attn_scalar=32,
        sliding_window=4, tie_word_embeddings=True, **sizes,
    )  # fmt: skip
    ckpt = load_gguf(write_dense_gguf(tmp_path / "g.gguf", original, tmp_path))
    assert ckpt.config.attention.attn_scale_dim == 32.0  # d / H, not the head size (16)
    ids = torch.tensor([list(range(5, 17))])
    expected = _logits(original, ids)
    assert ((_logits(ckpt.model, ids) - expected).abs().max() / expected.abs().max()).item() <= 1e-5


def test_mixed_quantization_file_holds_every_type(cases):
    case = cases("gemma3-Q4_K_M")
    types = set(read_header(case.path).tensors[n].type_name for n in read_header(case.path).tensors)
    assert types == {*MIXED, "F32"}
    assert all(t in case.ours.meta["quantization"] for t in MIXED)


@pytest.mark.parametrize("case_name", ["gemma3-Q4_K_M", "phi3-Q8_0", "olmo2-Q8_0"])
def test_kept_as_stored_equals_widened(cases, case_name, tricky_texts):
    """Kept as stored (Phi-3's fused matrices split by rows of the stored blocks), under the size check:
    the same logits as dequantized once, bit for bit."""
    case = cases(case_name)
    stored = load_gguf(case.path, stored=True)
    assert stored.meta.get("stored") or any("Stored" in type(m).__name__ for m in stored.model.modules())
    ids = _ids(case.ours, tricky_texts[0], 24)
    assert torch.equal(_logits(stored.model, ids), _logits(case.ours.model, ids))


# ---------------------------------------------------------------------------------------------
# refusals: one line, naming what is not implemented, never computed wrongly
# ---------------------------------------------------------------------------------------------
def test_phi3_longrope_is_refused_in_one_line(cases, tmp_path):
    case = cases("phi3-F32")
    rot = case.ours.config.d_head // 2
    factors = {"rope_factors_long.weight": np.ones(rot), "rope_factors_short.weight": np.ones(rot)}
    path = write_dense_gguf(
        tmp_path / "p.gguf", case.original, None, vocabulary=gemma_vocabulary(), extra_tensors=factors
    )
    with pytest.raises(CheckpointError) as err:
        load_gguf(path)
    assert str(err.value) == (
        "p.gguf: rope_factors_long.weight, rope_factors_short.weight (Phi-3's LongRoPE scaling) is not "
        "implemented"
    )
    assert not summarize_gguf(path)["opens"]


def test_olmo3_window_and_a_missing_tensor_are_refused_in_one_line(cases, tmp_path):
    olmo = write_dense_gguf(
        tmp_path / "o.gguf",
        cases("olmo2-F32").original,
        None,
        vocabulary=gemma_vocabulary(),
        metadata={"olmo2.attention.sliding_window": 4096},
    )
    with pytest.raises(
        CheckpointError, match=r"^o.gguf: olmo2.attention.sliding_window=4096 \(OLMo 3's local"
    ):
        load_gguf(olmo)
    gemma = write_dense_gguf(
        tmp_path / "g.gguf", cases("gemma3-F32").original, None, vocabulary=gemma_vocabulary(),
        drop=("blk.1.post_ffw_norm.weight",),
    )  # fmt: skip
    with pytest.raises(CheckpointError) as err:
        load_gguf(gemma)
    message = str(err.value)
    assert "\n" not in message and "blk.1.post_ffw_norm.weight" in message and "model.layers" not in message


# ---------------------------------------------------------------------------------------------
# Gemma's tokenizer: its vocabulary of 262,144 pieces, <end_of_turn>
# ---------------------------------------------------------------------------------------------
def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text())[1])


def _reset_peak_rss() -> int:
    """Reset this process's peak resident memory (Linux: ``clear_refs`` 5) to now; the KiB resident now."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pytest.skip("no resettable peak resident memory here (Linux's /proc/self/clear_refs)")
    return _status_kib("VmRSS")


def test_gemma3_with_gemmas_full_vocabulary_opens_in_reasonable_time_and_memory(tmp_path):
    """A Gemma 3 file with Gemma's 262,144-piece SentencePiece vocabulary (no merges: rebuilt from the
    pieces) opens in seconds, holding little beyond its embedding; <end_of_turn> ends a generation."""
    from transformers import AutoConfig

    tokens, types = gemma_vocabulary(262_144)
    cfg = AutoConfig.for_model(
        "gemma3_text", vocab_size=len(tokens), hidden_size=8, intermediate_size=16, num_hidden_layers=1,
        num_attention_heads=1, num_key_value_heads=1, head_dim=8, max_position_embeddings=64,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(cfg).eval()
    path = write_dense_gguf(tmp_path / "gemma-3-vocab.gguf", model, None, vocabulary=(tokens, types))
    rss_before = _reset_peak_rss()
    start = time.perf_counter()
    ckpt = load_gguf(path)
    took = time.perf_counter() - start
    grew = _status_kib("VmHWM") - rss_before
    assert took < 30, f"{took:.1f} s"
    assert grew < 400 * 1024, f"{grew / 1024:.0f} MiB"  # the embedding is 8 MiB; the pieces tens of MiB
    tok = ckpt.tokenizer
    assert tok.vocab_size == 262_144 and ckpt.config.core.vocab_size == 262_144
    assert tok.token_strings(sorted(tok.stop_ids)) == ["<eos>", "<end_of_turn>"]
    ids = tok.encode("hello world")
    assert ids[0] == 2 and tok.decode(ids[1:]) == "hello world"  # <bos>, then the text back
    assert tok.encode("<start_of_turn>user")[1] == tokens.index("<start_of_turn>")


# ---------------------------------------------------------------------------------------------
# local listings
# ---------------------------------------------------------------------------------------------
def test_lm_studio_lists_these_files_as_openable_with_family_and_parameters(cases, tmp_path):
    root = tmp_path / "lmstudio"
    for case_name in ("gemma3-F32", "phi3-F32", "olmo2-F32", "gemma2-Q8_0"):
        path = cases(case_name).path
        dest = root / "publisher" / f"{case_name}-GGUF" / path.name
        dest.parent.mkdir(parents=True)
        dest.write_bytes(path.read_bytes())
    found = {
        m.name: m
        for m in LocalScan(ollama=[], lmstudio=[root], hf_cache=[], packages=[], usable_memory=1 << 40).run()
    }
    for case_name in ("gemma3-F32", "phi3-F32", "olmo2-F32", "gemma2-Q8_0"):
        case, m = cases(case_name), found[case_name.split("-")[0]]
        assert m.source == LM_STUDIO and m.opens and not m.problem, m.problem
        assert m.family == case.arch
        assert m.n_params == case.ours.model.num_params()  # a tied head is stored once


def test_phi3_ends_a_turn_at_end_as_llama_cpp_does():
    """Phi-3's files name <|endoftext|> as EOS; a reply ends at <|end|>, which llama.cpp stops at by its
    text (as Gemma's <end_of_turn>, test above)."""
    from model.text.gguf_tokens import tokenizer_from_gguf

    specials = ["<unk>", "<s>", "</s>", "<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>"]
    tokens = specials + [f"<0x{b:02X}>" for b in range(256)] + list("abcdefgh\u2581")
    meta = {
        "general.architecture": "phi3",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [2, 3, 3, 3, 3, 3, 3] + [6] * 256 + [1] * 9,
        "tokenizer.ggml.scores": [0.0] * len(tokens),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 3,
    }
    tok = tokenizer_from_gguf(meta)
    assert tok.token_strings(sorted(tok.stop_ids)) == ["<|endoftext|>", "<|end|>"]
