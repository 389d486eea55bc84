"""Hook points: the named places in the forward pass where an activation can be read or replaced.

Every activation of :class:`model.nn.gpt.GPT` passes through a :class:`HookPoint`, an identity module
whose name is its path in the model. Nothing is hooked by default, and an unhooked point costs one
attribute test, so training pays nothing for them. Three ways to run one model:

* **plain** — ``model(idx)``: the fused ``scaled_dot_product_attention`` path;
* **record** — :func:`model.interp.trace.run_with_trace` hooks the points it records for one pass
  and returns a :class:`~model.interp.trace.Trace`, keyed by these points' names;
* **intervene** — ``with model.hooks({"blocks.0.attn.z": fn}): model(idx)``: ``fn(x, hook)`` returns
  the activation to use instead of ``x`` (``None`` keeps ``x``). :func:`ablate_heads`,
  :func:`use_mask` and :func:`patch` build the common ones.

Hooks are attached for the thread that attaches them: a forward pass in another thread (training
beside an inspection of the same model) never sees them. Hooks on one point run in the order they
were added (an intervention entered before a recording is what the recording sees). Hooking
``attn.scores`` or ``attn.pattern`` of a layer switches that layer to the explicit softmax (the
fused kernel never forms the weights); its logits equal the fused ones to float32 rounding.

===========================  ===============  ==========================  ==========================
hook point                   shape            TransformerLens             Trace key
===========================  ===============  ==========================  ==========================
``embed``                    [B, T, d]        ``hook_embed``              —
``pos_embed``                [T, d]           ``hook_pos_embed``          — (learned/sinusoidal only)
``mask``                     [T, S] bool      —                           ``Trace.mask``
``blocks.l.resid_pre``       [B, T, d]        ``blocks.l.hook_resid_pre``   ``resid_pre``
``blocks.l.attn.q``          [B, H, T, d_k]   ``attn.hook_q`` / ``hook_rot_q`` ``q`` (after RoPE)
``blocks.l.attn.k``, ``.v``  [B, H_kv, S, d_k]  ``attn.hook_k``, ``hook_v``  ``k``, ``v`` (repeated to H)
``blocks.l.attn.scores``     [B, H, T, S]     ``attn.hook_attn_scores``   ``scores``
``blocks.l.attn.pattern``    [B, H, T, S]     ``attn.hook_pattern``       ``pattern``
``blocks.l.attn.pattern_rows`` ([B, H, r, S'], i) —                       — (rows i.. of the pattern)
``blocks.l.attn.z``          [B, H, T, d_k]   ``attn.hook_z``             ``z``
``blocks.l.attn.out``        [B, T, d]        ``hook_attn_out``           ``attn_out``
``blocks.l.resid_mid``       [B, T, d]        ``blocks.l.hook_resid_mid``   ``resid_mid``
``blocks.l.mlp.out``         [B, T, d]        ``hook_mlp_out``            ``mlp_out``
``blocks.l.mlp.router``      [B, T, E]        —                           ``router`` (MoE blocks)
``blocks.l.mlp.chosen``      [B, T, k] int64  —                           ``chosen`` (MoE blocks)
``blocks.l.mlp.gates``       [B, T, k]        —                           ``gates`` (MoE blocks)
``blocks.l.resid_post``      [B, T, d]        ``blocks.l.hook_resid_post``  ``resid_post``
``ln_final``                 [B, T, d]        ``ln_final.hook_normalized``  ``ln_final``
``logits``                   [B, T, V]        —                           ``Trace.logits``
===========================  ===============  ==========================  ==========================

Differences from TransformerLens: our ``attn.scores`` is taken *before* the mask (its
``hook_attn_scores`` holds −∞ above the diagonal); our heads are the second axis ([B, H, T, d_k], its
are [B, T, H, d_k]); ``attn.q``/``attn.k`` are after RoPE (its ``hook_rot_q``/``hook_rot_k``) and
``attn.k``/``attn.v`` hold the ``H_kv`` key/value heads (with a KV cache: every cached position ``S``).
``ln_final`` is the identity for Post-LN models (they have no final norm). ``scores_raw`` (Q Kᵀ) and the
write norms are computed by the recorder from ``attn.q``, ``attn.k``, ``attn.out`` and ``mlp.out``.
A mixture-of-experts block (:mod:`model.nn.moe`) adds ``mlp.router`` (logits), ``mlp.chosen`` (each
token's experts) and ``mlp.gates`` (their weights). Latent attention's ``attn.k``/``attn.v`` are per
query head, decompressed from the latent (the cache holds the latent). With sinks a ``pattern`` row
sums to less than 1 (the rest went to the sink); with soft-capping ``scores`` are the capped ones.
In a ``sandwich`` block ``attn.out`` is the output before its post-norm.
In a parallel block (``parallel_residual``, GPT-NeoX) ``resid_mid = resid_pre + attn.out`` still holds,
but the MLP reads ``resid_pre`` (through its own norm), so editing ``resid_mid`` changes only what
follows the block, not its MLP. With ``qk_rmsnorm`` ``attn.q``/``attn.k`` are after the QK-norm too.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping

import torch
import torch.nn as nn

HookFn = Callable[[torch.Tensor, "HookPoint"], "torch.Tensor | None"]


#: Per thread: {HookPoint: [hook functions attached by this thread]}.
_LOCAL = threading.local()


def _attached_here() -> dict:
    table = getattr(_LOCAL, "table", None)
    if table is None:
        table = _LOCAL.table = {}
    return table


class HookPoint(nn.Module):
    """An identity on the activation passing through, unless hook functions are attached.

    ``name`` is its path in the model (``blocks.1.attn.pattern``), ``layer`` its block (−1 outside
    the blocks); ``fns`` the hooks the current thread attached, applied in order.
    """

    def __init__(self):
        super().__init__()
        self.name = ""
        self.layer = -1

    @property
    def fns(self) -> list[HookFn]:
        """The hooks attached to this point by the calling thread (empty for every other thread)."""
        return _attached_here().get(self, [])

    @property
    def readers_only(self) -> bool:
        """Every hook attached here (by this thread) is a :func:`reader`: the activation may live in a
        buffer that the next layer reuses."""
        return all(getattr(fn, "reads_only", False) for fn in self.fns)

    def __call__(self, x):  # skips nn.Module's call machinery: an idle point is one test
        for fn in self.fns:
            out = fn(x, self)
            if out is not None:
                x = out
        return x

    forward = __call__

    def extra_repr(self) -> str:
        return self.name


def name_hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Give every :class:`HookPoint` of ``model`` its path as name; return them by name, in order."""
    points = {}
    for name, module in model.named_modules():
        if isinstance(module, HookPoint):
            module.name = name
            module.layer = int(name.split(".")[1]) if name.startswith("blocks.") else -1
            points[name] = module
    return points


@contextlib.contextmanager
def attached(points: Mapping[str, HookPoint], fns: Mapping[str, HookFn] | Iterable[tuple[str, HookFn]]):
    """Attach ``fns`` ({name: fn} or (name, fn) pairs) for the duration of the block; then detach them."""
    pairs = list(fns.items()) if isinstance(fns, Mapping) else list(fns)
    unknown = sorted({name for name, _ in pairs if name not in points})
    if unknown:
        raise ValueError(f"no hook point named {', '.join(unknown)}; the model has: {', '.join(points)}")
    here = _attached_here()
    done = []
    try:
        for name, fn in pairs:
            here.setdefault(points[name], []).append(fn)
            done.append((points[name], fn))
        yield
    finally:
        for point, fn in done:
            here[point].remove(fn)
            if not here[point]:
                del here[point]


def reader(fn: HookFn) -> HookFn:
    """Mark ``fn`` as a hook that only reads: it neither edits the activation nor keeps a reference to
    it past its call (it copies what it keeps). When every hook on ``attn.pattern`` is a reader, the
    layers of one forward pass write their patterns into one shared array (see
    :meth:`model.nn.gpt.Context.shared`) instead of each allocating its own."""
    fn.reads_only = True  # type: ignore[attr-defined]
    return fn


# ---------------------------------------------------------------------------------------------
# interventions
# ---------------------------------------------------------------------------------------------
def patch(value: torch.Tensor, index=None) -> HookFn:
    """Replace the activation by ``value`` (everywhere, or only at ``x[index]``)."""

    def fn(x, hook):
        if index is None:
            return value.to(device=x.device, dtype=x.dtype)
        x = x.clone()
        x[index] = value[index].to(device=x.device, dtype=x.dtype)
        return x

    return fn


def ablate_heads(ablate: Mapping[tuple[int, int], str]) -> list[tuple[str, HookFn]]:
    """Hooks on ``blocks.l.attn.z`` that zero head ``h``'s output, or replace it by its mean over
    positions, for each ``(l, h): "zero" | "mean"`` of ``ablate``."""
    by_layer: dict[int, dict[int, str]] = {}
    for (layer, head), mode in ablate.items():
        if mode not in ("zero", "mean"):
            raise ValueError(f"ablation mode {mode!r} is not 'zero' or 'mean'")
        by_layer.setdefault(int(layer), {})[int(head)] = mode

    def hook_for(heads: dict[int, str]) -> HookFn:
        def fn(z, hook):  # z [B, H, T, d_k]
            z = z.clone()
            for h, mode in heads.items():
                z[:, h] = 0.0 if mode == "zero" else z[:, h].mean(dim=1, keepdim=True)
            return z

        return fn

    return [(f"blocks.{layer}.attn.z", hook_for(heads)) for layer, heads in sorted(by_layer.items())]


def use_mask(mask: torch.Tensor) -> list[tuple[str, HookFn]]:
    """A hook on ``mask`` that replaces the config's mask by ``mask`` bool [T, S] (True = may attend),
    on the model's device; a ValueError when its shape is not the prompt's [T, S]."""
    mask = mask.to(dtype=torch.bool)

    def fn(default, hook):
        if default is not None and mask.shape != default.shape:
            raise ValueError(f"attn_mask has shape {tuple(mask.shape)}, expected {tuple(default.shape)}")
        return mask.to(default.device)

    return [("mask", fn)]


__all__ = [
    "HookFn",
    "HookPoint",
    "ablate_heads",
    "attached",
    "name_hook_points",
    "patch",
    "reader",
    "use_mask",
]
