"""Checkpoints: round trip, atomic replacement (even when killed mid-save), validation, no unpickling."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import model.io.checkpoint.saved as ckpt_mod
from model import atomic_dir
from model.config import GPTConfig
from model.io.checkpoint.saved import CheckpointError, load_checkpoint, save_checkpoint
from model.nn.gpt import init_model
from model.text.tokens import ByteTokenizer, CharTokenizer

ROOT = Path(__file__).resolve().parents[2]
TOK = CharTokenizer("abcdefghij")


def tiny(seed: int = 0, **kw):
    base = dict(vocab_size=10, context_length=16, n_layers=2, d_model=16, n_heads=2)
    base.update(kw)
    return init_model(GPTConfig(**base), seed=seed)


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"tie_embeddings": True, "n_kv_heads": 1, "norm": "rmsnorm", "bias": "none"},
        {"attn_scale": "learned", "positions": "rope", "mlp": "swiglu"},
    ],
)
def test_round_trip(tmp_path, kw):
    m = tiny(**kw)
    state = {"step": 7, "history": [{"step": 1, "train_loss": 2.5}], "tensors": {"a/b": torch.arange(5.0)}}
    save_checkpoint(tmp_path / "c", m, TOK, train_state=state, meta={"source": {"name": "task:copy"}})
    c = load_checkpoint(tmp_path / "c")
    assert c.config == m.config and c.tokenizer == TOK and same_weights(c.model, m)
    assert not c.model.training
    assert c.train_state["step"] == 7 and c.train_state["history"] == state["history"]
    assert torch.equal(c.train_state["tensors"]["a/b"], torch.arange(5.0))
    assert c.meta["source"] == {"name": "task:copy"} and c.meta["format"] == ckpt_mod.FORMAT
    assert GPTConfig.load(tmp_path / "c" / "config.json") == m.config  # config.json stands on its own
    assert load_checkpoint(tmp_path / "c", with_train_state=False).train_state is None


def test_save_replaces_an_existing_checkpoint_and_leaves_no_temp(tmp_path):
    save_checkpoint(tmp_path / "c", tiny(0), TOK)
    new = tiny(1)
    save_checkpoint(tmp_path / "c", new, CharTokenizer("vwxyz"), train_state={"step": 1})
    c = load_checkpoint(tmp_path / "c")
    assert same_weights(c.model, new) and c.tokenizer == CharTokenizer("vwxyz")
    assert leftovers(tmp_path) == []


def test_failure_in_the_middle_of_a_save_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    old = tiny(0)
    save_checkpoint(tmp_path / "c", old, TOK)
    real = ckpt_mod._write_json
    calls = []

    def failing(path, obj):
        calls.append(path.name)
        if path.name == "tokenizer.json":  # after config.json and model.safetensors were written
            raise OSError(28, "No space left on device")
        return real(path, obj)

    monkeypatch.setattr(ckpt_mod, "_write_json", failing)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path / "c", tiny(1), TOK)
    assert calls == ["config.json", "tokenizer.json"]
    assert same_weights(load_checkpoint(tmp_path / "c").model, old)
    assert leftovers(tmp_path) == []


def test_a_save_killed_halfway_leaves_the_old_checkpoint_loadable(tmp_path):
    """A child process is SIGKILLed while writing model.safetensors over an existing checkpoint."""
    old = tiny(0)
    save_checkpoint(tmp_path / "c", old, TOK)
    child = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        import model.io.checkpoint.saved as ck
        from model.config import GPTConfig
        from model.nn.gpt import init_model
        from model.text.tokens import CharTokenizer

        real_write = ck.write_synced

        def half_then_die(path, data):
            if path.name != "model.safetensors":
                return real_write(path, data)
            with open(path, "wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
            os.kill(os.getpid(), signal.SIGKILL)

        ck.write_synced = half_then_die
        cfg = GPTConfig(vocab_size=10, context_length=16, n_layers=2, d_model=16, n_heads=2)
        m = init_model(cfg, seed=1)
        ck.save_checkpoint({str(tmp_path / "c")!r}, m, CharTokenizer("abcdefghij"))
        """
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    temps = [name for name in leftovers(tmp_path) if name.startswith(".c.tmp-")]
    assert len(temps) == 1  # it really died mid-save: config.json written, model.safetensors half
    assert sorted(p.name for p in (tmp_path / temps[0]).iterdir()) == ["config.json", "model.safetensors"]
    assert same_weights(load_checkpoint(tmp_path / "c").model, old)
    save_checkpoint(tmp_path / "c", tiny(2), TOK)  # the next save clears the dead save's temp dir
    assert leftovers(tmp_path) == []


def test_crash_between_the_two_renames_of_the_fallback_still_loads(tmp_path, monkeypatch):
    """Where an atomic exchange is unavailable: rename aside, then rename in; a crash in between."""
    old = tiny(0)
    save_checkpoint(tmp_path / "c", old, TOK)
    monkeypatch.setattr(atomic_dir, "exchange", lambda a, b: False)
    real_rename = os.rename
    calls = []

    def crash_on_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process dies here
        real_rename(src, dst)

    monkeypatch.setattr(ckpt_mod.os, "rename", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "c", tiny(1), TOK)
    monkeypatch.setattr(ckpt_mod.os, "rename", real_rename)
    assert not (tmp_path / "c").exists()
    assert same_weights(load_checkpoint(tmp_path / "c").model, old)


def test_refuses_to_overwrite_a_folder_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "thesis.txt").write_text("years of work")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        save_checkpoint(tmp_path / "docs", tiny(), TOK)
    assert (tmp_path / "docs" / "thesis.txt").read_text() == "years of work"


@pytest.fixture
def saved(tmp_path) -> Path:
    save_checkpoint(tmp_path / "c", tiny(), TOK, train_state={"step": 3, "tensors": {"x": torch.ones(3)}})
    return tmp_path / "c"


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json"])
def test_missing_file_is_named(saved, name):
    (saved / name).unlink()
    with pytest.raises(CheckpointError, match=f"missing {name}"):
        load_checkpoint(saved)


def test_missing_optimizer_file_is_named(saved):
    (saved / "optimizer.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"missing optimizer\.safetensors"):
        load_checkpoint(saved)
    assert load_checkpoint(saved, with_train_state=False).train_state is None


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")


@pytest.mark.parametrize("keep_meta", [True, False])
def test_truncated_safetensors_is_named(saved, keep_meta):
    if not keep_meta:
        (saved / "meta.json").unlink()  # no size record: safetensors itself must notice
    data = (saved / "model.safetensors").read_bytes()
    (saved / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors is truncated or corrupt"):
        load_checkpoint(saved)


def test_corrupt_bytes_are_caught_by_the_checksum(saved):
    data = bytearray((saved / "model.safetensors").read_bytes())
    data[-5] ^= 0xFF  # inside a tensor: still a well-formed file
    (saved / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"model\.safetensors is corrupt"):
        load_checkpoint(saved)


def test_garbage_header_is_named(saved):
    (saved / "meta.json").unlink()
    (saved / "model.safetensors").write_bytes(b"\x00" * 8 + b"this is not a header")
    with pytest.raises(CheckpointError, match=r"model\.safetensors is truncated or corrupt"):
        load_checkpoint(saved)


def test_config_that_does_not_match_the_tensors_is_named(saved):
    cfg = json.loads((saved / "config.json").read_text())
    cfg["d_model"] = 32
    (saved / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(
        CheckpointError, match=r"does not match config.json: .*tok_emb.weight has shape \[10, 16\]"
    ):
        load_checkpoint(saved)
    cfg.update(d_model=16, n_layers=3)
    (saved / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"missing blocks\.2"):
        load_checkpoint(saved)


def test_invalid_config_and_json_are_named(saved):
    (saved / "config.json").write_text('{"n_heads": 3, "vocab_size": 10, "d_model": 16')
    with pytest.raises(CheckpointError, match=r"config\.json .* not valid JSON"):
        load_checkpoint(saved)
    (saved / "config.json").write_text('{"n_heads": 3, "vocab_size": 10, "d_model": 16}')
    with pytest.raises(
        CheckpointError, match=r"config\.json is not a valid model config: d_model=16 is not divisible"
    ):
        load_checkpoint(saved)


def test_unknown_tokenizer_is_named(saved):
    (saved / "tokenizer.json").write_text('{"type": "wordpiece"}')
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: unknown tokenizer type 'wordpiece'"):
        load_checkpoint(saved)
    (saved / "tokenizer.json").write_text(json.dumps(ByteTokenizer().to_dict()))  # 256 tokens > vocab 10
    with pytest.raises(CheckpointError, match=r"256 tokens but config\.json has vocab_size=10"):
        load_checkpoint(saved)


def test_non_finite_weights_are_refused(tmp_path):
    m = tiny()
    with torch.no_grad():
        m.blocks[0].attn.q_proj.weight[0, 0] = float("nan")
    save_checkpoint(tmp_path / "c", m, TOK)
    with pytest.raises(CheckpointError, match=r"blocks\.0\.attn\.q_proj\.weight holds NaN"):
        load_checkpoint(tmp_path / "c")


class _Payload:
    """Unpickling this object calls ``Path.touch(marker)``: what a malicious checkpoint would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_pickle_payload_is_never_executed(saved, tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"tok_emb.weight": _Payload(marker)})
    pickle.loads(payload)  # the payload is live: plain unpickling runs it ...
    assert marker.exists()
    marker.unlink()
    torch_payload = saved.parent / "payload.pt"
    torch.save({"state": _Payload(marker)}, torch_payload)
    (saved / "model.pt").write_bytes(torch_payload.read_bytes())  # decoy files are never opened
    (saved / "pytorch_model.bin").write_bytes(payload)
    assert load_checkpoint(saved).config.core.vocab_size == 10
    for data in (payload, torch_payload.read_bytes()):  # ... and disguised as the weights file
        (saved / "model.safetensors").write_bytes(data)
        with pytest.raises(CheckpointError, match=r"model\.safetensors is"):
            load_checkpoint(saved)
        (saved / "meta.json").unlink(missing_ok=True)
        with pytest.raises(CheckpointError, match=r"model\.safetensors is truncated or corrupt"):
            load_checkpoint(saved)
    (saved / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"missing model\.safetensors"):
        load_checkpoint(saved)
    assert not marker.exists()
