"""The attention of one prompt at one point of a model's life: :class:`AttentionFrame`.

One type for what probes, the History tab, Compare and the Attention tab pass around: the prompt, its
tokens' visible labels, every head's pattern ``weights`` [L, H, T, T] (rows = queries, columns =
keys), and where it was taken: a training ``step`` and/or a ``label`` (a Hub revision, a run's name).
``metrics`` holds per-head scores [L, H] by name when they were measured (History, Compare).

One packing for storage (:meth:`AttentionFrame.pack` → :class:`PackedFrame`, and its plain numpy
arrays :meth:`AttentionFrame.to_arrays` / :meth:`AttentionFrame.from_arrays`, no pickles): causal
weights are kept as their lower triangles (half the bytes, lossless: :func:`pack_causal`). The
scrubber's history keeps its frames packed so in memory; a run folder's probes and the History tab's
trace cache are .npz files of those arrays. (The comparison file is JSON: it keeps its own layout,
``model.compare.comparison``, so files written before open as they did.)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np


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


@dataclass(kw_only=True)
class AttentionFrame:
    """Every head's attention on one prompt (see the module docstring).

    ``weights`` [L, H, T, T] (float16 or float32 numpy, a copy nothing else changes); ``labels`` [T]
    the visible label of each token; ``step`` the training step (None: not known); ``label`` what
    else names the moment (a revision, a run); ``metrics`` {name: [L, H]}.
    """

    prompt: str
    labels: list[str]
    weights: np.ndarray
    step: int | None = None
    label: str = ""
    metrics: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def T(self) -> int:
        return int(self.weights.shape[-1])

    @property
    def nbytes(self) -> int:
        return int(self.weights.nbytes)

    def head(self, layer: int, head: int) -> np.ndarray:
        """One head's weights [T, T] as float32."""
        return np.asarray(self.weights[layer, head], dtype=np.float32)

    # ---- the one packing --------------------------------------------------------------------
    def pack(self) -> PackedFrame:
        """This frame as storage keeps it: causal weights as their lower triangles (lossless)."""
        w = self.weights
        T = int(w.shape[-1]) if w.ndim >= 2 and w.shape[-1] == w.shape[-2] else 0
        packed = pack_causal(w) if T else None
        return PackedFrame(
            prompt=self.prompt,
            labels=self.labels,
            step=self.step,
            label=self.label,
            metrics=self.metrics,
            data=packed if packed is not None else w,
            T=T,
            packed=packed is not None,
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for an .npz file (no pickles): :meth:`pack`'s, see :meth:`PackedFrame.arrays`."""
        return self.pack().arrays()

    @classmethod
    def from_arrays(cls, arrays, where: str = "frame") -> AttentionFrame:
        """The frame :meth:`to_arrays` wrote; also files written before ``packed`` existed (their
        ``weights`` are [L, H, T, T]). A malformed one is a ValueError naming ``where``, raised before
        anything is unpacked (a hostile ``T`` never allocates)."""
        return PackedFrame.from_arrays(arrays, where).unpack(cls)


@dataclass(frozen=True, kw_only=True)
class PackedFrame:
    """An :class:`AttentionFrame` as storage keeps it (:meth:`AttentionFrame.pack`): ``data`` is the
    weights' lower triangles [L, H, T (T + 1) / 2] when ``packed`` (a causal frame), else the weights
    as they were; ``T`` the tokens (0: weights that are not [..., T, T])."""

    prompt: str
    labels: list[str]
    step: int | None
    label: str
    metrics: dict[str, np.ndarray]
    data: np.ndarray
    T: int
    packed: bool

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def unpack(self, cls: type[AttentionFrame] = AttentionFrame) -> AttentionFrame:
        """The frame again (weights unpacked afresh), as ``cls``."""
        weights = unpack_causal(self.data, self.T) if self.packed else self.data
        return cls(
            prompt=self.prompt,
            labels=self.labels,
            weights=weights,
            step=self.step,
            label=self.label,
            metrics=self.metrics,
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays: ``weights`` (packed or not, as ``packed`` says), ``T``, ``tokens`` (the
        labels), ``prompt``, ``step`` (−1: not known), ``label`` and every metric as ``metric_<name>``."""
        out = {
            "weights": np.ascontiguousarray(self.data),
            "packed": np.array(self.packed),
            "T": np.array(self.T, dtype=np.int64),
            "tokens": np.array(self.labels, dtype=np.str_),
            "prompt": np.array(self.prompt, dtype=np.str_),
            "step": np.array(-1 if self.step is None else int(self.step), dtype=np.int64),
            "label": np.array(self.label, dtype=np.str_),
        }
        out.update({f"metric_{k}": np.asarray(v, dtype=np.float32) for k, v in self.metrics.items()})
        return out

    @classmethod
    def from_arrays(cls, arrays, where: str = "frame") -> PackedFrame:
        """What :meth:`arrays` wrote, checked: float16/float32 weights of 4 axes whose tokens match the
        labels, metrics [L, H]; a ValueError naming ``where`` otherwise."""
        w = np.asarray(arrays["weights"])
        labels = [str(t) for t in np.asarray(arrays["tokens"]).tolist()]
        packed = "packed" in arrays and bool(np.asarray(arrays["packed"]))
        T = len(labels)
        if w.dtype not in (np.float16, np.float32):
            raise ValueError(f"{where}: weights of {w.dtype}, expected float16 or float32")
        if packed:
            if int(np.asarray(arrays["T"])) != T or w.ndim != 3 or w.shape[-1] != T * (T + 1) // 2:
                raise ValueError(f"{where}: packed weights of shape {list(w.shape)} do not fit {T} tokens")
        elif w.ndim != 4 or w.shape[-1] != T or w.shape[-2] != T:
            raise ValueError(f"{where}: weights of shape {list(w.shape)} are not [layers, heads, {T}, {T}]")
        metrics = {k[len("metric_") :]: np.asarray(arrays[k]) for k in arrays if k.startswith("metric_")}
        if any(m.shape != w.shape[:2] for m in metrics.values()):
            raise ValueError(f"{where}: a metric is not [layers, heads] = {list(w.shape[:2])}")
        step = int(np.asarray(arrays["step"])) if "step" in arrays else -1
        return cls(
            prompt=str(np.asarray(arrays["prompt"])) if "prompt" in arrays else "",
            labels=labels,
            step=None if step < 0 else step,
            label=str(np.asarray(arrays["label"])) if "label" in arrays else "",
            metrics=metrics,
            data=w,
            T=T,
            packed=packed,
        )


__all__ = ["AttentionFrame", "PackedFrame", "carried_mask", "pack_causal", "unpack_causal"]
