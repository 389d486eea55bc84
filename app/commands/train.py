"""`attention-lab train`: train a model on a corpus or synthetic task and save a checkpoint.

The model's shape comes from ``--config FILE.json`` and/or config flags (``--n-layers 2 --d-model 64
...``, one per GPTConfig field; flags win over the file); without either, a shape that suits the data
(the default GPT for text, a 2-layer model for tasks). Training settings default likewise to what
suits the data, and each flag overrides one. ``--resume DIR`` continues a checkpoint exactly (its
shape and settings; flags given override settings, e.g. a larger ``--steps``).

On a terminal the progress is one updating line; otherwise plain lines every ``--log-every`` steps.
``--log-json FILE`` writes one JSON object per logged step (every ``--log-every`` steps, every
evaluation and the last step). Ctrl-C stops after the current step and saves; a second one aborts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

HELP = "Train a model on a corpus or synthetic task and save a checkpoint."

#: TrainSettings fields with a flag: name → (type, help).
SETTING_FLAGS: dict[str, tuple[type, str]] = {
    "steps": (int, "total optimizer steps (with --resume: the new total)"),
    "batch_size": (int, "sequences per step"),
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
}


def _config_fields():
    from model.config import GPTConfig

    return [f for f in dataclasses.fields(GPTConfig) if f.name != "vocab_size"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    from model.config import CHOICES, FIELD_HELP

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

    out = p.add_argument_group("output")
    out.add_argument("--out", metavar="DIR", help="checkpoint directory to write (default: the --resume one)")
    out.add_argument("--resume", metavar="DIR", help="continue training this checkpoint exactly")
    out.add_argument("--log-json", metavar="FILE", help="write one JSON object per logged step")
    out.add_argument("--log-every", type=int, default=10, metavar="N", help="log every N steps (default 10)")
    out.add_argument(
        "--save-every",
        type=int,
        default=None,
        metavar="N",
        help="save the checkpoint every N steps (default: at every evaluation; always at the end)",
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


def _build(args):
    """(trainer, out_dir) from the arguments; user mistakes raise UserError/ConfigError."""
    from app.cli import UserError
    from model.checkpoint import CheckpointError, check_save_target, clean_stale_temps
    from model.config import ConfigError, GPTConfig
    from model.data import DEFAULT_SOURCE, resolve_source
    from model.train import Trainer, recommended_config, recommended_settings

    config_changes = {f.name: getattr(args, f"cfg_{f.name}") for f in _config_fields()}
    config_changes = {k: v for k, v in config_changes.items() if v is not None}
    overrides = {name: getattr(args, f"set_{name}") for name in [*SETTING_FLAGS, "amp"]}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    for flag, value in (("--log-every", args.log_every), ("--save-every", args.save_every)):
        if value is not None and not 1 <= value <= 10**9:
            raise UserError(f"{flag} {value}: must be a whole number from 1 to 1,000,000,000")

    out = args.out or args.resume
    if not out:
        raise UserError("--out DIR is required: where to save the checkpoint")
    try:
        check_save_target(out)  # before the run: a bad or read-only --out fails now, not after it
    except CheckpointError as exc:
        raise UserError(str(exc)) from None
    clean_stale_temps(out)  # what a killed earlier run left beside it

    try:
        if args.resume:
            if args.config or config_changes:
                given = "--config" if args.config else "--" + next(iter(config_changes)).replace("_", "-")
                raise UserError(
                    f"{given} cannot change a model being resumed: its shape comes from {args.resume}"
                )
            source = None
            if args.corpus:
                from model.checkpoint import load_checkpoint

                tok = load_checkpoint(args.resume, with_train_state=False).tokenizer
                source = resolve_source(args.corpus, tokenizer=tok)
            trainer = Trainer.from_checkpoint(args.resume, source=source, overrides=overrides)
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
            trainer = Trainer(config, source, settings)
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
    import json
    import math
    import signal
    import time
    import warnings

    from app.cli import UserError
    from model.checkpoint import CheckpointError
    from model.train import TrainingDiverged

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer, out = _build(args)
    for w in caught:
        print(f"attention-lab train: warning: {w.message}", file=sys.stderr)

    log = None
    if args.log_json:
        try:
            log = open(args.log_json, "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
        except OSError as exc:
            raise UserError(f"cannot write --log-json {args.log_json}: {exc.strerror or exc}") from None

    s = trainer.settings
    cfg = trainer.config
    V = trainer.tokenizer.vocab_size
    print(
        f"training {trainer.model.num_params():,} parameters ({cfg.n_layers} layers × {cfg.n_heads} heads, "
        f"d_model {cfg.d_model}) on {trainer.source.name} (vocabulary {V}), {trainer.device}, "
        f"steps {trainer.step}→{s.steps}, batch {s.batch_size}×{trainer.seq_len}",
        flush=True,
    )
    progress = Progress(sys.stdout, s.steps, trainer.step, args.log_every)
    save_every = args.save_every or s.eval_every
    saved_step: int | None = None
    interrupted = False

    def on_sigint(signum, frame):
        nonlocal interrupted
        if interrupted:
            raise KeyboardInterrupt
        interrupted = True
        trainer.stop()
        sys.stderr.write("\nstopping after this step and saving (Ctrl-C again to abort)\n")

    def save() -> None:
        nonlocal saved_step
        try:
            trainer.save(out)
        except CheckpointError as exc:
            raise UserError(str(exc)) from None
        except OSError as exc:
            raise UserError(f"cannot save the checkpoint to {out}: {exc.strerror or exc}") from None
        saved_step = trainer.step

    t_run = time.perf_counter()
    first_step = trainer.step

    def callback(event) -> None:
        done = event.step - first_step
        remaining = None
        if done:
            per_step = (time.perf_counter() - t_run) / done
            remaining = per_step * (s.steps - event.step)
        progress.update(event, remaining)
        if log is not None and (
            event.step % args.log_every == 0 or event.val_loss is not None or event.step == s.steps
        ):
            log.write(json.dumps(event.to_dict()) + "\n")
            log.flush()
        if event.step % save_every == 0 and event.step != s.steps:
            save()

    previous = None
    try:
        try:
            previous = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not the main thread
            previous = None
        try:
            trainer.run(callback=callback)
        except TrainingDiverged as exc:
            progress.close()
            kept = (
                f"the checkpoint of step {saved_step} in {out} is intact"
                if saved_step is not None
                else "nothing was saved"
            )
            print(f"attention-lab train: error: {exc}; {kept}", file=sys.stderr)
            return 1
        progress.close()
        save()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if log is not None:
            log.close()

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
