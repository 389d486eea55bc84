"""Top examples per head over a corpus: the prompts where a head attends most strongly, and where its
output is largest, each kept with the text around its query and key (as Neuronpedia shows a feature's
top activations).

:class:`TopExamples` is a bounded heap per head: at most ``k`` examples of each head of ``L`` layers ×
``H`` heads, whatever the number of prompts offered. An example is one prompt's best (query, key) for
that head, so the ``k`` examples of a head come from ``k`` different prompts:

* kind ``"attention"``: the largest weight ``w_ij`` of the prompt, over queries that see two keys or
  more and keys of the text (the tokenizer's BOS prefix left out: its weight is the sink score's);
* kind ``"z"``: the largest output norm ``‖z_i‖₂`` (``z = A V``, the head's output before ``W_O``) of the
  prompt, over the same queries; its key is the one the head weighted most at that query.

Arrays, each ``[L, H, k]`` and sorted best first (a slot never filled has ``prompt = −1`` and value
``−inf``): ``value``, ``prompt`` (its index in the run), ``query``, ``key``; ``tokens`` ``[L, H, k, 2,
W]`` the ids around the key (``[..., 0, :]``) and around the query (``[..., 1, :]``), ``W = 2c + 1``
tokens centred on it (−1 outside the prompt). :meth:`TopExamples.texts` renders each as one line
with the key in ``«»`` and the query in ``⟦⟧``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.text.tokens import visible

#: The two kinds of example, in the order a result lists them.
EXAMPLE_KINDS = ("attention", "z")


@dataclass
class TopExamples:
    """The ``k`` best examples of every head of one kind (module docstring); ``context`` = ``c``."""

    kind: str
    value: np.ndarray
    prompt: np.ndarray
    query: np.ndarray
    key: np.ndarray
    tokens: np.ndarray
    context: int

    @classmethod
    def empty(cls, kind: str, n_layers: int, n_heads: int, k: int, context: int) -> TopExamples:
        shape = (n_layers, n_heads, k)
        return cls(
            kind=kind,
            value=np.full(shape, -np.inf, dtype=np.float32),
            prompt=np.full(shape, -1, dtype=np.int64),
            query=np.full(shape, -1, dtype=np.int64),
            key=np.full(shape, -1, dtype=np.int64),
            tokens=np.full((*shape, 2, 2 * context + 1), -1, dtype=np.int64),
            context=int(context),
        )

    @property
    def k(self) -> int:
        return int(self.value.shape[-1])

    def offer(
        self, layer: int, value: np.ndarray, query: np.ndarray, key: np.ndarray, first: int, ids: np.ndarray
    ) -> None:
        """Offer a batch's best example of every head of ``layer``: ``value``, ``query``, ``key``
        ``[B, H]`` of prompts ``first .. first + B − 1`` whose ids are ``ids`` [B, T]; the heap keeps
        the ``k`` largest values of each head."""
        B, H = value.shape
        cand_value = np.asarray(value, dtype=np.float32).T  # [H, B]
        cand_prompt = np.broadcast_to(np.arange(first, first + B), (H, B))
        values = np.concatenate([self.value[layer], cand_value], axis=1)
        order = np.argsort(-values, axis=1, kind="stable")[:, : self.k]  # [H, k]
        kept = self.value[layer].shape[1]
        rows = np.arange(H)[:, None]
        new = order >= kept
        b = np.where(new, order - kept, 0)  # the candidate's batch row (when new)
        q, kk = np.asarray(query).T, np.asarray(key).T  # [H, B]
        windows = np.stack([_windows(ids, kk, self.context), _windows(ids, q, self.context)], axis=2)
        old = np.minimum(order, kept - 1)
        self.tokens[layer] = np.where(new[..., None, None], windows[rows, b], self.tokens[layer][rows, old])
        self.prompt[layer] = np.where(new, cand_prompt[rows, b], self.prompt[layer][rows, old])
        self.query[layer] = np.where(new, q[rows, b], self.query[layer][rows, old])
        self.key[layer] = np.where(new, kk[rows, b], self.key[layer][rows, old])
        self.value[layer] = values[rows, order]

    def texts(self, tokenizer) -> np.ndarray:
        """Each example as one line of text ``[L, H, k]`` (str): the tokens around its key and query
        (a gap between the two is ``…``), the key as ``«token»``, the query as ``⟦token⟧``."""
        out = np.full(self.value.shape, "", dtype=object)
        for idx in np.ndindex(*self.value.shape):
            if self.prompt[idx] >= 0:
                out[idx] = self.text_of(idx, tokenizer)
        return out.astype(str)

    def text_of(self, idx: tuple[int, int, int], tokenizer) -> str:
        """The line of example ``idx`` = (layer, head, rank) (see :meth:`texts`)."""
        c = self.context
        q, k = int(self.query[idx]), int(self.key[idx])
        at: dict[int, int] = {}
        for row, centre in ((0, k), (1, q)):
            for offset, tid in enumerate(self.tokens[idx][row]):
                if tid >= 0:
                    at[centre - c + offset] = int(tid)
        positions = sorted(at)
        labels = [visible(s) for s in tokenizer.token_strings([at[p] for p in positions])]
        parts: list[str] = []
        for n, (p, label) in enumerate(zip(positions, labels, strict=True)):
            if n and p != positions[n - 1] + 1:
                parts.append(" … ")
            if p == k:
                label = f"«{label}»"
            if p == q:
                label = f"⟦{label}⟧"
            parts.append(label)
        return "".join(parts)


def _windows(ids: np.ndarray, centre: np.ndarray, c: int) -> np.ndarray:
    """The ids of ``ids`` [B, T] at ``centre`` [H, B] ± ``c``: [H, B, 2c + 1] (−1 outside the prompt)."""
    B, T = ids.shape
    pos = np.asarray(centre)[..., None] + np.arange(-c, c + 1)  # [H, B, W]
    inside = (pos >= 0) & (pos < T)
    got = ids[np.arange(B)[None, :, None], np.clip(pos, 0, T - 1)]
    return np.where(inside, got, -1)


__all__ = ["EXAMPLE_KINDS", "TopExamples"]
