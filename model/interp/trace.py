"""Trace: what one recorded run of a model caught, keyed by (hook name, layer).

:func:`run_with_trace` is the one function that turns a prompt into a :class:`Trace`: a
:class:`Recorder` hooks the model's hook points (:mod:`model.nn.hooks`) for one forward pass, in
evaluation mode, under ``torch.no_grad``. Keys are the hook points' own names, as TransformerLens's
shorthand (``trace["pattern", 3]`` is layer 3's attention pattern). Per layer ``l`` and head ``h``:

===================  ===============  ===========================  ===================================
key                  shape            hook point                   meaning
===================  ===============  ===========================  ===================================
``q`` ``k`` ``v``    [B, H, T, d_k]   ``blocks.l.attn.q/k/v``      queries/keys/values (K, V repeated
                                                                   to H heads)
``scores_raw``       [B, H, T, T]     (from ``attn.q``, ``attn.k``) Q Kᵀ
``scores``           [B, H, T, T]     ``blocks.l.attn.scores``     what enters the softmax before
                                                                   masking (Q Kᵀ/√d_k, ...)
``pattern``          [B, H, T, T]     ``blocks.l.attn.pattern``    softmax(masked scores); rows sum to 1
``z``                [B, H, T, d_k]   ``blocks.l.attn.z``          pattern @ V, a head's output before W_O
``attn_out``         [B, T, d]        ``blocks.l.attn.out``        what attention writes into the stream
``mlp_out``          [B, T, d]        ``blocks.l.mlp.out``         what the MLP writes into the stream
``resid_pre``        [B, T, d]        ``blocks.l.resid_pre``       the stream entering the block
``resid_mid``        [B, T, d]        ``blocks.l.resid_mid``       between attention and MLP
``resid_post``       [B, T, d]        ``blocks.l.resid_post``      the stream leaving the block
``attn_write_norm``  [B, T]           (from ``attn.out``)          ‖attn_out‖₂ per position
``mlp_write_norm``   [B, T]           (from ``mlp.out``)           ‖mlp_out‖₂ per position
``router``           [B, T, E]        ``blocks.l.mlp.router``      a mixture of experts' router logits
``chosen``           [B, T, k]        ``blocks.l.mlp.chosen``      the experts each token went to (ids)
``gates``            [B, T, k]        ``blocks.l.mlp.gates``       their weights in the token's output
===================  ===============  ===========================  ===================================

(The last three exist in mixture-of-experts blocks only; a dense block records none of them.)

plus, for the whole model, ``ln_final`` [B, T, d] (the stream after the final norm; layer ``-1``),
``mask`` [T, T] (True where a query may attend), ``logits`` [B, T, V] (always float32) and the input
``tokens`` [B, T].

What is recorded is chosen by hook name: a list of names, or a predicate over them, as
TransformerLens's ``names_filter`` (``kinds=lambda name: name.startswith("resid")``). The names the
kinds had before (:data:`~model.interp.plan.RETIRED`) are refused wherever a kind is given, naming the
hook name: ``'weights' is now 'pattern'``.

Memory. Every [T, T] kind costs ``L·H·T²·B·s`` bytes (``s`` = 2 for float16, 4 for float32). A
12-layer, 12-head model at T = 1024 with only ``pattern`` in float16 needs 12·12·1024²·2 B = 302 MB
(all three score kinds: 906 MB); the residual kinds are ``L·T·d·s`` each (12·1024·768·2 = 18.9 MB).
Select ``layers`` and ``kinds`` to record less; :func:`~model.interp.plan.estimate_nbytes`
gives the figure in advance, and :func:`run_with_trace` refuses a trace that cannot fit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from model.interp.plan import ALL_KINDS, GLOBAL_KINDS, hook_name, hook_names, inspection_need
from model.nn.hooks import reader

if TYPE_CHECKING:
    from model.config import GPTConfig
    from model.nn.hooks import HookFn


class Sink(Protocol):
    """Where a kind goes instead of the trace (``run_with_trace``'s ``into``), one layer at a time:
    ``write(row, tensor)`` receives batch row 0 of the ``row``-th recorded layer (ascending), e.g.
    [H, T, T] for a square kind, while the forward pass holds it; it must not keep the tensor, which
    may live in a buffer the next layer reuses."""

    def write(self, row: int, tensor: torch.Tensor) -> None: ...


#: The residual-stream checkpoints in order, as names for plots: ("embed", "L0.mid", "L0.post", ...).
RESID_POINTS_DOC = "embed, then for each layer l: L{l}.mid (after attention), L{l}.post (after the MLP)"


#: Trace kind → the hook point of block ``l`` (``blocks.{l}.<point>``) it is read from.
KIND_POINTS = {
    "q": "attn.q",
    "k": "attn.k",
    "v": "attn.v",
    "scores_raw": "attn.k",  # Q Kᵀ from this layer's q and k
    "scores": "attn.scores",
    "pattern": "attn.pattern",
    "z": "attn.z",
    "attn_out": "attn.out",
    "mlp_out": "mlp.out",
    "resid_pre": "resid_pre",
    "resid_mid": "resid_mid",
    "resid_post": "resid_post",
    "attn_write_norm": "attn.out",
    "mlp_write_norm": "mlp.out",
    "router": "mlp.router",
    "chosen": "mlp.chosen",
    "gates": "mlp.gates",
}


#: What a trace records: hook names (one, or several), or a predicate over them; None = every kind.
Kinds = Iterable[str] | str | Callable[[str], bool] | None


def check_kinds(kinds: Kinds) -> frozenset[str] | None:
    """``kinds`` as a frozenset of hook names (None = all): the names given, or those of
    :data:`~model.interp.plan.ALL_KINDS` a predicate ``kinds(name)`` keeps (TransformerLens's
    ``names_filter``). A retired name is a ValueError naming its hook name
    (:func:`~model.interp.plan.hook_name`); an unknown one a ValueError naming the valid kinds."""
    if kinds is None:
        return None
    if callable(kinds):
        return frozenset(k for k in ALL_KINDS if kinds(k))
    kinds = frozenset(hook_names(kinds))
    unknown = sorted(kinds - set(ALL_KINDS))
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise ValueError(f"unknown trace kind {names}; valid kinds: {', '.join(ALL_KINDS)}")
    return kinds


@dataclass
class Recorder:
    """Decides what a trace keeps and stores it (detached, on CPU, in ``dtype``).

    :meth:`hooks` gives the hook functions that fill ``store`` from a forward pass; :meth:`trace`
    turns what they caught into a :class:`Trace`. Unknown ``kinds`` are a ValueError.
    """

    layers: frozenset[int] | None = None
    kinds: frozenset[str] | None = None
    dtype: torch.dtype = torch.float32
    store: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)
    config: GPTConfig | None = None
    mask: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    #: kind -> an array [n recorded layers, ...] the kind's batch row 0 is written into, row ``i`` for
    #: the ``i``-th recorded layer in ascending order, or a :class:`Sink` given each row as it is made,
    #: instead of being kept in ``store`` (no second copy)
    into: dict[str, np.ndarray | Sink] | None = None

    def __post_init__(self):
        self.kinds = check_kinds(self.kinds)
        if self.layers is not None:
            self.layers = frozenset(int(i) for i in self.layers)
        self.into = {hook_name(k): v for k, v in (self.into or {}).items()}
        n_layers = self.config.core.n_layers if self.config is not None else 0
        self._rows = {layer: i for i, layer in enumerate(sorted(self.layers or range(n_layers)))}

    def wants_layer(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers

    def wants(self, kind: str, layer: int) -> bool:
        return self.wants_layer(layer) and (self.kinds is None or hook_name(kind) in self.kinds)

    def put(self, kind: str, layer: int, tensor: torch.Tensor) -> None:
        if not self.wants(kind, layer):
            return
        target = self.into.get(kind) if self.into else None
        if isinstance(target, np.ndarray):
            torch.from_numpy(target)[self._rows[layer]].copy_(tensor.detach()[0])
            return
        if target is not None:
            target.write(self._rows[layer], tensor.detach()[0])
            return
        # always a copy: the activation may live in a buffer the next layer reuses (hooks.reader);
        # the chosen experts' ids stay whole numbers
        dtype = self.dtype if tensor.is_floating_point() else tensor.dtype
        self.store[(kind, layer)] = torch.empty(tensor.shape, dtype=dtype).copy_(tensor.detach())

    def hooks(self, n_layers: int, n_rep: int = 1, points=None) -> list[tuple[str, HookFn]]:
        """(hook point, function) pairs that record the wanted kinds of a model with ``n_layers``
        blocks whose key/value heads serve ``n_rep`` query heads each (K and V are stored repeated);
        ``points``: the model's hook point names, when some blocks lack some (a dense block has no
        router)."""

        def keep(name):
            def fn(x, hook):
                setattr(self, name, x)

            return fn

        pairs = [("mask", keep("mask")), ("logits", keep("logits"))]
        if self.wants("ln_final", -1):
            pairs.append(("ln_final", lambda x, hook: self.put("ln_final", -1, x)))
        last_q: dict[int, torch.Tensor] = {}

        def heads(t):  # [B, H_kv, S, d_k] -> [B, H, S, d_k]
            return t.repeat_interleave(n_rep, dim=1) if n_rep > 1 else t

        transforms: dict[str, Callable[..., torch.Tensor]] = {
            "k": heads,
            "v": heads,
            "scores_raw": lambda k, layer: last_q.pop(layer) @ heads(k).transpose(-2, -1),
            "attn_write_norm": lambda t: t.float().norm(dim=-1),
            "mlp_write_norm": lambda t: t.float().norm(dim=-1),
        }

        def recorder(kind, layer):
            f = transforms.get(kind)

            @reader
            def fn(x, hook):
                self.put(kind, layer, x if f is None else f(x, layer) if kind == "scores_raw" else f(x))

            return fn

        for layer in range(n_layers):
            if self.wants("scores_raw", layer):
                pairs.append((f"blocks.{layer}.attn.q", lambda q, hook: last_q.__setitem__(hook.layer, q)))
            pairs += [
                (f"blocks.{layer}.{point}", recorder(kind, layer))
                for kind, point in KIND_POINTS.items()
                if self.wants(kind, layer) and (points is None or f"blocks.{layer}.{point}" in points)
            ]
        return pairs

    def trace(self, tokens: torch.Tensor) -> Trace:
        """The :class:`Trace` of the forward pass of ``tokens`` [B, T] just recorded."""
        T = tokens.shape[-1]
        mask = self.mask if self.mask is not None else torch.ones(T, T, dtype=torch.bool)
        if self.logits is None:
            raise RuntimeError("no forward pass was recorded: run the model with these hooks first")
        return Trace(self.config, tokens, self.store, mask, self.logits)


class Trace:
    """Recorded activations of one forward pass; see the module docstring for kinds and shapes.

    ``trace["pattern", 2]`` is layer 2's attention weights [B, H, T, T];
    ``trace.stack("pattern")`` stacks every recorded layer for one batch row: numpy [L, H, T, T].
    """

    def __init__(
        self,
        config: GPTConfig | None,
        tokens: torch.Tensor,
        store: dict[tuple[str, int], torch.Tensor],
        mask: torch.Tensor,
        logits: torch.Tensor,
    ):
        self.config = config
        self.tokens = tokens.detach().cpu()
        self._store = store
        self.mask = mask.detach().cpu()
        self.logits = logits.detach().float().cpu()

    def __getitem__(self, key: tuple[str, int]) -> torch.Tensor:
        kind, layer = key
        try:
            return self._store[(hook_name(kind), layer)]
        except KeyError:
            raise KeyError(
                f"trace has no {kind!r} for layer {layer}; recorded kinds: {sorted(self.kinds)}, "
                f"layers: {self.layers}"
            ) from None

    def layer_mask(self, layer: int) -> torch.Tensor:
        """The mask [T, S] block ``layer`` attended with: :attr:`mask`, narrowed to the sliding window in
        a local layer of a ``window_pattern`` (the config's own masks)."""
        cfg = self.config
        if cfg is None or not cfg.attention.window_pattern or not cfg.is_local_layer(layer):
            return self.mask
        T, S = self.mask.shape
        q, k = torch.arange(S - T, S)[:, None], torch.arange(S)[None, :]
        return self.mask & (k > q - int(cfg.attention.sliding_window or 0))

    def get(self, kind: str, layer: int, default: torch.Tensor | None = None) -> torch.Tensor | None:
        return self._store.get((hook_name(kind), layer), default)

    def has(self, kind: str, layer: int = -1) -> bool:
        return (hook_name(kind), layer) in self._store

    def keys(self) -> list[tuple[str, int]]:
        return list(self._store)

    @property
    def kinds(self) -> set[str]:
        return {k for k, _ in self._store}

    @property
    def layers(self) -> list[int]:
        return sorted({layer for _, layer in self._store if layer >= 0})

    @property
    def seq_len(self) -> int:
        return int(self.tokens.shape[-1])

    @property
    def nbytes(self) -> int:
        """Bytes held by the recorded tensors (logits, mask and tokens excluded)."""
        return sum(t.element_size() * t.nelement() for t in self._store.values())

    def stack(self, kind: str, batch: int = 0) -> np.ndarray:
        """float32 numpy of ``kind`` for every recorded layer, batch row ``batch``: [L, ...]."""
        kind = hook_name(kind)
        layers = [layer for layer in self.layers if (kind, layer) in self._store]
        if not layers:
            raise KeyError(f"trace has no {kind!r}; recorded kinds: {sorted(self.kinds)}")
        return np.stack([self._store[(kind, layer)][batch].float().numpy() for layer in layers])

    def take_stack(self, kind: str, batch: int = 0) -> np.ndarray:
        """Like :meth:`stack` but in the recorded dtype, and each layer leaves the trace as it is copied
        (peak memory: the result plus one layer, not twice the result). The trace no longer has ``kind``."""
        kind = hook_name(kind)
        layers = [layer for layer in self.layers if (kind, layer) in self._store]
        if not layers:
            raise KeyError(f"trace has no {kind!r}; recorded kinds: {sorted(self.kinds)}")
        first = self._store[(kind, layers[0])][batch]
        out = np.empty((len(layers), *first.shape), dtype=first.numpy().dtype)
        for i, layer in enumerate(layers):
            out[i] = self._store.pop((kind, layer))[batch].numpy()
        return out

    def resid_norms(self, batch: int = 0) -> tuple[list[str], np.ndarray]:
        """‖residual stream‖₂ at every checkpoint and position: (names, [points, T]).

        Points: ``embed`` (the input of layer 0), then ``L{l}.mid`` and ``L{l}.post`` per layer.
        Needs ``resid_pre`` of layer 0 and ``resid_mid``/``resid_post`` of every layer.
        """
        names: list[str] = []
        rows: list[np.ndarray] = []
        layers = self.layers
        if layers and self.has("resid_pre", layers[0]):
            names.append("embed" if layers[0] == 0 else f"L{layers[0]}.pre")
            rows.append(self._store[("resid_pre", layers[0])][batch].float().norm(dim=-1).numpy())
        for layer in layers:
            for kind, tag in (("resid_mid", "mid"), ("resid_post", "post")):
                if self.has(kind, layer):
                    names.append(f"L{layer}.{tag}")
                    rows.append(self._store[(kind, layer)][batch].float().norm(dim=-1).numpy())
        if not rows:
            raise KeyError("trace recorded no residual stream (kinds resid_pre/resid_mid/resid_post)")
        return names, np.stack(rows)

    def to_numpy(self, batch: int = 0) -> dict[str, np.ndarray]:
        """Every stacked per-layer kind for one batch row, plus mask and logits, as float32 numpy."""
        out: dict[str, np.ndarray] = {}
        for kind in sorted(self.kinds):
            if kind in GLOBAL_KINDS:
                out[kind] = self._store[(kind, -1)][batch].float().numpy()
            else:
                out[kind] = self.stack(kind, batch)
        out["mask"] = self.mask.numpy()
        out["logits"] = self.logits[batch].numpy()
        return out

    def __repr__(self) -> str:
        return (
            f"Trace(T={self.seq_len}, layers={self.layers}, kinds={sorted(self.kinds)}, "
            f"{self.nbytes / 1e6:.1f} MB)"
        )


@contextlib.contextmanager
def eval_mode(model):
    """``model`` in evaluation mode inside the block, each module's mode restored after it. Only the
    modules in training mode are switched (their ``training`` flag set directly): ``model.eval()``
    and ``model.train(was)`` each walked all of SmolLM2's 820 modules through ``nn.Module.__setattr__``,
    ~14 ms per call, a twentieth of a 64-token recorded run, even for a model already in evaluation mode."""
    training = [m for m in model.modules() if m.training]
    for m in training:
        m.__dict__["training"] = False
    try:
        yield model
    finally:
        for m in training:
            m.__dict__["training"] = True


def run_with_trace(
    model,
    tokens,
    *,
    kinds: Kinds = None,
    layers: Iterable[int] | None = None,
    dtype: torch.dtype | None = None,
    hooks=(),
    sized: bool = False,
    into: dict[str, np.ndarray | Sink] | None = None,
    position_offset: int = 0,
) -> Trace:
    """One recorded run: the :class:`Trace` of ``tokens`` through ``model`` — the one way to record.

    ``tokens``: a :class:`~model.interp.prompt.Prompt` (make one from text with
    :func:`~model.interp.prompt.encode_prompt`), token ids [T], or a tensor [T] / [B, T]. ``kinds``
    (hook names, or a predicate over them: :func:`check_kinds`) and ``layers`` choose what is recorded
    (all by default; an unknown kind is a ValueError naming the valid ones); ``dtype`` the stored
    precision (float32 by default; logits are always float32); ``hooks``: interventions active during
    the pass ({name: fn} or (name, fn) pairs, e.g. :func:`model.nn.hooks.ablate_heads`), run before
    the recording at the same points. A trace the machine cannot hold is refused first
    (:class:`~model.budget.sizing.ModelTooLarge`, in milliseconds), unless ``sized``: the caller's plan
    (:func:`~model.interp.plan.plan_prompt`) has already sized it. ``into``: {kind: array [n layers
    recorded, ...]} written in place of keeping those kinds (batch row 0, layers in ascending order;
    the trace then has no such kind), so a caller that wants one array of every layer gets it without
    a second copy; or {kind: :class:`Sink`}, given each layer's row as it is made (a file written
    layer by layer: one layer in memory, never all of them). ``position_offset`` places the tokens at
    positions ``offset..offset+T−1`` (the model's ``forward``). Runs in evaluation mode under
    ``torch.no_grad`` and restores the model's mode.
    A layer whose scores or pattern are recorded runs the explicit softmax; its logits equal the fused
    path's to float32 precision.
    """
    ids = getattr(tokens, "ids", tokens)
    idx = torch.as_tensor(ids, dtype=torch.long, device=model.device)
    if idx.dim() == 1:
        idx = idx[None]
    if idx.shape[-1] == 0:
        raise ValueError("the prompt encodes to no tokens")
    dtype = dtype or torch.float32
    kinds = check_kinds(kinds)
    if not sized:
        _check_fits(model, idx, kinds, layers, dtype)
    rec = Recorder(
        layers=None if layers is None else frozenset(layers),
        kinds=kinds,
        dtype=dtype,
        config=model.config,
        into=into,
    )
    # the interventions attach first, so they run before the recording at the same points
    with (
        torch.no_grad(),
        eval_mode(model),
        model.hooks(hooks),
        model.hooks(rec.hooks(model.config.core.n_layers, model.config.n_rep, set(model.hook_points()))),
    ):
        model(idx, position_offset=position_offset)
    return rec.trace(idx)


def _check_fits(model, idx: torch.Tensor, kinds, layers, dtype: torch.dtype) -> None:
    """Refuse (:class:`model.budget.sizing.ModelTooLarge`, in milliseconds) a trace the machine cannot hold:
    every [T, T] kind costs ``L·H·T²·s`` bytes (module docstring)."""
    from model.budget.sizing import check

    n_layers = len({int(i) for i in layers}) if layers is not None else None
    need = inspection_need(
        model.config,
        int(idx.shape[-1]),
        kinds=tuple(ALL_KINDS if kinds is None else kinds),
        n_layers=n_layers,
        bytes_per_value=torch.empty((), dtype=dtype).element_size(),
        batch=int(idx.shape[0]),
    )
    check(need, device=idx.device)
