"""Training a sparse autoencoder on one site of one layer, on activations streamed from a corpus.

Each step reads one batch ``x`` [n, d_in] at the site (:class:`~.stream.ActivationStream`: the
forward pass only as deep as the site) and takes one Adam step on

    L = ‖x̃ − x̂‖² + α · L_aux                         (topk)
    L = ‖x̃ − x̂‖² + λ Σ_i f_i ‖W_dec,i‖              (standard: ReLU with an L1 penalty)

averaged over the batch's tokens, where ``x̃ = s·x`` is the activation scaled so that its mean norm is
``√d_in`` (``s`` measured on the first batch, SAELens's ``expected_average_only_in``), so that one
learning rate suits every site. ``L_aux`` is Gao et al.'s (2024) AuxK loss, as SAELens's TopK trainer
has it: the ``k_aux = d_in/2`` largest pre-activations of the dead features reconstruct the live
features' error ``x̃ − x̂``, weighted by ``min(1, dead/k_aux)``; ``α`` = 1/32. Decoder rows are kept unit
norm (their gradient's radial part removed before the step, the rows renormalised after it); ``b_dec``
starts at the first batch's mean. The learning rate is constant, then decays linearly to 0 over the
last fifth of the steps.

A feature is dead once it has not fired in the last ``dead_tokens`` tokens. Each step ``on_step`` gets
a :class:`TrainStep` (tokens seen, MSE, fraction of variance explained, L0, dead features: the live
curves) and :func:`model.progress.report` counts tokens (a cancel stops at the next step).

Resumable: with ``out``, the run's state (the SAE in its scaled space, Adam's moments, the step and with
it the stream's position, the scale, each feature's tokens since it fired, the curves) is written with
the SAE itself into ``out`` whole (:func:`~.format.save_sae` with ``trainer_state.safetensors``) every
``checkpoint_seconds``, when cancelled, and at the end; a second call with the same ``out`` and settings
continues from it, to the same SAE as a run never stopped. The SAE saved is the scaled one folded back
into the activation's own units: ``b_enc/s`` and ``b_dec/s``, ``W_enc`` and the unit ``W_dec`` as they
are, so ``f`` and ``x̂`` are in the site's units.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from safetensors.torch import save as tensors_to_bytes

from model.errors import AttentionLabError
from model.interp.sae.format import WEIGHTS_FILE, save_sae
from model.interp.sae.sae import ARCHITECTURES, SAEConfig, SparseAutoencoder
from model.interp.sae.site import Site
from model.interp.sae.stream import ActivationStream
from model.progress import Cancelled, check, report

STATE_FILE = "trainer_state.safetensors"

#: Gao et al.'s weight of the AuxK loss.
AUX_COEFFICIENT = 1 / 32

#: The share of the steps over which the learning rate decays to 0 at the end.
DECAY_SHARE = 0.2

#: The curves' names, in a :class:`TrainStep`'s order.
CURVES = ("tokens", "mse", "fve", "l0", "dead")


class SAETrainError(AttentionLabError, ValueError):
    """Settings a training run cannot take, or an ``out`` folder it cannot resume (one line)."""


@dataclass
class SAETrainSettings:
    """What one training run is. ``expansion``: d_sae = expansion · d_in (4 to 32), unless ``d_sae`` is
    given (4·d_in to 32·d_in); ``architecture`` ``topk`` (``k`` features per token) or ``standard``
    (ReLU, ``l1_coefficient``);
    ``tokens`` to train on, ``batch_tokens`` a step, from ``corpus`` in prompts of ``seq_len`` tokens drawn
    with ``seed`` (which also seeds the SAE's initial weights); ``dead_tokens``: a feature not firing in
    that many tokens is dead (0: a quarter of ``tokens``, at most 10M)."""

    site: Site
    corpus: str
    tokens: int = 1_000_000
    expansion: int = 8
    d_sae: int = 0
    architecture: str = "topk"
    k: int = 32
    l1_coefficient: float = 5.0
    lr: float = 4e-4
    batch_tokens: int = 4096
    seq_len: int = 128
    seed: int = 0
    dead_tokens: int = 0
    checkpoint_seconds: float = field(default=60.0, compare=False)

    def width(self, d_in: int) -> int:
        return int(self.d_sae) if self.d_sae else int(self.expansion) * d_in

    def dead_window(self) -> int:
        return int(self.dead_tokens) if self.dead_tokens else min(10_000_000, max(1, self.tokens // 4))

    def check(self, config) -> None:
        """Refuse, in one line each, what no run can take (for the model of ``config``)."""

        def whole(name: str, low: int, high: int) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
                raise SAETrainError(f"{name}={v!r}: give a whole number from {low:,} to {high:,}")

        self.site.check(config)
        d_in = self.site.d_in(config)
        if self.d_sae:
            whole("d_sae", 4 * d_in, 32 * d_in)
        else:
            whole("expansion", 4, 32)
        if self.architecture not in ARCHITECTURES:
            raise SAETrainError(
                f"architecture={self.architecture!r}: choose one of {', '.join(ARCHITECTURES)}"
            )
        whole("k", 1, self.width(d_in))
        for name, low, high in (("l1_coefficient", 0.0, 1e6), ("lr", 1e-9, 1.0)):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or not low <= v <= high:
                raise SAETrainError(f"{name}={v!r}: give a number from {low:g} to {high:g}")
        whole("tokens", 1, 10**12)
        whole("batch_tokens", 1, 1 << 20)
        whole("seq_len", 2, config.core.context_length)
        whole("seed", 0, 2**63 - 1)
        whole("dead_tokens", 0, 10**12)
        if not isinstance(self.corpus, str) or not self.corpus.strip():
            raise SAETrainError("corpus is empty: give builtin:NAME, task:NAME or a text file")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["site"] = {"kind": self.site.kind, "layer": self.site.layer}
        d.pop("checkpoint_seconds")
        return d


@dataclass(frozen=True)
class TrainStep:
    """One step's figures: ``step`` of ``steps``, ``tokens`` seen so far, the batch's ``mse`` (mean over
    tokens of ‖x − x̂‖², in the site's units), ``fve`` (1 − Σ‖x − x̂‖² / Σ‖x − x̄‖² over the batch), ``l0``
    (mean features firing per token), ``dead`` features, ``lr``, ``seconds`` since the run began."""

    step: int
    steps: int
    tokens: int
    mse: float
    fve: float
    l0: float
    dead: int
    lr: float
    seconds: float


@dataclass
class SAETrainResult:
    """A finished run: the ``sae`` (in the site's units), the ``curves`` (name -> [steps] array:
    :data:`CURVES`), ``steps`` and ``tokens`` trained, ``seconds`` this call ran, and ``resumed_at``, the
    step a stopped run went on from (0: from the start)."""

    sae: SparseAutoencoder
    curves: dict[str, np.ndarray]
    steps: int
    tokens: int
    seconds: float
    resumed_at: int = 0


class _Run:
    """The state of one run (module docstring), in the scaled space ``x̃ = s·x``."""

    def __init__(self, settings: SAETrainSettings, config: SAEConfig):
        self.settings = settings
        self.sae = SparseAutoencoder(config)
        self.sae.reset_parameters(seed=settings.seed)
        self.optimizer = torch.optim.Adam(self.sae.parameters(), lr=settings.lr)
        self.since_fired = torch.zeros(config.d_sae, dtype=torch.int64)
        self.scale = 0.0
        self.step = 0
        self.curves: dict[str, list[float]] = {name: [] for name in CURVES}

    # ---- one step ---------------------------------------------------------------------------------
    def lr_at(self, step: int, steps: int) -> float:
        decay = max(1, int(steps * DECAY_SHARE))
        return self.settings.lr * min(1.0, (steps - step) / decay)

    def take_step(self, x: torch.Tensor, steps: int) -> TrainStep:
        sae, settings = self.sae, self.settings
        if self.step == 0:
            self.scale = math.sqrt(x.shape[1]) / max(float(x.norm(dim=1).mean()), 1e-12)
            with torch.no_grad():
                sae.b_dec.copy_(x.mean(0) * self.scale)
        xs = x * self.scale
        pre = sae.pre_activations(xs)
        f = sae.activation(pre)
        x_hat = sae.decode(f)
        err = (xs - x_hat).pow(2).sum(-1)
        dead = self.since_fired >= settings.dead_window()
        if settings.architecture == "topk":
            loss = err.mean() + AUX_COEFFICIENT * self.aux_loss(xs, x_hat, pre, dead)
        else:
            loss = err.mean() + settings.l1_coefficient * (f * sae.W_dec.norm(dim=1)).sum(-1).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with torch.no_grad():
            w, g = sae.W_dec.data, sae.W_dec.grad
            assert g is not None
            g.sub_((g * w).sum(1, keepdim=True) * w)  # keep the rows on the unit sphere: no radial part
            lr = self.lr_at(self.step, steps)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            w.div_(w.norm(dim=1, keepdim=True).clamp_min(1e-12))
            fired = (f > 0).any(0)
            self.since_fired += x.shape[0]
            self.since_fired[fired] = 0
            centred = (xs - xs.mean(0)).pow(2).sum()
            fve = 1.0 - float(err.sum() / centred.clamp_min(1e-12))
            l0 = float((f > 0).float().sum(-1).mean())
            mse = float(err.mean()) / self.scale**2
        self.step += 1
        tokens = self.step * x.shape[0]
        n_dead = int((self.since_fired >= settings.dead_window()).sum())
        for name, value in zip(CURVES, (tokens, mse, fve, l0, n_dead), strict=True):
            self.curves[name].append(float(value))
        return TrainStep(self.step, steps, tokens, mse, fve, l0, n_dead, lr, 0.0)

    def aux_loss(self, xs, x_hat, pre, dead) -> torch.Tensor:
        """AuxK: the dead features' top ``d_in/2`` pre-activations reconstruct the error (module
        docstring)."""
        n_dead = int(dead.sum())
        if n_dead == 0:
            return xs.new_zeros(())
        k_aux = min(xs.shape[1] // 2, n_dead)
        scale = min(n_dead / max(1, xs.shape[1] // 2), 1.0)
        top = torch.where(dead[None], pre, -torch.inf).topk(k_aux, dim=-1)
        acts = torch.zeros_like(pre).scatter_(-1, top.indices, top.values.relu())
        recons = acts @ self.sae.W_dec
        return scale * (recons - (xs - x_hat).detach()).pow(2).sum(-1).mean()

    # ---- the SAE in the site's units, and the state on disk ----------------------------------------
    def folded(self) -> SparseAutoencoder:
        """The SAE of ``x`` itself: ``b_enc/s``, ``b_dec/s`` (module docstring)."""
        sae = SparseAutoencoder(self.sae.config)
        with torch.no_grad():
            for name, p in sae.named_parameters():
                p.copy_(getattr(self.sae, name))
            if self.scale:
                sae.b_enc.div_(self.scale)
                sae.b_dec.div_(self.scale)
        return sae.eval()

    def state_bytes(self, finished: bool) -> bytes:
        tensors = {f"sae.{name}": p.detach().clone() for name, p in self.sae.named_parameters()}
        for i, (name, _) in enumerate(self.sae.named_parameters()):
            st = self.optimizer.state.get(self.optimizer.param_groups[0]["params"][i], {})
            for key in ("exp_avg", "exp_avg_sq"):
                if key in st:
                    tensors[f"adam.{name}.{key}"] = st[key].clone()
        tensors["since_fired"] = self.since_fired.clone()
        meta = {"settings": self.settings.to_dict(), "step": self.step, "scale": self.scale,
                "curves": self.curves, "finished": finished}  # fmt: skip
        return tensors_to_bytes(tensors, metadata={"state": json.dumps(meta)})

    def restore(self, folder: Path) -> bool:
        """Take the state written in ``folder``; whether that run had finished."""
        path = folder / STATE_FILE
        try:
            tensors = load_file(path)
            with open(path, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                meta = json.loads(json.loads(fh.read(n))["__metadata__"]["state"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SAETrainError(f"{path} cannot be resumed: {str(exc).splitlines()[0][:120]}") from None
        if meta.get("settings") != self.settings.to_dict():
            raise SAETrainError(
                f"{folder} holds a run of other settings "
                f"({_difference(meta.get('settings'), self.settings)}): "
                "give the same settings to resume it, or another folder"
            )
        try:
            self._take(tensors, meta)
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:  # a state file changed by hand
            raise SAETrainError(f"{path} cannot be resumed: {str(exc).splitlines()[0][:120]}") from None
        return bool(meta.get("finished"))

    def _take(self, tensors: dict[str, torch.Tensor], meta: dict) -> None:
        params = dict(self.sae.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(tensors[f"sae.{name}"])
        state = {}
        for i, name in enumerate(params):
            if f"adam.{name}.exp_avg" in tensors:
                state[i] = {
                    "step": torch.tensor(float(meta["step"])),
                    "exp_avg": tensors[f"adam.{name}.exp_avg"],
                    "exp_avg_sq": tensors[f"adam.{name}.exp_avg_sq"],
                }
        self.optimizer.load_state_dict(
            {"state": state, "param_groups": self.optimizer.state_dict()["param_groups"]}
        )
        self.since_fired = tensors["since_fired"].to(torch.int64)
        self.step, self.scale, self.curves = int(meta["step"]), float(meta["scale"]), meta["curves"]

    def save(self, folder: Path, finished: bool) -> None:
        save_sae(self.folded(), folder, extra={STATE_FILE: self.state_bytes(finished)})


def _difference(saved, settings: SAETrainSettings) -> str:
    now = settings.to_dict()
    if not isinstance(saved, dict):
        return "unreadable"
    diff = [f"{k} {saved.get(k)!r} there, {v!r} now" for k, v in now.items() if saved.get(k) != v]
    return "; ".join(diff[:3]) or "?"


def check_out_folder(out: str | Path) -> Path:
    """Refuse an ``out`` that holds anything but an SAE folder (it is replaced whole at each save)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SAETrainError(f"{out} is a file: name a folder for the SAE")
    if out.is_dir() and any(out.iterdir()) and not (out / WEIGHTS_FILE).is_file():
        raise SAETrainError(
            f"{out} holds other files, and an SAE folder is written whole: name a new or empty folder"
        )
    return out


def train_sae(
    model,
    tokenizer,
    settings: SAETrainSettings,
    *,
    out: str | Path | None = None,
    on_step: Callable[[TrainStep], None] | None = None,
    model_name: str = "",
) -> SAETrainResult:
    """Train an SAE as ``settings`` say (module docstring). ``out``: the folder it is saved to and
    resumed from; ``on_step``: called after every step. Raises :class:`SAETrainError` in one line before
    anything runs, and :class:`model.progress.Cancelled` when cancelled (the state saved first)."""
    config = model.config
    settings.check(config)
    folder = check_out_folder(out) if out is not None else None
    stream = ActivationStream.for_tokens(
        model, tokenizer, settings.site, settings.corpus, tokens=settings.tokens,
        batch_tokens=settings.batch_tokens, seq_len=settings.seq_len, seed=settings.seed,
    )  # fmt: skip
    d_in = settings.site.d_in(config)
    extra = {"corpus": settings.corpus, "seq_len": settings.seq_len, "prepend_bos": bool(stream.prefix),
             "tokens": stream.total_tokens, "settings": settings.to_dict()}  # fmt: skip
    sae_config = SAEConfig(settings.site, d_in, settings.width(d_in), architecture=settings.architecture,
                           k=settings.k, l1_coefficient=settings.l1_coefficient, model_name=model_name,
                           extra=extra)  # fmt: skip
    run = _Run(settings, sae_config)
    finished = folder is not None and (folder / STATE_FILE).is_file() and run.restore(folder)
    resumed_at, steps, t0 = run.step, stream.n_batches, time.monotonic()
    saved_at = t0
    try:
        for batch in [] if finished else stream.batches(start=run.step):
            check()
            step = replace(run.take_step(batch.x, steps), seconds=time.monotonic() - t0)
            report(step.tokens, stream.total_tokens, "tokens")
            if on_step is not None:
                on_step(step)
            if folder is not None and time.monotonic() - saved_at >= settings.checkpoint_seconds:
                run.save(folder, finished=False)
                saved_at = time.monotonic()
    except Cancelled:
        if folder is not None:
            run.save(folder, finished=False)
        raise
    if folder is not None and not finished:
        run.save(folder, finished=True)
    curves = {name: np.asarray(values, dtype=np.float64) for name, values in run.curves.items()}
    return SAETrainResult(run.folded(), curves, run.step, run.step * stream.tokens_per_batch,
                          time.monotonic() - t0, resumed_at)  # fmt: skip


__all__ = [
    "CURVES",
    "STATE_FILE",
    "SAETrainError",
    "SAETrainResult",
    "SAETrainSettings",
    "TrainStep",
    "check_out_folder",
    "train_sae",
]
