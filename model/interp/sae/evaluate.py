"""How good an SAE is, measured as SAELens's evals measure it, over prompts of a corpus.

For every batch of prompts (:class:`~.stream.ActivationStream`'s, every position but the first) the model
runs three times: clean, with the site replaced by the SAE's reconstruction ``x̂ = decode(encode(x))``
(spliced in through a hook on the site's hook point; ``z`` [B, H, T, d_k] flattened to [B, T, H·d_k],
reconstructed, and put back as [B, H, T, d_k]), and with the site zero-ablated. The first position (the
BOS, or the first token: an attention sink's) is left clean in all three, as the SAE was not trained on
it. Over the ``n`` tokens:

* ``variance_explained = 1 − E‖x − x̂‖² / (E‖x‖² − ‖E x‖²)`` (SAELens's ``explained_variance``: the
  residual's mean squared norm over the activation's total variance), ``mse = E‖x − x̂‖²``;
* ``l0 = E[#{i : f_i > 0}]``, features firing per token;
* each feature's density ``p_i = P(f_i > 0)``: ``dead`` features never fire (``p_i`` below SAELens's
  ``dead_feature_threshold`` 1e-8), ``dense`` ones fire on more than :data:`DENSE_DENSITY` of tokens
  (log₁₀ p > −1, the right edge of SAELens's feature-density histogram);
* the next-token loss ``L`` (mean cross-entropy over the positions read) clean, with the SAE
  and zero-ablated, and ``loss_recovered = (L_zero − L_sae) / (L_zero − L_clean)`` (SAELens's
  ``ce_loss_score``: 1 when splicing costs nothing, 0 when it is as bad as deleting the site).

Memory: one batch's three passes and running sums (``d_in`` + ``d_sae`` numbers), whatever ``n``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.interp.sae.sae import SparseAutoencoder
from model.interp.sae.site import flatten, unflatten
from model.interp.sae.stream import ActivationStream
from model.progress import check, report

#: A feature firing on more than this share of tokens is dense.
DENSE_DENSITY = 0.1

#: SAELens's ``dead_feature_threshold``: a density below it is a dead feature.
DEAD_DENSITY = 1e-8


@dataclass
class SAEEvaluation:
    """What :func:`evaluate_sae` measured (module docstring): ``tokens`` read, ``variance_explained``,
    ``mse``, ``l0``, ``dead`` and ``dense`` features of ``d_sae``, ``loss_clean``, ``loss_sae``,
    ``loss_zero``, ``loss_recovered``, and ``density`` [d_sae], each feature's share of tokens fired on."""

    tokens: int
    d_sae: int
    variance_explained: float
    mse: float
    l0: float
    dead: int
    dense: int
    loss_clean: float
    loss_sae: float
    loss_zero: float
    loss_recovered: float
    density: np.ndarray

    def to_dict(self) -> dict:
        """JSON-ready (the density as a list)."""
        d = asdict(self)
        d["density"] = [float(p) for p in self.density]
        return d

    def lines(self) -> list[str]:
        """The evaluation as ``attention-lab sae eval`` prints it."""
        return [
            f"tokens               {self.tokens:,}",
            f"variance explained   {self.variance_explained:.4f}",
            f"MSE                  {self.mse:.6g}",
            f"L0                   {self.l0:.2f} features per token",
            f"dead features        {self.dead} of {self.d_sae} (never fired)",
            f"dense features       {self.dense} of {self.d_sae} (fired on > {DENSE_DENSITY:.0%} of tokens)",
            f"next-token loss      clean {self.loss_clean:.4f} · with the SAE {self.loss_sae:.4f} · "
            f"site zeroed {self.loss_zero:.4f}",
            f"loss recovered       {self.loss_recovered:.4f}",
        ]


class _Sums:
    """Running sums over the tokens (float64)."""

    def __init__(self, d_in: int, d_sae: int):
        self.n = 0
        self.resid = 0.0
        self.square = 0.0
        self.x = torch.zeros(d_in, dtype=torch.float64)
        self.fired = torch.zeros(d_sae, dtype=torch.float64)
        self.l0 = 0.0
        self.loss = {"clean": 0.0, "sae": 0.0, "zero": 0.0}
        self.predicted = 0

    def add(self, x: torch.Tensor, f: torch.Tensor, x_hat: torch.Tensor) -> None:
        x, x_hat = x.double(), x_hat.double()
        self.n += x.shape[0]
        self.resid += float((x - x_hat).pow(2).sum())
        self.square += float(x.pow(2).sum())
        self.x += x.sum(0)
        firing = f > 0
        self.fired += firing.sum(0).double()
        self.l0 += float(firing.sum())


def _next_token_loss(logits: torch.Tensor, ids: torch.Tensor, p: int) -> float:
    """Σ of the cross-entropy of every position ``t ≥ p`` predicting token ``t + 1``."""
    V = logits.shape[-1]
    return float(
        F.cross_entropy(logits[:, p:-1].reshape(-1, V).float(), ids[:, p + 1 :].reshape(-1), reduction="sum")
    )


def _batch(model, sae: SparseAutoencoder, ids: torch.Tensor, p: int, sums: _Sums) -> None:
    """The three passes of one batch (module docstring), added to ``sums``."""
    site = sae.config.site
    n_heads = model.config.attention.n_heads
    seen: dict[str, torch.Tensor] = {}

    def clean(x, hook):
        seen["x"] = flatten(site, x.detach()).float()

    def replaced(by):
        def hook_fn(x, hook):
            flat = flatten(site, x).clone()
            flat[:, p:] = by(flat[:, p:].float()).to(flat.dtype)
            return unflatten(site, flat, n_heads).contiguous()

        return hook_fn

    ids = ids.to(model.device)
    with model.hooks({site.hook_point: clean}):
        logits, _ = model(ids)
    sums.loss["clean"] += _next_token_loss(logits, ids, p)
    x = seen["x"][:, p:].reshape(-1, sae.config.d_in)
    f = sae.encode(x)
    sums.add(x, f, sae.decode(f))
    for name, by in (("sae", lambda v: sae.decode(sae.encode(v))), ("zero", torch.zeros_like)):
        check()
        with model.hooks({site.hook_point: replaced(by)}):
            logits, _ = model(ids)
        sums.loss[name] += _next_token_loss(logits, ids, p)
    sums.predicted += ids.shape[0] * (ids.shape[1] - p - 1)


@torch.no_grad()
def evaluate_sae(
    model,
    tokenizer,
    sae: SparseAutoencoder,
    *,
    corpus: str,
    n_tokens: int = 32_768,
    seq_len: int = 128,
    batch_tokens: int = 4096,
    seed: int = 1,
) -> SAEEvaluation:
    """Evaluate ``sae`` on the model's activations over at least ``n_tokens`` tokens of ``corpus``
    (prompts of ``seq_len`` drawn with ``seed``: by default not the training run's seed 0), ``batch_tokens``
    a batch (module docstring). Progress: :func:`model.progress.report` in tokens."""
    cfg = model.config
    site = sae.config.site
    if sae.config.d_in != site.d_in(cfg):
        raise ValueError(
            f"the SAE reads {sae.config.d_in} numbers but the model's {site.label()} is {site.d_in(cfg)}"
        )
    seq_len = min(seq_len, cfg.core.context_length)
    stream = ActivationStream.for_tokens(model, tokenizer, site, corpus, tokens=n_tokens,
                                         batch_tokens=batch_tokens, seq_len=seq_len, seed=seed)  # fmt: skip
    if seq_len - stream.skip < 2:
        raise ValueError(
            f"seq_len {seq_len}: a prompt needs 2 tokens after its first to predict a next token"
        )
    was = model.training
    model.eval()
    sae.eval()
    sums = _Sums(sae.config.d_in, sae.config.d_sae)
    try:
        for index, ids in stream.prompt_batches():
            check()
            _batch(model, sae, ids, stream.skip, sums)
            report((index + 1) * stream.tokens_per_batch, stream.total_tokens, "tokens")
    finally:
        model.train(was)
    return _result(sums, sae.config.d_sae)


def _result(s: _Sums, d_sae: int) -> SAEEvaluation:
    n = max(1, s.n)
    mean_x = s.x / n
    total_variance = s.square / n - float(mean_x.pow(2).sum())
    density = (s.fired / n).numpy()
    clean, with_sae, zero = (s.loss[k] / max(1, s.predicted) for k in ("clean", "sae", "zero"))
    gap = zero - clean
    return SAEEvaluation(
        tokens=s.n,
        d_sae=d_sae,
        variance_explained=1.0 - (s.resid / n) / total_variance if total_variance > 0 else math.nan,
        mse=s.resid / n,
        l0=s.l0 / n,
        dead=int((density < DEAD_DENSITY).sum()),
        dense=int((density > DENSE_DENSITY).sum()),
        loss_clean=clean,
        loss_sae=with_sae,
        loss_zero=zero,
        loss_recovered=(zero - with_sae) / gap if gap != 0 else math.nan,
        density=density,
    )


__all__ = ["DEAD_DENSITY", "DENSE_DENSITY", "SAEEvaluation", "evaluate_sae"]
