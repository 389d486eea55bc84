"""transformers' own reading of SmolLM2-135M-Instruct's GGUF file: the reference of the real-model
suite (tests/model/test_real_model.py, tests/model/test_gguf_tokens.py), computed in a process of its
own while the rest of the suite runs.

Loading the file with ``transformers`` takes ~12 s (gguf's Python reader, then dequantizing) and its
eager runs another ~15 s; the suite needs only their outputs. :func:`start` launches
``python -m tests.smollm2_reference DIR`` (tests/conftest.py does it as soon as the collected tests
need the reference), on one thread so that the tests keep the other core; :meth:`Job.result` waits
for it and returns a :class:`Reference`. What it computes, with ``transformers`` alone (our package
is used only for the repeated random prompt's token ids, a pure function of its arguments):

* the tokenizer: ids of every text the suite encodes, the backend's JSON, its size and special ids,
  the chat template applied;
* per prompt (prose, code, odd Unicode, the chat prompt, 1000+ tokens): logits [T, V] and the eager
  attention weights of :data:`COMPARED_LAYERS` [layers, H, T, T];
* the attention of every layer on the repeated random prompt the Metrics page measures induction on;
* 20 greedy tokens after the chat prompt, and their text; and the greedy answer as a user gets it,
  ending at the model's end-of-turn token.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.texts import CHAT, CODE, GGUF_TRICKY, ODD, PROSE, SHORT_CHAT, TRICKY_TEXTS, long_text

#: The layers whose attention is compared, per prompt (every layer but on the 1000+ token one:
#: all 30 layers of 1000+ tokens would be 1 GB).
COMPARED_LAYERS = {
    "prose": tuple(range(30)),
    "code": tuple(range(30)),
    "odd": tuple(range(30)),
    "chat": tuple(range(30)),
    "long": (0, 14, 29),
}
#: Greedy tokens generated after the chat prompt
GREEDY_TOKENS = 20


def encoded_texts() -> list[str]:
    """Every text whose ids the suite compares."""
    return [
        PROSE,
        CODE,
        ODD,
        long_text(),
        *TRICKY_TEXTS,
        *GGUF_TRICKY,
        "hi",
        "<|im_start|>user\nhi<|im_end|>",
    ]


# ---------------------------------------------------------------------------------------------
# the reference process
# ---------------------------------------------------------------------------------------------
def _load(path: Path):
    """``(model, tokenizer)``: transformers' GGUF loading of ``path`` (eager attention).

    transformers reads the header with ``gguf.GGUFReader`` twice (config, then weights) and rebuilds
    gguf's tensor-name table once per tensor; both are pure functions of their arguments, so they are
    cached while it loads. What it computes is unchanged."""
    import gguf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    readers: dict = {}
    real_reader, real_map = gguf.GGUFReader, gguf.get_tensor_name_map

    def reader(p, *args, **kwargs):
        key = (str(p), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = real_reader(p, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(real_map)
    try:
        folder, name = str(path.parent), path.name
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = real_reader, real_map
    return model.eval(), tokenizer


def _run(model, ids: list[int], layers) -> tuple[np.ndarray, np.ndarray]:
    """Logits [T, V] and the eager attention weights of ``layers`` [len(layers), H, T, T]."""
    import torch

    taken: dict[int, torch.Tensor] = {}
    handles = [
        model.model.layers[layer].self_attn.register_forward_hook(
            lambda module, args, kwargs, out, layer=layer: taken.__setitem__(layer, out[1][0]),
            with_kwargs=True,
        )
        for layer in layers
    ]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
    finally:
        for h in handles:
            h.remove()
    return logits.numpy(), torch.stack([taken[layer] for layer in layers]).numpy()


def compute(gguf_path: Path, out: Path) -> None:
    """Write every output of the module docstring into the folder ``out``; ``done.json`` last."""
    import torch

    from model.interp.analysis.heads import repeated_sequence
    from model.interp.measures import INDUCTION_PERIOD

    torch.set_num_threads(1)
    model, tok = _load(gguf_path)
    chat_text = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    texts = [*encoded_texts(), chat_text]
    info: dict = {
        "ids": {text: tok(text)["input_ids"] for text in texts},
        "backend_json": tok.backend_tokenizer.to_str(),
        "vocab_len": len(tok),
        "special_ids": sorted(i for i, t in tok.added_tokens_decoder.items() if t.special),
        "chat_text": chat_text,
        "prompts": {},
    }
    prompts = {"prose": PROSE, "code": CODE, "odd": ODD, "chat": chat_text, "long": long_text()}
    for name, text in prompts.items():
        ids = info["ids"][text]
        logits, weights = _run(model, ids, COMPARED_LAYERS[name])
        np.save(out / f"{name}.logits.npy", logits)
        np.save(out / f"{name}.weights.npy", weights)
        info["prompts"][name] = ids
    period = min(INDUCTION_PERIOD, model.config.max_position_embeddings // 2)
    rp = repeated_sequence(model.config.vocab_size, period)
    info["repeated"] = {"ids": rp.tokens.tolist(), "period": period}
    np.save(out / "repeated.weights.npy", _run(model, rp.tokens.tolist(), range(30))[1])
    short = tok.apply_chat_template(SHORT_CHAT, tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tok(short)["input_ids"]])
    with torch.no_grad():  # as a user runs it: generation stops at the end-of-turn token
        answer = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=60, do_sample=False)
    info["answer"] = answer[0, ids.shape[1] :].tolist()
    info["answer_text"] = tok.decode(answer[0, ids.shape[1] :])
    ids = torch.tensor([info["ids"][chat_text]])
    model.generation_config.eos_token_id = None  # GREEDY_TOKENS tokens whatever comes
    with torch.no_grad():
        greedy = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=GREEDY_TOKENS,
            do_sample=False,
            pad_token_id=2,
        )
    info["greedy"] = greedy[0].tolist()
    info["greedy_reply"] = tok.decode(greedy[0, ids.shape[1] :])
    (out / "done.json").write_text(json.dumps(info), encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# the suite's side
# ---------------------------------------------------------------------------------------------
@dataclass
class Reference:
    """What :func:`compute` wrote (see the module docstring), read back."""

    folder: Path
    info: dict

    def encode(self, text: str) -> list[int]:
        """transformers' ids of ``text`` (one of :func:`encoded_texts` or the chat text)."""
        return self.info["ids"][text]

    @property
    def chat_text(self) -> str:
        return self.info["chat_text"]

    def prompt_ids(self, name: str) -> list[int]:
        return self.info["prompts"][name]

    def run(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(logits [T, V], weights [layers, H, T, T]) of prompt ``name``, or of ``"repeated"`` (weights of
        every layer; logits empty)."""
        weights = np.load(self.folder / f"{name}.weights.npy")
        logits = self.folder / f"{name}.logits.npy"
        return (np.load(logits) if logits.exists() else np.empty(0)), weights


class Job:
    """The reference process, computed once per test run in ``folder``, a folder all of the run's
    processes share (``make test``'s two xdist workers both collect the real-model tests; before, each
    started its own ~25 s reference). An exclusive ``flock`` on ``lock`` is the claim: the first process
    to take it finds no ``claimed`` mark, marks it and starts the computation, which inherits the lock
    and holds it for its whole life; every other process finds it held, or finds the mark, and waits
    for the lock in :meth:`result`. The kernel drops the lock when the computation ends, however it
    ends, so no one waits on a dead process and no one polls."""

    def __init__(self, gguf_path: Path, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.out = self.folder / "out"
        self.proc: subprocess.Popen | None = None
        self._reference: Reference | None = None
        lock = os.open(self.folder / "lock", os.O_CREAT | os.O_RDWR)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another process holds the claim: its computation runs
            if (self.folder / "claimed").exists():
                return  # already computed (the lock is free again)
            (self.folder / "claimed").touch()
            self.out.mkdir()
            root = Path(__file__).resolve().parent.parent
            env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
            with open(self.folder / "log.txt", "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.smollm2_reference", str(gguf_path), str(self.out)],
                    cwd=root,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(lock,),  # the child holds the lock (the same open file) until it exits
                )
            (self.folder / "pid").write_text(str(self.proc.pid), encoding="utf-8")
        finally:
            os.close(lock)  # ours only: the child's copy keeps the lock

    def result(self, timeout: float = 900) -> Reference:
        """Wait for the computation (at most ``timeout`` seconds) and read what it wrote."""
        if self._reference is None:
            t0 = time.monotonic()
            lock = os.open(self.folder / "lock", os.O_RDONLY)
            try:  # flock has no timeout: it blocks in a thread that is given up on after ``timeout``
                waiter = threading.Thread(target=fcntl.flock, args=(lock, fcntl.LOCK_SH), daemon=True)
                waiter.start()
                waiter.join(timeout)
                if waiter.is_alive():
                    raise RuntimeError(f"the transformers reference took over {timeout:.0f} s")
            finally:
                os.close(lock)
            if self.proc is not None:
                self.proc.wait()  # reap it (it has ended: its lock is free)
            done = self.out / "done.json"
            if not done.exists():
                log = self.folder / "log.txt"
                tail = log.read_bytes().decode(errors="replace")[-3000:] if log.exists() else ""
                raise RuntimeError(f"the transformers reference failed:\n{tail}")
            self.waited = time.monotonic() - t0
            self._reference = Reference(self.out, json.loads(done.read_text(encoding="utf-8")))
        return self._reference


def shared_folder() -> Path:
    """The folder of this test run's reference: one per run, the same in every xdist worker (the
    controller names it in :data:`FOLDER_ENV` before it starts them, :func:`make_shared_folder`)."""
    return Path(os.environ[FOLDER_ENV])


def make_shared_folder() -> Path:
    """A fresh folder for this run's reference, named in the environment the workers inherit."""
    folder = Path(tempfile.mkdtemp(prefix="smollm2-reference-"))
    os.environ[FOLDER_ENV] = str(folder)
    return folder


def remove(folder: Path) -> None:
    """End the computation if it still runs and remove ``folder`` (the run's controller, at its end)."""
    import shutil
    import signal

    pid = folder / "pid"
    if pid.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid.read_text(encoding="utf-8")), signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


#: The environment variable naming the run's shared folder
FOLDER_ENV = "ATTENTION_LAB_TEST_REFERENCE_DIR"


def start(gguf_path: Path) -> Job:
    """This run's reference job: started here unless another process of the run started it."""
    return Job(gguf_path, shared_folder())


if __name__ == "__main__":
    compute(Path(sys.argv[1]), Path(sys.argv[2]))
