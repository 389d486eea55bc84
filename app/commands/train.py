"""`attention-lab train`: train a model on a corpus or synthetic task and save a checkpoint.

The model's shape comes from ``--config FILE.json`` and/or config flags (``--n-layers 2 --d-model 64
...``, one per GPTConfig field; flags win over the file); without either, a shape that suits the data
(the default GPT for text, a 2-layer model for tasks). Training settings default likewise to what
suits the data, and each flag overrides one. ``--resume DIR`` continues a checkpoint exactly (its
shape and settings; flags given override settings, e.g. a larger ``--steps``).

``--out DIR`` is a run folder (model/io/runfolder.py): ``log.jsonl`` (one JSON object per logged step:
every ``--log-every`` steps, every evaluation and the last step), ``checkpoint/`` (saved every
``--save-every`` steps and at the end; ``DIR`` itself opens as that checkpoint; with
``--keep-checkpoints`` every save is also kept as ``checkpoints/step-NNNNNNNN/``), ``probes/`` (with
``--probe-every K``) and ``run.json``; the app follows it live (File → Follow a run folder…).
``--log-json FILE`` writes the same rows to a second file. On resume both logs are appended to.

On a terminal the progress is one updating line; otherwise plain lines every ``--log-every`` steps.
Ctrl-C stops after the current step and saves; a second one aborts.

Under ``torchrun`` every process trains a shard of each global batch with DistributedDataParallel
(model/train/distributed.py); rank 0 alone prints, logs, probes and saves.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

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
--dtype, TF32 and fused AdamW apply on CUDA, --compile where torch.compile works (on the CPU it
needs a C++ compiler); where one does not apply it is off and one line says so.
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
    from model.config import GPTConfig

    return [f for f in dataclasses.fields(GPTConfig) if f.name != "vocab_size"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    from model.config import CHOICES, FIELD_HELP

    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter

    p.add_argument("--config", metavar="FILE.json", help="model config file (flags below override it)")
    shape = p.add_argument_group("model shape (each overrides --config)")
    for f in _config_fields():
        flag = "--" + f.name.replace("_", "-")
        help_text = FIELD_HELP.get(f.name, "")
        kind = str(f.type)
        if f.name in CHOICES:
            shape.add_argument(
                flag, dest=f"cfg_{f.name}", choices=CHOICES[f.name], default=None, help=help_text
            )
        elif kind.startswith("bool"):
            shape.add_argument(
                flag,
                dest=f"cfg_{f.name}",
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        elif kind.startswith("int"):
            shape.add_argument(
                flag, dest=f"cfg_{f.name}", type=int, default=None, metavar="N", help=help_text
            )
        elif kind.startswith("float"):
            shape.add_argument(
                flag, dest=f"cfg_{f.name}", type=float, default=None, metavar="X", help=help_text
            )
        else:
            shape.add_argument(flag, dest=f"cfg_{f.name}", default=None, help=help_text)

    data = p.add_argument_group("data")
    data.add_argument(
        "--corpus",
        default=None,
        metavar="SOURCE",
        help="builtin:NAME, task:NAME[:key=value,...] or a UTF-8 text file (default builtin:stdlib)",
    )

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
    from model.train.distributed import DEFAULT_TIMEOUT_S
    from model.train.engine import DTYPES

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

    out = p.add_argument_group("output")
    out.add_argument(
        "--out",
        metavar="DIR",
        help="run folder to write: log.jsonl, checkpoint/, probes/ (default: the --resume one)",
    )
    out.add_argument("--resume", metavar="DIR", help="continue training this checkpoint or run exactly")
    out.add_argument("--log-json", metavar="FILE", help="also write the log rows (DIR/log.jsonl) to FILE")
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


# ---------------------------------------------------------------------------------------------
def _fmt_rate(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def _fmt_time(s: float) -> str:
    s = int(round(s))
    return f"{s // 60}:{s % 60:02d}"


class Progress:
    """A one-line progress bar on a terminal; plain lines otherwise."""

    def __init__(self, stream, total: int, start: int, log_every: int):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.total = total
        self.start = start
        self.log_every = max(1, log_every)
        self.last_val: float | None = None
        self._width = 0

    def update(self, event, remaining_s: float | None) -> None:
        if event.val_loss is not None:
            self.last_val = event.val_loss
        val = f"  val {self.last_val:.3f}" if self.last_val is not None else ""
        core = (
            f"step {event.step:>{len(str(self.total))}}/{self.total}  train {event.train_loss:.3f}{val}  "
            f"lr {event.lr:.2e}  {_fmt_rate(event.tokens_per_s)} tok/s"
        )
        if self.tty:
            frac = event.step / self.total if self.total else 1.0
            bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
            eta = f"  eta {_fmt_time(remaining_s)}" if remaining_s is not None else ""
            line = f"[{bar}] {core}{eta}"
            pad = " " * max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write("\r" + line + pad)
            self.stream.flush()
        elif event.step % self.log_every == 0 or event.val_loss is not None or event.step == self.total:
            self.stream.write(f"{core}  {event.elapsed:.1f}s\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()


def _check_flags(args) -> None:
    """Flags that are wrong whatever the data: one line each, before anything is built."""
    from app.cli import UserError

    for flag, value in (("--log-every", args.log_every), ("--save-every", args.save_every)):
        if value is not None and not 1 <= value <= 10**9:
            raise UserError(f"{flag} {value}: must be a whole number from 1 to 1,000,000,000")
    if args.grad_accum < 1:
        raise UserError(f"--grad-accum {args.grad_accum}: must be at least 1")
    if not args.dist_timeout > 0:
        raise UserError(f"--dist-timeout {args.dist_timeout:g}: must be a positive number of seconds")


def _build(args, dist):
    """(trainer, out_dir) from the arguments; user mistakes raise UserError/ConfigError."""
    from app.cli import UserError
    from model.config import ConfigError, GPTConfig
    from model.io.atomic_dir import clean_stale_temps
    from model.io.checkpoint import CheckpointError, check_save_target
    from model.io.runfolder import CHECKPOINT_DIR, RunFolderError, check_run_folder
    from model.text.sources import DEFAULT_SOURCE, resolve_source
    from model.train.recipes import recommended_config, recommended_settings
    from model.train.trainer import Trainer

    config_changes = {f.name: getattr(args, f"cfg_{f.name}") for f in _config_fields()}
    config_changes = {k: v for k, v in config_changes.items() if v is not None}
    overrides = {name: getattr(args, f"set_{name}") for name in [*SETTING_FLAGS, "amp"]}
    overrides = {k: v for k, v in overrides.items() if v is not None}

    if args.corpus is not None and not args.corpus.strip():
        raise UserError("--corpus is empty: give a text file, builtin:NAME or task:NAME (or leave it out)")
    out = args.out or args.resume
    if not out:
        raise UserError("--out DIR is required: the run folder to write")
    try:
        check_run_folder(out)
        # before the run: a bad or read-only --out fails now, not after it
        check_save_target(Path(out) / CHECKPOINT_DIR)
    except (RunFolderError, CheckpointError) as exc:
        raise UserError(str(exc)) from None
    clean_stale_temps(Path(out) / CHECKPOINT_DIR)  # what a killed earlier save left beside it
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
                from model.io.checkpoint import load_checkpoint

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
                config = _config_vocab(base.vocab_size, config, args.config)
            else:
                config = recommended_config(source)
                config = config.replace(**config_changes)
            config.validate()
            settings = recommended_settings(source, config)
            if "steps" in overrides and "warmup" not in overrides:  # a short run still reaches its peak lr
                settings = settings.replace(warmup=min(settings.warmup, overrides["steps"] // 10))
            settings = settings.replace(**overrides).validate()
            trainer = Trainer(config, source, settings, **options)
    except ConfigError:
        raise
    except ValueError as exc:  # DataError, CheckpointError, DeviceError, TokenizerError: one line each
        raise UserError(str(exc)) from None
    return trainer, out


def _config_vocab(given, config, where: str):
    """``config`` with the ``vocab_size`` a --config file gave, never silently replaced: below the
    tokenizer's size it is refused, above it kept with a warning (the extra rows are never used)."""
    import warnings

    from app.cli import UserError

    V = config.vocab_size
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
    from app.cli import UserError
    from model.train.distributed import DistributedError, close, init

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
    import json
    import math
    import signal
    import time
    import warnings

    from app.cli import UserError
    from model.io.checkpoint import CheckpointError
    from model.io.runfolder import RunFolderError, RunWriter
    from model.train.distributed import DistributedError, all_reduce_sum
    from model.train.probes import Prober
    from model.train.trainer import TrainingDiverged

    main = dist.is_main
    say = print if main else (lambda *a, **k: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer, out = _build(args, dist)
    for w in caught if main else ():
        print(f"attention-lab train: warning: {w.message}", file=sys.stderr)
    for note in trainer.engine.notes if main else ():
        print(f"attention-lab train: note: {note}", file=sys.stderr)

    writer = None
    if main:
        try:
            writer = RunWriter(out, resume=trainer.step > 0, extra_log=args.log_json)
        except (RunFolderError, OSError) as exc:
            raise UserError(str(exc)) from None
        if args.keep_checkpoints:  # kept saves of an earlier run past this start belong to another history
            from model.io.history import drop_kept_after

            drop_kept_after(out, trainer.step)

    s = trainer.settings
    cfg = trainer.config
    V = trainer.tokenizer.vocab_size
    ranks = f", {trainer.world_size} processes ({dist.backend})" if trainer.world_size > 1 else ""
    accum = trainer.engine.grad_accum
    accum = f" in {accum} micro-batches" if accum > 1 else ""
    say(
        f"training {trainer.model.num_params():,} parameters ({cfg.n_layers} layers × {cfg.n_heads} heads, "
        f"d_model {cfg.d_model}) on {trainer.source.name} (vocabulary {V}), {trainer.device}{ranks}, "
        f"steps {trainer.step}→{s.steps}, batch {s.batch_size}×{trainer.seq_len}{accum}",
        flush=True,
    )
    progress = Progress(sys.stdout, s.steps, trainer.step, args.log_every) if main else None
    save_every = args.save_every or s.eval_every
    saved_step: int | None = None
    interrupted = False
    if writer is not None:
        trainer.add_callback("on_step_end", Prober(post=writer.probe))
        writer.status("running", steps=s.steps, world_size=trainer.world_size, start_step=trainer.step)

    def on_sigint(signum, frame):
        nonlocal interrupted
        if interrupted:
            raise KeyboardInterrupt
        interrupted = True
        if not dist.active:  # several ranks agree on the step to stop at (see callback)
            trainer.control.stop()
        if main:
            sys.stderr.write("\nstopping after this step and saving (Ctrl-C again to abort)\n")

    def save() -> None:
        nonlocal saved_step
        if writer is None:
            return
        try:
            trainer.save(writer.checkpoint)
            if args.keep_checkpoints:
                from model.io.history import keep_checkpoint

                keep_checkpoint(out, writer.checkpoint, trainer.step)
        except CheckpointError as exc:
            raise UserError(str(exc)) from None
        except OSError as exc:
            raise UserError(f"cannot save the checkpoint to {out}: {exc.strerror or exc}") from None
        saved_step = trainer.step

    t_run = time.perf_counter()
    first_step = trainer.step

    def callback(event) -> None:
        if dist.active and all_reduce_sum([float(interrupted)], dist)[0] > 0:
            trainer.control.stop()
        if writer is None:
            return
        done = event.step - first_step
        remaining = None
        if done:
            per_step = (time.perf_counter() - t_run) / done
            remaining = per_step * (s.steps - event.step)
        progress.update(event, remaining)
        if event.step % args.log_every == 0 or event.val_loss is not None or event.step == s.steps:
            writer.log(event.to_dict())
        if event.step % save_every == 0 and event.step != s.steps:
            save()

    def kept() -> str:
        if saved_step is not None:
            return f"the checkpoint of step {saved_step} in {out} is intact"
        return "nothing was saved by this run"

    previous = None
    status = "failed"
    try:
        try:
            previous = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not the main thread
            previous = None
        try:
            trainer.run(callback=callback)
        except TrainingDiverged as exc:
            if progress is not None:
                progress.close()
            if main:
                print(f"attention-lab train: error: {exc}; {kept()}", file=sys.stderr)
            return 1
        except DistributedError as exc:
            if progress is not None:
                progress.close()
            print(f"attention-lab train: error: {exc}; {kept() if main else 'rank 0 saves'}", file=sys.stderr)
            return 1
        if progress is not None:
            progress.close()
        save()
        status = "stopped" if interrupted else "finished"
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if writer is not None:
            writer.close()
            writer.status(status, step=trainer.step, checkpoint_step=saved_step)

    if not main:
        return 130 if interrupted else 0
    val = next((h["val_loss"] for h in reversed(trainer.history) if h.get("val_loss") is not None), None)
    last = trainer.history[-1] if trainer.history else None
    wall = time.perf_counter() - t_run
    if last is not None:
        val_text = f", val loss {val:.3f}" if val is not None else ""
        print(
            f"step {trainer.step}: train loss {last['train_loss']:.3f}{val_text} (ln V = {math.log(V):.2f}); "
            f"{wall:.1f} s, {_fmt_rate(last['tokens_per_s'])} tokens/s"
        )
    print(f"saved {out}" + (" (stopped early)" if interrupted else ""))
    if not interrupted:
        prompt = trainer.probe_prompt.splitlines()[0][:24] if trainer.probe_prompt.strip() else "a"
        print(f"next: attention-lab generate --checkpoint {out} --prompt {json.dumps(prompt)}")
    return 130 if interrupted else 0
