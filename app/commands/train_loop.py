"""`attention-lab train` once its trainer is built: the run folder, the progress line, Ctrl-C, the summary.

:func:`train_into` trains ``trainer`` to its step budget into the run folder ``out``
(model/io/runfolder.py): rank 0 alone prints, logs rows to ``log.jsonl`` (every ``--log-every``
steps, every evaluation and the last step), writes probe frames to ``probes/`` (a
:class:`~model.train.probes.Prober` callback), saves ``checkpoint/`` every ``--save-every`` steps and
at the end, and keeps ``run.json``'s status. Ctrl-C stops after the current step and saves (under
``torchrun`` the ranks agree on the step); a second one aborts.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time

from app.cli import UserError
from model.atomic import writing
from model.io.checkpoint import CheckpointError
from model.io.revisions import drop_kept_after, keep_checkpoint
from model.io.runfolder import RunFolderError, RunWriter
from model.train.distributed import DistributedError, all_reduce_sum
from model.train.probes import Prober
from model.train.trainer import Trainer, TrainingDiverged


def _fmt_rate(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def _fmt_time(s: float) -> str:
    s = round(s)
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


def train_into(trainer: Trainer, out: str, args: argparse.Namespace, dist) -> int:
    """Train ``trainer`` into the run folder ``out`` as the flags ``args`` say; the exit code
    (0 done, 130 stopped by Ctrl-C, 1 diverged or a rank lost)."""
    main = dist.is_main
    say = print if main else (lambda *a, **k: None)
    writer = None
    if main:
        try:
            writer = RunWriter(out, resume=trainer.step > 0, extra_log=args.log_json)
        except (RunFolderError, OSError) as exc:
            raise UserError(str(exc)) from None
        if args.keep_checkpoints:  # kept saves of an earlier run past this start belong to another history
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
            with writing(out, what=f"the checkpoint in {out!r}"):  # one line, as every writer's
                trainer.save(writer.checkpoint)
                if args.keep_checkpoints:
                    keep_checkpoint(out, writer.checkpoint, trainer.step)
        except CheckpointError as exc:
            raise UserError(str(exc)) from None
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
