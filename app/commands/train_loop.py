"""`attention-lab train` once its trainer is built: the run folder, the progress line, Ctrl-C, the summary.

:func:`train_into` trains ``trainer`` to its step budget into the run folder ``out``
(model/io/runs/folder.py): rank 0 alone prints, logs rows to ``log.jsonl`` (every ``--log-every``
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
from model.io.checkpoint.saved import CheckpointError
from model.io.history.revisions import drop_kept_after, keep_checkpoint
from model.io.runs.folder import RunFolderError, RunWriter
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
    writer = _open_run_folder(trainer, out, args) if main else None
    if main:
        print(_describe(trainer, dist), flush=True)
    run = _Run(trainer, out, args, dist, writer)
    previous = None
    status = "failed"
    try:
        try:
            previous = signal.signal(signal.SIGINT, run.on_sigint)
        except ValueError:  # not the main thread
            previous = None
        if not run.train():
            return 1
        status = "stopped" if run.interrupted else "finished"
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if writer is not None:
            writer.close()
            writer.status(status, step=trainer.step, checkpoint_step=run.saved_step)

    if main:
        _summarise(trainer, out, run.interrupted, time.perf_counter() - run.t_run)
    return 130 if run.interrupted else 0


def _open_run_folder(trainer: Trainer, out: str, args: argparse.Namespace) -> RunWriter:
    """Rank 0's writer of the run folder ``out`` (a resumed run appends to it)."""
    try:
        resume_step = trainer.step if trainer.step > 0 else None  # its log goes on from the save
        writer = RunWriter(out, resume_step=resume_step, extra_log=args.log_json)
    except (RunFolderError, OSError) as exc:
        raise UserError(str(exc)) from None
    if args.keep_checkpoints:  # kept saves of an earlier run past this start belong to another history
        drop_kept_after(out, trainer.step)
    return writer


def _describe(trainer: Trainer, dist) -> str:
    """The line that opens the run: the model, the data, the device and ranks, the steps and batch."""
    s = trainer.settings
    cfg = trainer.config
    ranks = f", {trainer.world_size} processes ({dist.backend})" if trainer.world_size > 1 else ""
    micro = trainer.engine.grad_accum
    accum = f" in {micro} micro-batches" if micro > 1 else ""
    return (
        f"training {trainer.model.num_params():,} parameters ({cfg.core.n_layers} layers × "
        f"{cfg.attention.n_heads} heads, "
        f"d_model {cfg.core.d_model}) on {trainer.source.name} (vocabulary {trainer.tokenizer.vocab_size}), "
        f"{trainer.device}{ranks}, steps {trainer.step}→{s.steps}, batch {s.batch_size}×{trainer.seq_len}"
        f"{accum}"
    )


class _Run:
    """What one :func:`train_into` keeps between the trainer's steps: rank 0's writer (None on the
    other ranks) and progress line, whether Ctrl-C was pressed, and the step last saved."""

    def __init__(self, trainer: Trainer, out: str, args: argparse.Namespace, dist, writer: RunWriter | None):
        self.trainer, self.out, self.args, self.dist, self.writer = trainer, out, args, dist, writer
        self.steps = steps = trainer.settings.steps
        self.progress = Progress(sys.stdout, steps, trainer.step, args.log_every) if dist.is_main else None
        self.save_every = args.save_every or trainer.settings.eval_every
        self.saved_step: int | None = None
        self.interrupted = False
        if writer is not None:
            trainer.add_callback("on_step_end", Prober(post=writer.probe))
            writer.status("running", steps=steps, world_size=trainer.world_size, start_step=trainer.step)
        self.t_run = time.perf_counter()
        self.first_step = trainer.step

    def on_sigint(self, signum, frame) -> None:
        """Ctrl-C: stop after this step (a second one aborts)."""
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        if not self.dist.active:  # several ranks agree on the step to stop at (see callback)
            self.trainer.control.stop()
        if self.dist.is_main:
            sys.stderr.write("\nstopping after this step and saving (Ctrl-C again to abort)\n")

    def save(self) -> None:
        """Rank 0 saves the checkpoint (and keeps it with --keep-checkpoints)."""
        if self.writer is None:
            return
        out = self.out
        try:
            with writing(out, what=f"the checkpoint in {out!r}"):  # one line, as every writer's
                self.trainer.save(self.writer.checkpoint)
                if self.args.keep_checkpoints:
                    keep_checkpoint(out, self.writer.checkpoint, self.trainer.step)
        except CheckpointError as exc:
            raise UserError(str(exc)) from None
        self.saved_step = self.trainer.step

    def callback(self, event) -> None:
        """After each step: the ranks agree on a Ctrl-C; rank 0 shows progress, logs and saves."""
        if self.dist.active and all_reduce_sum([float(self.interrupted)], self.dist)[0] > 0:
            self.trainer.control.stop()
        if self.writer is None or self.progress is None:
            return
        steps = self.steps
        done = event.step - self.first_step
        remaining = None
        if done:
            per_step = (time.perf_counter() - self.t_run) / done
            remaining = per_step * (steps - event.step)
        self.progress.update(event, remaining)
        if event.step % self.args.log_every == 0 or event.val_loss is not None or event.step == steps:
            self.writer.log(event.to_dict())
        if event.step % self.save_every == 0 and event.step != steps:
            self.save()

    def kept(self) -> str:
        if self.saved_step is not None:
            return f"the checkpoint of step {self.saved_step} in {self.out} is intact"
        return "nothing was saved by this run"

    def train(self) -> bool:
        """Run the trainer to its last step (or a Ctrl-C) and save: True; False when it diverged or a
        rank was lost, said in one line."""
        main = self.dist.is_main
        try:
            self.trainer.run(callback=self.callback)
        except TrainingDiverged as exc:
            self.close_progress()
            if main:
                print(f"attention-lab train: error: {exc}; {self.kept()}", file=sys.stderr)
            return False
        except DistributedError as exc:
            self.close_progress()
            where = self.kept() if main else "rank 0 saves"
            print(f"attention-lab train: error: {exc}; {where}", file=sys.stderr)
            return False
        self.close_progress()
        self.save()
        return True

    def close_progress(self) -> None:
        if self.progress is not None:
            self.progress.close()


def _summarise(trainer: Trainer, out: str, interrupted: bool, wall: float) -> None:
    """Rank 0's last lines: the losses, the time and speed, where it was saved and what to run next."""
    V = trainer.tokenizer.vocab_size
    val = next((h["val_loss"] for h in reversed(trainer.history) if h.get("val_loss") is not None), None)
    last = trainer.history[-1] if trainer.history else None
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
