"""A site's activations streamed from a corpus, batch by batch, each batch run only as deep as the site.

:class:`ActivationStream` draws prompts as the corpus run of the heads does
(:func:`model.interp.corpus.run.prompt_batches`: the tokenizer's BOS prefix, if it has one, then a
window of ``seq_len − len(prefix)`` tokens of the corpus, every window drawn from one generator
seeded by ``seed``), ``prompts`` of them per batch, and reads each batch at the site with
:func:`~.site.site_activations` (the forward pass stops in the hook that reads it). A batch gives
``x`` [n, d_in] with ``n = prompts · (seq_len − skip)``: every position but the first ``skip =
max(1, len(prefix))``, the BOS or, without one, the first token. That position is an attention sink's,
not the text's: it attends to itself alone, and its stream is large and alike in every prompt
(SmolLM2-135M's residual stream entering layer 15 is ~22,000 long there and ~160 elsewhere), so it
would swamp the SAE's loss; SAELens leaves special tokens out for the same reason.

Memory is one batch's forward pass and its activations, whatever the number of tokens. Batch ``i`` is
the same whenever it is asked for: :meth:`ActivationStream.batches` ``(start=i)`` redraws the windows
of the batches before ``i`` (cheap: no forward pass) and runs from ``i``, so a stopped training run
resumes on the very batches it would have seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from model.interp.corpus.result import CorpusSettings
from model.interp.corpus.run import bos_prefix, open_source, prompt_batches
from model.interp.sae.site import Site, site_activations
from model.text.datasource import DataSource


def first_read(tokenizer, seq_len: int) -> int:
    """The first position of a prompt that is read: after the BOS prefix, and never position 0."""
    return max(1, len(bos_prefix(tokenizer, seq_len)))


@dataclass
class StreamBatch:
    """Batch ``index`` of a stream: its prompts ``ids`` [B, T] and the site's activations ``x``
    [B·(T − skip), d_in] (float32, prompt-major)."""

    index: int
    ids: torch.Tensor
    x: torch.Tensor


class ActivationStream:
    """``n_batches`` batches of ``prompts`` prompts of ``seq_len`` tokens from ``corpus`` (module
    docstring). ``source``: the corpus already opened with the model's tokenizer."""

    def __init__(
        self,
        model,
        tokenizer,
        site: Site,
        corpus: str,
        *,
        seq_len: int,
        prompts: int,
        n_batches: int,
        seed: int = 0,
        source: DataSource | None = None,
    ):
        site.check(model.config)
        self.model, self.site = model, site
        self.prefix = bos_prefix(tokenizer, seq_len)
        self.skip = first_read(tokenizer, seq_len)
        self.source = source if source is not None else open_source(corpus, tokenizer)
        self.prompts, self.n_batches = int(prompts), int(n_batches)
        self.settings = CorpusSettings(
            corpus, n_prompts=self.prompts * self.n_batches, seq_len=seq_len, seed=seed
        )
        # a corpus shorter than one window is refused here, before any forward pass
        self.source.sample_windows(1, seq_len - len(self.prefix), torch.Generator().manual_seed(seed))

    @classmethod
    def for_tokens(cls, model, tokenizer, site: Site, corpus: str, *, tokens: int, batch_tokens: int,
                   seq_len: int, seed: int = 0, source: DataSource | None = None,
                   ) -> ActivationStream:  # fmt: skip
        """The stream of at least ``tokens`` activations in batches of at least ``min(batch_tokens, tokens)``:
        ``ceil(that / (seq_len − skip))`` prompts a batch."""
        per_prompt = seq_len - first_read(tokenizer, seq_len)
        prompts = max(1, math.ceil(min(batch_tokens, tokens) / per_prompt))
        n_batches = max(1, math.ceil(tokens / (prompts * per_prompt)))
        return cls(model, tokenizer, site, corpus, seq_len=seq_len, prompts=prompts, n_batches=n_batches,
                   seed=seed, source=source)  # fmt: skip

    @property
    def tokens_per_batch(self) -> int:
        return self.prompts * (self.settings.seq_len - self.skip)

    @property
    def total_tokens(self) -> int:
        return self.n_batches * self.tokens_per_batch

    def prompt_batches(self, start: int = 0) -> Iterator[tuple[int, torch.Tensor]]:
        """``(index, ids [B, T])`` of batches ``start`` .. ``n_batches − 1`` (those before are drawn and
        dropped)."""
        got = prompt_batches(self.source, self.settings, self.prefix, self.prompts)
        for first, ids in got:
            index = first // self.prompts
            if index >= start:
                yield index, ids

    def read(self, ids: torch.Tensor) -> torch.Tensor:
        """The site's activations of prompts ``ids`` [B, T] but their first ``skip``: [B·(T − skip), d_in]."""
        x = site_activations(self.model, self.site, ids)
        return x[:, self.skip :].reshape(-1, x.shape[-1])

    def batches(self, start: int = 0) -> Iterator[StreamBatch]:
        """Batches ``start`` .. ``n_batches − 1``, each read at the site (module docstring)."""
        for index, ids in self.prompt_batches(start):
            yield StreamBatch(index, ids, self.read(ids))


__all__ = ["ActivationStream", "StreamBatch"]
