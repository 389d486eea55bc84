"""Probe frames: the attention of the probe prompt at one training step, and their bounded history.

A :class:`ProbeFrame` is what travels from the trainer to the screen (numpy only, float16, a fresh
copy the optimizer can never touch); :class:`FrameHistory` keeps a bounded, evenly spread selection
of them for the step scrubber.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from model.tokens import visible


@dataclass
class ProbeFrame:
    """The attention of the probe prompt at one training step, ready to draw.

    ``weights``: float16 numpy [L, H, T, T], rows = queries, columns = keys (a fresh copy the
    optimizer can never touch). ``tokens``: the visible label of each of the T tokens.
    """

    step: int
    prompt: str
    tokens: list[str]
    weights: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.weights.nbytes)


class FrameHistory:
    """A bounded history of probe frames, spread over the whole run, for the step scrubber.

    Every ``stride``-th frame offered is kept. When the kept frames exceed ``max_bytes``, every
    other one is dropped (the first and newest survive) and ``stride`` doubles, so the history
    always spans the run from its first step with roughly even spacing and bounded memory.
    """

    def __init__(self, max_bytes: int = 64 * 2**20, stride: int = 1, max_frames: int = 2000):
        self.max_bytes = int(max_bytes)
        self.max_frames = int(max_frames)
        self.stride = max(1, int(stride))
        self._initial_stride = self.stride
        self.frames: list[ProbeFrame] = []
        self._offered = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> ProbeFrame:
        return self.frames[i]

    def clear(self) -> None:
        self.frames.clear()
        self._offered = 0
        self.nbytes = 0
        self.stride = self._initial_stride

    def offer(self, frame: ProbeFrame) -> bool:
        """Keep ``frame`` if it falls on the stride; returns whether it was kept."""
        keep = self._offered % self.stride == 0
        self._offered += 1
        if not keep:
            return False
        if frame.nbytes > self.max_bytes:
            return False
        self.frames.append(frame)
        self.nbytes += frame.nbytes
        while (self.nbytes > self.max_bytes or len(self.frames) > self.max_frames) and len(self.frames) > 2:
            kept = self.frames[::2]
            if kept[-1] is not self.frames[-1]:
                kept.append(self.frames[-1])
            self.frames = kept
            self.nbytes = sum(f.nbytes for f in self.frames)
            self.stride *= 2
        return True

    def steps(self) -> list[int]:
        return [f.step for f in self.frames]


def make_probe_frame(trace: Any, tokenizer: Any, step: int, prompt: str) -> ProbeFrame:
    """Turn a probe :class:`~model.trace.Trace` into a :class:`ProbeFrame` (fresh float16 copy)."""
    weights = np.ascontiguousarray(trace.stack("weights"), dtype=np.float16)
    ids = [int(i) for i in trace.tokens[0].tolist()]
    labels = [visible(s) for s in tokenizer.token_strings(ids)]
    return ProbeFrame(step=int(step), prompt=prompt, tokens=labels, weights=weights)
