"""Probe frames: the attention of a prompt at one moment of a model's life, and their bounded history.

A probe frame is an :class:`~model.interp.frame.AttentionFrame` with float16 weights (a fresh copy
the optimizer can never touch): what travels from the trainer to the screen, what the History tab
traces at each revision and what Compare keeps of each run. :func:`trace_probe` is how each of them
reads its prompt: :func:`~model.interp.prompt.encode_prompt`'s one rule (the last tokens that fit the
context, the tokenizer's BOS kept; characters the vocabulary lacks replaced, so a probe never fails
on its prompt) and :func:`~model.interp.trace.run_with_trace`. :class:`FrameHistory` keeps a
bounded, evenly spread selection of frames for the step scrubber, packed
(:meth:`~model.interp.frame.AttentionFrame.pack`). When a training run probes is
:class:`model.train.probes.Prober`'s to decide (a trainer callback); it makes its frames here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from model.interp.frame import AttentionFrame, PackedFrame
from model.interp.prompt import Prompt, encode_prompt
from model.interp.trace import Trace, run_with_trace


class FrameHistory:
    """A bounded history of probe frames, spread over the whole run, for the step scrubber.

    Every ``stride``-th frame offered is kept. When the kept frames exceed ``max_bytes`` or
    ``max_frames``, every other one is dropped (the first and newest survive) and ``stride`` doubles,
    so the history always spans the run from its first step with roughly even spacing and bounded
    memory. Frames are kept packed (:class:`~model.interp.frame.PackedFrame`: a causal frame's lower
    triangles, half the bytes, lossless); indexing gives an :class:`AttentionFrame` unpacked afresh.
    256 frames are more positions than a scrubber's width can tell apart; they cost about 26 MiB for
    the default 4 × 4 model and its 80-token probe.
    """

    def __init__(self, max_bytes: int = 64 * 2**20, stride: int = 1, max_frames: int = 256):
        self.max_bytes = int(max_bytes)
        self.max_frames = int(max_frames)
        self.stride = max(1, int(stride))
        self._initial_stride = self.stride
        self.frames: list[PackedFrame] = []
        self._offered = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> AttentionFrame:
        return self.frames[i].unpack()

    def clear(self) -> None:
        self.frames.clear()
        self._offered = 0
        self.nbytes = 0
        self.stride = self._initial_stride

    def offer(self, frame: AttentionFrame) -> bool:
        """Keep ``frame`` if it falls on the stride; returns whether it was kept."""
        keep = self._offered % self.stride == 0
        self._offered += 1
        if not keep:
            return False
        kept = frame.pack()
        if kept.nbytes > self.max_bytes:
            return False
        self.frames.append(kept)
        self.nbytes += kept.nbytes
        while (self.nbytes > self.max_bytes or len(self.frames) > self.max_frames) and len(self.frames) > 2:
            thinned = self.frames[::2]
            if thinned[-1] is not self.frames[-1]:
                thinned.append(self.frames[-1])
            self.frames = thinned
            self.nbytes = sum(f.nbytes for f in self.frames)
            self.stride *= 2
        return True

    def steps(self) -> list[int | None]:
        return [f.step for f in self.frames]


def probe_prompt(model: Any, tokenizer: Any, text: str) -> Prompt:
    """``text`` as a probe reads it: the last ``context_length`` tokens, BOS kept, characters the
    vocabulary lacks replaced (:func:`~model.interp.prompt.encode_prompt`); PromptError when empty."""
    return encode_prompt(tokenizer, text, model.config.core.context_length, errors="replace")


def trace_probe(model: Any, tokenizer: Any, text: str, *, kinds=("pattern",)) -> tuple[Prompt, Trace]:
    """The :class:`Prompt` of ``text`` (:func:`probe_prompt`) and its float16
    :class:`~model.interp.trace.Trace` through ``model`` (eval mode, its mode restored). The caller
    holds ``compute_lock``."""
    prompt = probe_prompt(model, tokenizer, text)
    return prompt, run_with_trace(model, prompt, kinds=kinds, dtype=torch.float16)


def frame_of(trace: Trace, prompt: Prompt, *, step: int | None = None, label: str = "") -> AttentionFrame:
    """The probe frame of a trace: its ``pattern`` [L, H, T, T] as a fresh float16 numpy copy."""
    weights = np.ascontiguousarray(trace.stack("pattern"), dtype=np.float16)
    labels = list(prompt.labels)
    return AttentionFrame(prompt=prompt.text, labels=labels, weights=weights, step=step, label=label)


def probe_frame(model: Any, tokenizer: Any, text: str, step: int | None = None) -> AttentionFrame:
    """The probe frame of an idle model (no trainer): :func:`trace_probe`, then :func:`frame_of`."""
    prompt, trace = trace_probe(model, tokenizer, text)
    return frame_of(trace, prompt, step=step)


__all__ = ["FrameHistory", "frame_of", "probe_frame", "probe_prompt", "trace_probe"]
