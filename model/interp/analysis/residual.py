"""The residual stream lab: norms along the stream, what each sublayer writes, and the logit lens.

Checkpoints of the stream (names used by every function here)::

    embed     = resid_pre of layer 0 (token + position embedding)
    L{l}.mid  = resid_mid of layer l  (after attention)
    L{l}.post = resid_post of layer l (after the MLP; = the next layer's resid_pre)

Pre-LN: ``mid = pre + attn_out``, ``post = mid + mlp_out``. Post-LN renormalises each sum:
``mid = Norm1(pre + attn_out)``, ``post = Norm2(mid + mlp_out)``, so its stream norm sits near
``√d`` (times the norm's gain) at every checkpoint after the embedding.

Logit lens: decode a checkpoint ``x`` as if it were the last layer's output,
``logits = W_U · Norm_f(x)`` for Pre-LN. After the last layer that *is* the model's output, so the
lens there equals the model's logits exactly. Post-LN has no final norm (each block already ends in
one), so its lens is ``W_U · x``: exact for the ``post`` checkpoints, which are norm outputs, and a
cruder read of the un-normalised embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.heads import as_numpy
from model.interp.trace import run_with_trace

RESIDUAL_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of the last axes of ``a`` and ``b`` (0 where either is the zero vector)."""
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    dot = (a * b).sum(-1)
    return np.divide(dot, na * nb, out=np.zeros_like(dot), where=(na * nb) > 0)


def stream_points(trace, batch: int = 0, *, mids: bool = True) -> tuple[list[str], np.ndarray]:
    """The residual stream at each checkpoint: (names, array [P, T, d]) (float64).

    ``mids=False`` keeps only ``embed`` and the ``L{l}.post`` checkpoints (layer boundaries).
    """
    names, rows = [], []
    layers = trace.layers
    if layers and trace.has("resid_pre", layers[0]):
        names.append("embed" if layers[0] == 0 else f"L{layers[0]}.pre")
        rows.append(as_numpy(trace["resid_pre", layers[0]][batch]))
    for layer in layers:
        for kind, tag in (("resid_mid", "mid"), ("resid_post", "post")):
            if (mids or tag == "post") and trace.has(kind, layer):
                names.append(f"L{layer}.{tag}")
                rows.append(as_numpy(trace[kind, layer][batch]))
    if not rows:
        raise KeyError("trace recorded no residual stream (kinds resid_pre/resid_mid/resid_post)")
    return names, np.stack(rows)


@dataclass
class ResidualNorms:
    """``‖x‖₂`` of the stream at each checkpoint and position: ``norms`` [P, T] with ``names`` [P].

    ``mean`` [P]: averaged over positions (the line plot); ``norms`` is the heatmap.
    """

    names: list[str]
    norms: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.norms.mean(-1)


def residual_norms(trace, batch: int = 0, *, mids: bool = True) -> ResidualNorms:
    """:class:`ResidualNorms` from a trace with ``resid_pre``/``resid_mid``/``resid_post``."""
    names, x = stream_points(trace, batch, mids=mids)
    return ResidualNorms(names, np.linalg.norm(x, axis=-1))


@dataclass
class WriteStats:
    """What each sublayer writes into the stream, per layer and position ([L, T] each).

    ``attn_norm = ‖attn_out‖``, ``mlp_norm = ‖mlp_out‖``; ``attn_cos = cos(attn_out, resid_pre)`` and
    ``mlp_cos = cos(mlp_out, resid_mid)`` (cosine with the stream it is added to: > 0 reinforces,
    < 0 erases, ≈ 0 writes something new); ``attn_ratio = ‖attn_out‖ / ‖resid_pre‖`` and
    ``mlp_ratio = ‖mlp_out‖ / ‖resid_mid‖`` (relative size of the update).
    """

    layers: list[int]
    attn_norm: np.ndarray
    mlp_norm: np.ndarray
    attn_cos: np.ndarray
    mlp_cos: np.ndarray
    attn_ratio: np.ndarray
    mlp_ratio: np.ndarray


def write_stats(trace, batch: int = 0) -> WriteStats:
    """:class:`WriteStats` from a trace holding the stream and both writes for every layer."""
    layers = trace.layers
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("an", "mn", "ac", "mc", "ar", "mr")}
    for layer in layers:
        pre = as_numpy(trace["resid_pre", layer][batch])
        mid = as_numpy(trace["resid_mid", layer][batch])
        attn = as_numpy(trace["attn_out", layer][batch])
        mlp = as_numpy(trace["mlp_out", layer][batch])
        an, mn = np.linalg.norm(attn, axis=-1), np.linalg.norm(mlp, axis=-1)
        pn, dn = np.linalg.norm(pre, axis=-1), np.linalg.norm(mid, axis=-1)
        cols["an"].append(an)
        cols["mn"].append(mn)
        cols["ac"].append(_cos(attn, pre))
        cols["mc"].append(_cos(mlp, mid))
        cols["ar"].append(np.divide(an, pn, out=np.full_like(an, np.nan), where=pn > 0))
        cols["mr"].append(np.divide(mn, dn, out=np.full_like(mn, np.nan), where=dn > 0))
    s = {k: np.stack(v) for k, v in cols.items()}
    return WriteStats(layers, s["an"], s["mn"], s["ac"], s["mc"], s["ar"], s["mr"])


# ---------------------------------------------------------------------------------------------
# logit lens
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def lens_logits(model, resid) -> torch.Tensor:
    """Decode stream vectors ``resid`` [..., d] into logits [..., V]: ``W_U Norm_f(x)`` (Pre-LN) or ``W_U x``.

    Uses the model's own final norm and unembedding (tied or not), in float32 on the model's device.
    """
    x = torch.as_tensor(resid).to(device=model.device, dtype=model.tok_emb.weight.dtype)
    if model.norm_f is not None:
        x = model.norm_f(x)
    if model.lm_head is not None:
        return model.lm_head(x).float()
    return (x @ model.tok_emb.weight.t()).float()


@dataclass
class LogitLens:
    """Top next-token guesses read from each checkpoint of the stream.

    ``names`` [P] (checkpoints); ``top_ids`` int64 [P, T, k] and ``top_probs`` [P, T, k];
    ``target_prob`` [P, T]: probability of the prompt's actual next token (NaN at the last position);
    ``kl_to_final`` [P, T]: ``KL(p_final ‖ p_point)`` in nats (0 at the last checkpoint of Pre-LN);
    ``logits`` [P, T, V] only when asked for (it is V times larger than the rest).
    """

    names: list[str]
    top_ids: np.ndarray
    top_probs: np.ndarray
    target_prob: np.ndarray
    kl_to_final: np.ndarray
    logits: np.ndarray | None = None

    @property
    def top1(self) -> np.ndarray:
        """The most likely token id per checkpoint and position: [P, T]."""
        return self.top_ids[..., 0]


@torch.no_grad()
def logit_lens(
    model, trace, *, k: int = 5, mids: bool = False, batch: int = 0, keep_logits: bool = False
) -> LogitLens:
    """Logit lens of every recorded checkpoint (``embed`` and each ``L{l}.post``; ``mids`` adds ``L{l}.mid``).

    ``model`` must be the model that made ``trace`` (its final norm and unembedding are used).
    """
    names, x = stream_points(trace, batch, mids=mids)
    logits = lens_logits(model, torch.from_numpy(x).float())  # [P, T, V]
    logp = torch.log_softmax(logits.double(), -1)
    final = torch.log_softmax(trace.logits[batch].double().to(logits.device), -1)  # [T, V]
    p = logp.exp()
    top = torch.topk(p, min(k, p.shape[-1]), dim=-1)
    tokens = trace.tokens[batch].to(logits.device)
    T = tokens.shape[0]
    target = torch.full((len(names), T), float("nan"), dtype=torch.float64, device=logits.device)
    if T > 1:
        target[:, :-1] = p[:, :-1].gather(-1, tokens[1:].view(1, T - 1, 1).expand(len(names), -1, -1))[..., 0]
    kl = (final.exp() * (final - logp)).sum(-1).clamp(min=0)
    return LogitLens(
        names=names,
        top_ids=top.indices.cpu().numpy().astype(np.int64),
        top_probs=top.values.cpu().numpy(),
        target_prob=target.cpu().numpy(),
        kl_to_final=kl.cpu().numpy(),
        logits=logits.cpu().numpy() if keep_logits else None,
    )


def residual_profile(model, ids) -> tuple[list[str], np.ndarray]:
    """Mean ``‖x‖₂`` over positions at each layer boundary (``embed``, ``L{l}.post``): (names, [P])."""
    trace = run_with_trace(model, ids, kinds=("resid_pre", "resid_post"))
    norms = residual_norms(trace, mids=False)
    return norms.names, norms.mean


__all__ = [
    "RESIDUAL_KINDS",
    "LogitLens",
    "ResidualNorms",
    "WriteStats",
    "lens_logits",
    "logit_lens",
    "residual_norms",
    "residual_profile",
    "stream_points",
    "write_stats",
]
