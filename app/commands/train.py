"""`attention-lab train`: train a model on a corpus or synthetic task and save a checkpoint.

The model's shape comes from ``--config FILE.json`` and/or config flags (``--n-layers 2 --d-model 64
...``, one per GPTConfig field; flags win over the file); without either, a shape that suits the data
(the default GPT for text, a 2-layer model for tasks). Training settings default likewise to what
suits the data, and each flag overrides one. ``--resume DIR`` continues a checkpoint exactly (its
shape and settings; flags given override settings, e.g. a larger ``--steps``).

``--out DIR`` is a run folder (model/io/runs/folder.py): ``log.jsonl`` (one JSON object per logged step:
every ``--log-every`` steps, every evaluation and the last step), ``checkpoint/`` (saved every
``--save-every`` steps and at the end; ``DIR`` itself opens as that checkpoint; with
``--keep-checkpoints`` every save is also kept as ``checkpoints/step-NNNNNNNN/``), ``probes/`` (with
``--probe-every K``) and ``run.json``; the app follows it live (File → Follow a run folder…).
``--log-json FILE`` writes the same rows to a second file. On resume both logs are appended to, from
the checkpoint's step: rows a killed run logged after its last save are cut first.

Nothing of the user's is replaced or deleted: ``--out`` must be missing, empty or a run folder of ours
(``run.json`` says so and everything in it is the run's own), and one that holds a checkpoint (a trained
model) is replaced only with ``--overwrite``: without it, and unless it is the run ``--resume``
continues, the refusal names that run's status, step and date; ``--log-json`` must be a new file or an
earlier run's log, outside the run folder and none of the run's inputs; ``--resume`` refuses a
checkpoint whose training state is missing or damaged; a folder another run is writing is refused naming
that run's PID (model/io/runs/lock.py). Each is one line, before anything is written.

On a terminal the progress is one updating line; otherwise plain lines every ``--log-every`` steps.
Ctrl-C stops after the current step and saves; a second one aborts.

Under ``torchrun`` every process trains a shard of each global batch with DistributedDataParallel
(model/train/distributed.py); rank 0 alone prints, logs, probes and saves.

This module is the command: its flags and the trainer they build; the run itself, once built, is
``app/commands/train_loop.py``. Its imports sit at the top: ``--dtype``'s choices come from the engine,
which imports torch, so a ``train`` command line pays for torch before it is parsed anyway.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli import UserError
from app.commands.train_loop import train_into
from model.config import CHOICES, FIELD_HELP, ConfigError, GPTConfig
from model.io.checkpoint.saved import CheckpointError, check_save_target, load_checkpoint
from model.io.runs.folder import CHECKPOINT_DIR, RunFolderError, check_extra_log, check_run_folder
from model.io.runs.leftovers import clean_run_temps, saved_run
from model.io.runs.lock import RunLock, refuse_if_busy
from model.text.sources import DEFAULT_SOURCE, resolve_source
from model.train.distributed import DEFAULT_TIMEOUT_S, DistributedError, close, init
from model.train.engine import DTYPES
from model.train.recipes import recommended_config, recommended_settings
from model.train.trainer import Trainer

HELP = "Train a model on a corpus or synthetic task and save a checkpoint."

EPILOG = """\
data parallel: run under torchrun, one process per GPU (or per CPU socket), e.g.
  torchrun --nproc_per_node=8 -m app.main train --corpus FILE --batch-size 256 --out RUN
--batch-size is the GLOBAL batch: every rank draws the same seeded batch and trains its own
contiguous 1/world_size of its rows (disjoint, deterministic); --grad-accum K splits each rank's
rows into K micro-batches when they do not fit (batch size must be a multiple of world_size*K).
Loss, validation and logs are global means, written by rank 0 only; log rows and the checkpoint
record world_size. --resume works at any world size. NCCL on CUDA, gloo on the CPU; a rank that
dies or hangs makes the others stop with an error (at once, or after --dist-timeout seconds).
--dtype and TF32 apply on CUDA, --compile where torch.compile works (on the CPU it needs a C++
compiler); where one does not apply it is off and one line says so. AdamW is fused (one kernel over
every parameter) on CUDA and on the CPU.
"""

#: TrainSettings fields with a flag: name → (type, help).
SETTING_FLAGS: dict[str, tuple[type, str]] = {
    "steps": (int, "total optimizer steps (with --resume: the new total)"),
    "batch_size": (int, "sequences per step: the global batch, shared by all processes"),
    "seq_len": (int, "tokens per sequence (at most the context length)"),
    "lr": (float, "peak learning rate"),
    "warmup": (int, "steps of linear warmup before the cosine decay"),
    "min_lr": (float, "learning rate at the end of the cosine (default lr/10)"),
    "weight_decay": (float, "AdamW weight decay on matrices"),
    "grad_clip": (float, "clip the gradient norm to this (0 = off)"),
    "eval_every": (int, "measure the validation loss every N steps"),
    "eval_batches": (int, "validation batches per measurement"),
    "seed": (int, "seed of the initial weights and of the batches"),
    "device": (str, "auto, cpu, cuda, cuda:N or mps"),
    "threads": (int, "CPU threads (0 = every core)"),
    "probe_every": (int, "write the probe prompt's attention to DIR/probes every N steps (0 = off)"),
}


def _config_fields():
    return [f for f in GPTConfig.fields() if f.name != "vocab_size"]


_YARN = ("rope_beta_fast", "rope_beta_slow", "rope_truncate", "rope_attn_factor")
#: Config flags that mean something only beside another setting: field → (whether the final config
#: uses it, the setting it needs). Given without that setting, such a flag is refused, not ignored.
NEEDS: dict[str, tuple[Callable[[GPTConfig], bool], str]] = {
    "rope_base": (lambda c: c.positional.positions == "rope", "--positions rope"),
    "rope_factor": (lambda c: c.positional.rope_scaling != "none", "--rope-scaling linear, llama3 or yarn"),
    "rope_low_freq_factor": (lambda c: c.positional.rope_scaling == "llama3", "--rope-scaling llama3"),
    "rope_high_freq_factor": (lambda c: c.positional.rope_scaling == "llama3", "--rope-scaling llama3"),
    "rope_original_context": (
        lambda c: c.positional.rope_scaling in ("llama3", "yarn"),
        "--rope-scaling llama3 or yarn",
    ),
    **{name: (lambda c: c.positional.rope_scaling == "yarn", "--rope-scaling yarn") for name in _YARN},
    **{
        name: (
            lambda c: c.feed_forward.n_experts is not None,
            "--n-experts (a mixture-of-experts feed-forward)",
        )
        for name in ("n_experts_per_token", "router", "router_aux_loss", "router_topk_groups")
    },
}


def _check_needs(config: GPTConfig, given: dict) -> None:
    """Refuse a config flag ``given`` that the built ``config`` would ignore (``--rope-factor`` without
    ``--rope-scaling``): one line naming the flag and the setting it needs."""
    for name in given:
        if name in NEEDS and not NEEDS[name][0](config):
            flag = "--" + name.replace("_", "-")
            raise UserError(
                f"{flag} only means something with {NEEDS[name][1]}: add that, or leave {flag} out"
            )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter

    p.add_argument("--config", metavar="FILE.json", help="model config file (flags below override it)")
    shape = p.add_argument_group("model shape (each overrides --config)")
    for f in _config_fields():
        shape.add_argument("--" + f.name.replace("_", "-"), **_shape_flag(f))

    data = p.add_argument_group("data")
    data.add_argument(
        "--corpus",
        default=None,
        metavar="SOURCE",
        help="builtin:NAME, task:NAME[:key=value,...] or a UTF-8 text file (default builtin:stdlib)",
    )

    _add_training(p)
    _add_output(p)


def _shape_flag(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """The add_argument keywords of the GPTConfig field ``f``'s flag (``--n-layers`` for n_layers): its
    choices, on/off for a bool, N for a whole number, X for a float; else text (window_pattern's
    letters). Its value lands in ``cfg_<field>`` (None when not given)."""
    common: dict[str, Any] = {"dest": f"cfg_{f.name}", "default": None, "help": FIELD_HELP.get(f.name, "")}
    kind = str(f.type)
    if f.name in CHOICES:
        return {**common, "choices": CHOICES[f.name]}
    if kind.startswith("bool"):
        return {**common, "action": argparse.BooleanOptionalAction}
    if kind.startswith("int"):
        return {**common, "type": int, "metavar": "N"}
    if kind.startswith("float"):
        return {**common, "type": float, "metavar": "X"}
    return {**common, "metavar": "LETTERS"}


def _add_training(p: argparse.ArgumentParser) -> None:
    """The TrainSettings flags (:data:`SETTING_FLAGS`, each lands in ``set_<field>``) and how the run
    computes: precision, micro-batches, torch.compile, the ranks' timeout."""
    train = p.add_argument_group("training (defaults suit the data source)")
    for name, (kind, help_text) in SETTING_FLAGS.items():
        metavar = "NAME" if kind is str else ("N" if kind is int else "X")
        train.add_argument(
            "--" + name.replace("_", "-"),
            dest=f"set_{name}",
            type=kind,
            default=None,
            metavar=metavar,
            help=help_text,
        )
    train.add_argument(
        "--no-amp",
        dest="set_amp",
        action="store_false",
        default=None,
        help="train in float32 on CUDA too (CPU always does)",
    )
    train.add_argument(
        "--grad-accum",
        type=int,
        default=1,
        metavar="K",
        help="split each rank's share of the global batch into K micro-batches (default 1)",
    )
    train.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="CUDA precision: autocast bf16, fp16 (with a GradScaler) or fp32; "
        "auto = bf16 where supported unless --no-amp (CPU: always fp32)",
    )
    train.add_argument("--compile", action="store_true", help="torch.compile the model for training")
    train.add_argument(
        "--dist-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds a rank waits for the others before failing (default {DEFAULT_TIMEOUT_S:g})",
    )


def _add_output(p: argparse.ArgumentParser) -> None:
    """The run folder, resuming, the logs and the saves."""
    out = p.add_argument_group("output")
    out.add_argument(
        "--out",
        metavar="DIR",
        help="run folder to write: log.jsonl, checkpoint/, probes/ (default: the --resume one); it must "
        "be missing, empty or a run folder an earlier train wrote",
    )
    out.add_argument("--resume", metavar="DIR", help="continue training this checkpoint or run exactly")
    out.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the trained model of the run folder --out (without it, a folder holding a "
        "checkpoint is refused: --resume DIR continues that run instead)",
    )
    out.add_argument(
        "--log-json",
        metavar="FILE",
        help="also write the log rows (DIR/log.jsonl) to FILE: a new file, or the log an earlier run wrote "
        "there (replaced, or appended to on --resume); never a file inside DIR or an input of the run",
    )
    out.add_argument("--log-every", type=int, default=10, metavar="N", help="log every N steps (default 10)")
    out.add_argument(
        "--save-every",
        type=int,
        default=None,
        metavar="N",
        help="save the checkpoint every N steps (default: at every evaluation; always at the end)",
    )
    out.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="also keep every save as DIR/checkpoints/step-NNNNNNNN/ (weights only), a training history "
        "to scrub through (File → Open a training history…)",
    )


def _check_flags(args) -> None:
    """Flags that are wrong whatever the data: one line each, before anything is built."""
    for flag, value in (("--log-every", args.log_every), ("--save-every", args.save_every)):
        if value is not None and not 1 <= value <= 10**9:
            raise UserError(f"{flag} {value}: must be a whole number from 1 to 1,000,000,000")
    if args.grad_accum < 1:
        raise UserError(f"--grad-accum {args.grad_accum}: must be at least 1")
    if not args.dist_timeout > 0:
        raise UserError(f"--dist-timeout {args.dist_timeout:g}: must be a positive number of seconds")


def _check_out(args, *, main: bool = True) -> str:
    """The run folder to write, once it and ``--log-json`` may be written (nothing is written yet);
    ``main``: this process is the one that writes it (rank 0), so a lock held there is another run's
    (the other ranks would see rank 0's own)."""
    if args.corpus is not None and not args.corpus.strip():
        raise UserError("--corpus is empty: give a text file, builtin:NAME or task:NAME (or leave it out)")
    out = args.out or args.resume
    if not out:
        raise UserError("--out DIR is required: the run folder to write")
    try:
        if main:  # first: a run writing there has temporary files of its own
            refuse_if_busy(out)
        check_run_folder(out)
        _refuse_replacing(args, out)
        # before the run: a bad or read-only --out fails now, not after it
        check_save_target(Path(out) / CHECKPOINT_DIR)
        if args.log_json is not None:
            check_extra_log(args.log_json, run=out, inputs=(args.corpus, args.config, args.resume))
    except (RunFolderError, CheckpointError) as exc:
        raise UserError(str(exc)) from None
    return out


def _refuse_replacing(args, out: str) -> None:
    """One line when the run folder ``out`` holds a trained model this run would replace: not the run
    ``--resume`` continues, and no ``--overwrite``. It names the run (:func:`saved_run`) and both ways
    on."""
    if args.overwrite:
        return
    if args.resume and Path(args.resume).resolve() in (
        Path(out).resolve(),
        Path(out).resolve() / CHECKPOINT_DIR,
    ):
        return
    held = saved_run(out)
    if held is not None:
        raise UserError(
            f"--out {out} holds {held}: pass --resume {out} to train on from it, or --overwrite to replace it"
        )


def _build(args, dist, out: str) -> Trainer:
    """The trainer from the arguments; user mistakes raise UserError/ConfigError."""
    config_changes = {f.name: getattr(args, f"cfg_{f.name}") for f in _config_fields()}
    config_changes = {k: v for k, v in config_changes.items() if v is not None}
    overrides = {name: getattr(args, f"set_{name}") for name in [*SETTING_FLAGS, "amp"]}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    options = {"dist": dist, "grad_accum": args.grad_accum, "dtype": args.dtype, "compile": args.compile}

    try:
        if args.resume:
            if args.config or config_changes:
                given = "--config" if args.config else "--" + next(iter(config_changes)).replace("_", "-")
                raise UserError(
                    f"{given} cannot change a model being resumed: its shape comes from {args.resume}"
                )
            source = None
            if args.corpus:
                tok = load_checkpoint(args.resume, with_train_state=False).tokenizer
                source = resolve_source(args.corpus, tokenizer=tok)
            trainer = Trainer.from_checkpoint(args.resume, source=source, overrides=overrides, **options)
            if trainer.step >= trainer.settings.steps:
                given = f"--steps {trainer.settings.steps}" if "steps" in overrides else "its last step"
                raise UserError(
                    f"{args.resume} is already at step {trainer.step} ({given}): "
                    f"pass --steps above {trainer.step} to train on"
                )
        else:
            source = resolve_source(args.corpus or DEFAULT_SOURCE)
            if args.config:
                base = GPTConfig.load(args.config, validate=False)
                config = recommended_config(source, base.replace(**config_changes))
                config = _config_vocab(base.core.vocab_size, config, args.config)
            else:
                config = recommended_config(source)
                config = config.replace(**config_changes)
            config.validate()
            _check_needs(config, config_changes)
            settings = recommended_settings(source, config)
            if "steps" in overrides and "warmup" not in overrides:  # a short run still reaches its peak lr
                settings = settings.replace(warmup=min(settings.warmup, overrides["steps"] // 10))
            settings = settings.replace(**overrides).validate()
            trainer = Trainer(config, source, settings, **options)
    except ConfigError:
        raise
    except ValueError as exc:  # DataError, CheckpointError, DeviceError, TokenizerError: one line each
        raise UserError(str(exc)) from None
    return trainer


def _config_vocab(given, config, where: str):
    """``config`` with the ``vocab_size`` a --config file gave, never silently replaced: below the
    tokenizer's size it is refused, above it kept with a warning (the extra rows are never used)."""
    V = config.core.vocab_size
    if given is None:
        return config
    if isinstance(given, bool) or not isinstance(given, int):
        return config.with_vocab(given)  # validate() names the problem
    if given < V:
        raise UserError(
            f"vocab_size={given} in {where} is below the tokenizer's {V} tokens: omit it (the tokenizer "
            f"decides) or make it at least {V}"
        )
    if given > V:
        warnings.warn(
            f"vocab_size={given} in {where} is larger than the tokenizer's {V} tokens: the other "
            f"{given - V:,} rows of the embedding and head are never used",
            stacklevel=2,
        )
    return config.with_vocab(given)


def run(args: argparse.Namespace) -> int:
    _check_flags(args)
    try:
        dist = init(args.set_device or "auto", args.dist_timeout)
    except (DistributedError, ValueError) as exc:
        raise UserError(str(exc)) from None
    finished = False
    try:
        rc = _run(args, dist)
        finished = rc == 0
        return rc
    finally:
        close(dist, together=finished)


def _run(args: argparse.Namespace, dist) -> int:
    main = dist.is_main
    out = _check_out(args, main=main)
    # rank 0 writes the folder: it holds the lock from before the model is built to the end of the run
    # (a missing --resume folder without --out is not made: reading it says it is missing)
    with RunLock(out, create=bool(args.out)) if main else contextlib.nullcontext() as lock:
        if lock is not None:  # what killed writes left: all of it while the lock keeps other runs out
            clean_run_temps(out, held=lock.held)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer = _build(args, dist, out)
        for w in caught if main else ():
            print(f"attention-lab train: warning: {w.message}", file=sys.stderr)
        for note in trainer.engine.notes if main else ():
            print(f"attention-lab train: note: {note}", file=sys.stderr)
        return train_into(trainer, out, args, dist)
