"""Probe frames: the attention of the probe prompt at one training step, and their bounded history.

A :class:`ProbeFrame` is what travels from the trainer to the screen (numpy only, float16, a fresh
copy the optimizer can never touch); :class:`FrameHistory` keeps a bounded, evenly spread selection
of them for the step scrubber. When a training run probes is :class:`model.train.probes.Prober`'s
to decide (a trainer callback); it makes its frames here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from model.text.tokens import visible


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


@functools.lru_cache(maxsize=8)
def _tril(T: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the lower triangle (diagonal included) of a [T, T] matrix."""
    return np.tril_indices(T)


def pack_causal(weights: np.ndarray) -> np.ndarray | None:
    """The lower triangles of [..., T, T] ``weights`` as [..., T (T + 1) / 2] (a copy), or None when
    some weight above the diagonal is not zero (a mask that is not causal): half the bytes, lossless."""
    T = weights.shape[-1]
    rows, cols = _tril(T)
    if np.triu(weights, 1).any():
        return None
    return np.ascontiguousarray(weights[..., rows, cols])


def unpack_causal(packed: np.ndarray, T: int) -> np.ndarray:
    """Inverse of :func:`pack_causal`: [..., T (T + 1) / 2] → [..., T, T] with zeros above the diagonal."""
    rows, cols = _tril(T)
    out = np.zeros((*packed.shape[:-1], T, T), dtype=packed.dtype)
    out[..., rows, cols] = packed
    return out


def carried_mask(weights: np.ndarray) -> np.ndarray | None:
    """The mask attention ``weights`` [..., T, T] carry, as bool [T, T] (True = the query may see the
    key), or None when they show none.

    A masked pair's weight is exactly 0 in every head (softmax of −∞), so the mask is read from the
    data: *causal* when every weight above the diagonal is 0; within that, a *sliding window* of ``W``
    keys (2 ≤ W < T) when every pair ``W`` or more tokens apart is 0 in every head too. A weight that
    merely rounds to 0 leaves no such pattern across every head and query, so it is never taken for
    the mask. One pass over the weights, on their bits (fast for float16 and float32).
    """
    w = np.asarray(weights)
    if w.ndim < 2 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 2:
        return None
    T = w.shape[-1]
    flat = w.reshape(-1, T, T)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}.get(w.dtype.itemsize)
    if w.dtype.kind == "f" and bits is not None and flat.flags.c_contiguous:
        # weights are ≥ 0: a pair is 0 in every head iff the OR of its bits is 0 (−0.0 counts as non-zero)
        seen = np.bitwise_or.reduce(flat.view(bits), axis=0) != 0
    else:
        seen = (flat != 0).any(axis=0)
    if np.triu(seen, 1).any():
        return None  # something above the diagonal is seen: no causal mask
    rows, cols = np.nonzero(seen)
    window = int((rows - cols).max()) + 1 if rows.size else T
    q = np.arange(T)
    if 2 <= window < T:
        return (q[None, :] <= q[:, None]) & (q[:, None] - q[None, :] < window)
    return q[None, :] <= q[:, None]


@dataclass
class _KeptFrame:
    """A frame as the history keeps it: causal weights packed to their lower triangles."""

    step: int
    prompt: str
    tokens: list[str]
    data: np.ndarray
    T: int
    packed: bool

    @classmethod
    def of(cls, frame: ProbeFrame) -> _KeptFrame:
        w = frame.weights
        T = w.shape[-1] if w.ndim >= 2 and w.shape[-1] == w.shape[-2] else 0
        packed = pack_causal(w) if T else None
        data = packed if packed is not None else w
        return cls(frame.step, frame.prompt, frame.tokens, data, T, packed is not None)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def frame(self) -> ProbeFrame:
        weights = unpack_causal(self.data, self.T) if self.packed else self.data
        return ProbeFrame(step=self.step, prompt=self.prompt, tokens=self.tokens, weights=weights)


class FrameHistory:
    """A bounded history of probe frames, spread over the whole run, for the step scrubber.

    Every ``stride``-th frame offered is kept. When the kept frames exceed ``max_bytes`` or
    ``max_frames``, every other one is dropped (the first and newest survive) and ``stride`` doubles,
    so the history always spans the run from its first step with roughly even spacing and bounded
    memory. Causal frames are kept packed (their lower triangles: half the bytes, lossless); indexing
    gives a :class:`ProbeFrame` unpacked afresh. 256 frames are more positions than a scrubber's
    width can tell apart; they cost about 26 MiB for the default 4 × 4 model and its 80-token probe.
    """

    def __init__(self, max_bytes: int = 64 * 2**20, stride: int = 1, max_frames: int = 256):
        self.max_bytes = int(max_bytes)
        self.max_frames = int(max_frames)
        self.stride = max(1, int(stride))
        self._initial_stride = self.stride
        self.frames: list[_KeptFrame] = []
        self._offered = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, i: int) -> ProbeFrame:
        return self.frames[i].frame()

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
        kept = _KeptFrame.of(frame)
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

    def steps(self) -> list[int]:
        return [f.step for f in self.frames]


def make_probe_frame(trace: Any, tokenizer: Any, step: int, prompt: str) -> ProbeFrame:
    """Turn a probe :class:`~model.interp.trace.Trace` into a :class:`ProbeFrame` (fresh float16 copy)."""
    weights = np.ascontiguousarray(trace.stack("pattern"), dtype=np.float16)
    ids = [int(i) for i in trace.tokens[0].tolist()]
    labels = [visible(s) for s in tokenizer.token_strings(ids)]
    return ProbeFrame(step=int(step), prompt=prompt, tokens=labels, weights=weights)


def trace_prompt(model: Any, tokenizer: Any, prompt: str, *, kinds=("pattern",), dtype=None, layers=None):
    """A :class:`~model.interp.trace.Trace` of ``prompt`` with the model in eval mode (its mode restored).

    Characters the tokenizer lacks are replaced (a probe never fails on its prompt); a prompt longer
    than the context keeps its last ``context_length`` tokens. ``dtype`` None → float16. The caller
    holds ``compute_lock``.
    """
    import torch

    from model.interp.trace import run_with_trace

    ids = tokenizer.encode(prompt, errors="replace")
    if not ids:
        raise ValueError("the probe prompt is empty")
    ids = ids[-model.config.context_length :]
    return run_with_trace(model, ids, kinds=kinds, layers=layers, dtype=dtype or torch.float16)


def probe_frame(model: Any, tokenizer: Any, prompt: str, step: int) -> ProbeFrame:
    """The :class:`ProbeFrame` of an idle model (no trainer): ``trace_prompt`` then a numpy copy."""
    return make_probe_frame(trace_prompt(model, tokenizer, prompt), tokenizer, step, prompt)
