"""The induction-head phase change, measured the way the app shows it: on the Trainer's probe traces.

Trains ``recommended_config`` / ``recommended_settings`` of ``task:induction`` (a 2-layer model) and,
at every probe trace, computes each head's induction score on the probe prompt (``S G S``: a
segment, a gap, the segment again): the mean attention from each token of the second copy to the
token after its previous occurrence (:func:`model.interp.analysis.heads.induction_score`). Prints step,
seconds, train and validation loss (on the task's scored targets: the predictable part of each
repeat) and the best head's score, then the step where the score jumps.

    python bench/induction_curve.py                    # the task's defaults
    python bench/induction_curve.py --steps 300 --source task:induction:n_symbols=40 --csv curve.csv
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from model.interp.analysis.heads import induction_score
from model.runtime import set_threads
from model.text.sources import resolve_source
from model.train.probes import Prober
from model.train.recipes import recommended_config, recommended_settings
from model.train.trainer import Trainer


def repeat_period(prompt: str) -> int:
    """``P`` such that the prompt's last copy of its segment starts at ``P`` (prompt = S G S)."""
    n = len(prompt)
    best = 0
    for k in range(1, n // 2 + 1):
        if prompt[:k] == prompt[n - k :]:
            best = k
    if best == 0:
        raise ValueError(f"the probe prompt {prompt!r} does not end with a repeat of its beginning")
    return n - best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", default="task:induction")
    p.add_argument("--steps", type=int, default=None, help="default: the task's recommended steps")
    p.add_argument("--probe-every", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--csv", default=None, help="also write the curve to this CSV file")
    p.add_argument("--jump", type=float, default=0.3, help="score that counts as an induction head")
    args = p.parse_args(argv)

    set_threads(args.threads)
    source = resolve_source(args.source)
    config = recommended_config(source)
    settings = recommended_settings(source, config).replace(seed=args.seed, threads=args.threads)
    if args.steps is not None:
        settings = settings.replace(steps=args.steps)
    if args.probe_every is not None:
        settings = settings.replace(probe_every=args.probe_every)
    settings.validate()
    trainer = Trainer(config, source, settings, callbacks={"on_step_end": [Prober()]})  # the probe traces
    prompt = trainer.probe_prompt
    period = repeat_period(prompt)
    print(f"{source.describe()}")
    print(
        f"model: {config.core.n_layers} layers, d_model {config.core.d_model}, {config.attention.n_heads} "
        "heads, context "
        f"{config.core.context_length}; {trainer.model.num_params():,} parameters"
    )
    print(
        f"settings: {settings.steps} steps, batch {settings.batch_size}×{trainer.seq_len}, "
        f"lr {settings.lr:g}, warmup {settings.warmup}, probe every {settings.probe_every}"
    )
    print(
        f"probe prompt {prompt!r} (period {period}); "
        f"loss of a uniform guess ln V = {math.log(source.vocab_size):.2f}"
    )
    print()
    print(f"{'step':>5} {'s':>6} {'train':>6} {'val':>6} {'induction':>9}  head   per layer (max)")
    rows: list[tuple] = []
    t0 = time.perf_counter()
    last_val: float | None = None

    def on_event(event) -> None:
        nonlocal last_val
        if event.val_loss is not None:
            last_val = event.val_loss
        if event.trace is None:
            return
        scores = induction_score(event.trace.stack("pattern"), period)  # [L, H]
        layer, head = np.unravel_index(int(scores.argmax()), scores.shape)
        best = float(scores.max())
        per_layer = " ".join(f"{s:.2f}" for s in scores.max(axis=1))
        elapsed = time.perf_counter() - t0
        val = f"{last_val:6.3f}" if last_val is not None else "     -"
        rows.append((event.step, elapsed, event.train_loss, last_val, best, int(layer), int(head)))
        print(
            f"{event.step:5d} {elapsed:6.1f} {event.train_loss:6.3f} {val} {best:9.3f}  "
            f"L{layer}H{head}   {per_layer}",
            flush=True,
        )

    trainer.run(callback=on_event)
    total = time.perf_counter() - t0
    crossed = next((r for r in rows if r[4] >= args.jump), None)
    jumps = [(b[4] - a[4], a, b) for a, b in itertools.pairwise(rows)]
    print()
    if crossed:
        print(
            f"induction score first >= {args.jump} at step {crossed[0]} ({crossed[1]:.0f} s), "
            f"head L{crossed[5]}H{crossed[6]}"
        )
    else:
        print(f"induction score never reached {args.jump}")
    if jumps:
        _, a, b = max(jumps)
        print(f"largest jump between probes: {a[4]:.2f} → {b[4]:.2f} from step {a[0]} to {b[0]}")
    print(
        f"final: train loss {rows[-1][2]:.3f}, induction {rows[-1][4]:.3f}; {total:.0f} s in all"
        if rows
        else ""
    )
    if args.csv:
        with open(args.csv, "w", encoding="utf-8") as f:
            f.write("step,seconds,train_loss,val_loss,induction,layer,head\n")
            for r in rows:
                f.write(",".join("" if v is None else str(v) for v in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
