"""`attention-lab heads`: every head's scores over a corpus, with intervals, top examples and clusters.

Streams the model over ``--prompts`` N prompts of ``--seq-len`` T tokens from ``--corpus`` and keeps
only bounded statistics (:mod:`model.interp.corpus`); prints the strongest heads of each score with
their 95% bootstrap intervals and the clusters of alike heads (by their scores, and by their patterns on
the first prompts), and writes with ``--out`` the heads × scores table (``.csv``: each head's clusters
and places in both planes too) or every array (``.npz``: the scores with intervals, per-prompt rows,
top examples with their text, the pattern similarity [L·H, L·H], both clusterings and their 2-D
placements; no pickle). Progress on stderr; Ctrl+C leaves no file (written whole at the
end, through a temporary name). Bad input is one line and exit 2 before the model is opened, or, for
what depends on its tokenizer (a corpus shorter than one prompt), before anything is run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.cli import UserError
from app.commands.opening import add_keep_stored, open_checkpoint
from model.atomic import OutputError, check_output
from model.progress import Progress

HELP = "Every head's scores over a corpus (with 95% intervals), top examples and clusters of heads."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        required=True,
        metavar="MODEL",
        help="the model: a folder, a .gguf, hf:REPO, package:NAME",
    )
    add_keep_stored(p)
    p.add_argument(
        "--corpus",
        required=True,
        metavar="C",
        help="builtin:NAME, task:NAME, a UTF-8 text file or a folder of them (with the model's tokenizer)",
    )
    p.add_argument("--prompts", type=int, default=256, metavar="N", help="how many prompts (default 256)")
    p.add_argument(
        "--seq-len", type=int, default=128, metavar="T", help="tokens per prompt, BOS included (default 128)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts drawn (default 0)")
    p.add_argument("--batch-size", type=int, default=0, metavar="B", help="prompts per pass (default: auto)")
    p.add_argument("--top-k", type=int, default=10, metavar="K", help="top examples per head (default 10)")
    p.add_argument("--top", type=int, default=3, metavar="N", help="heads printed per score (default 3)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the on-disk cache")
    p.add_argument("--out", metavar="FILE.csv|.npz", help="write the table (.csv) or every array (.npz)")


def check_corpus_flags(args) -> None:
    """A corpus run's ``--prompts``, ``--seq-len``, ``--batch-size`` and ``--seed`` that no run can
    take, in one line (``heads``, ``sae features``)."""
    if args.prompts < 1 or args.prompts > 10_000_000:
        raise UserError(f"--prompts {args.prompts}: give how many prompts to read, from 1 to 10000000")
    if args.seq_len < 2:
        raise UserError(f"--seq-len {args.seq_len}: a prompt is at least 2 tokens")
    for flag, value in (("--batch-size", args.batch_size), ("--seed", args.seed)):
        if value < 0:
            raise UserError(f"{flag} {value}: must be 0 or more")


def _check(args) -> Path | None:
    """Every flag a run cannot take, in one line, before anything is opened."""
    check_corpus_flags(args)
    for flag, value in (("--top-k", args.top_k), ("--top", args.top)):
        if not 1 <= value <= 100_000:
            raise UserError(f"{flag} {value}: must be from 1 to 100000")
    if not args.corpus.strip():
        raise UserError("--corpus is empty: give a text file, builtin:NAME or task:NAME")
    if args.out is None:
        return None
    out = Path(args.out)
    if out.suffix.lower() not in (".npz", ".csv"):
        raise UserError(f"--out {args.out}: write a .npz or a .csv file")
    try:
        return check_output(out, what="--out")
    except OutputError as exc:
        raise UserError(str(exc)) from None


def _check_context(args) -> None:
    """``--seq-len`` past the model's context, read from its config (no weight is read)."""
    from app.commands.download import local_checkpoint
    from model.io.pretrained import config_of

    try:
        cfg = config_of(local_checkpoint(args.checkpoint))
    except (OSError, ValueError) as exc:
        raise UserError(str(exc)) from None
    if args.seq_len > cfg.core.context_length:
        raise UserError(
            f"--seq-len {args.seq_len}: the model's context is {cfg.core.context_length} tokens; "
            f"give at most {cfg.core.context_length}"
        )


class LineProgress(Progress):
    """The run's progress on stderr: one redrawn line on a terminal, a line every 10% otherwise, each
    starting ``attention-lab COMMAND:``."""

    def __init__(self, stream=None, command: str = "heads"):
        super().__init__()
        self.command = command
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._decile = -1

    def update(self, done: int, total: int, unit: str = "") -> None:
        super().update(done, total, unit)
        snap = self.snapshot()
        decile = int(10 * done / max(1, total))
        if not self.tty and decile == self._decile and done < total:
            return
        self._decile = decile
        eta = snap.eta()
        left = f" · {eta:.0f} s left" if eta is not None and done < total else ""
        line = f"attention-lab {self.command}: {done} of {total} {unit} · {snap.elapsed:.1f} s{left}"
        end = "\n" if not self.tty or done >= total else ""
        self.stream.write(("\r" if self.tty else "") + line + end)
        self.stream.flush()


def run(args: argparse.Namespace) -> int:
    out = _check(args)
    from model.text.sources import check_source

    check_source(args.corpus)  # empty, binary, not UTF-8: one line, before the model is opened
    _check_context(args)
    ckpt = open_checkpoint(args, "heads")
    from model.interp.corpus import CorpusSettings, corpus_run, save_npz
    from model.progress import reporting

    settings = CorpusSettings(
        args.corpus,
        n_prompts=args.prompts,
        seq_len=args.seq_len,
        seed=args.seed,
        batch_size=args.batch_size,
        top_k=args.top_k,
    )
    t0 = time.perf_counter()
    with reporting(LineProgress()):
        result = corpus_run(ckpt.model, ckpt.tokenizer, settings, use_cache=not args.no_cache)
    cfg = ckpt.model.config
    how = "read from the cache" if result.from_cache else f"in {time.perf_counter() - t0:.1f} s"
    print(
        f"heads of {args.checkpoint} over {args.corpus}: {cfg.core.n_layers} layers × "
        f"{cfg.attention.n_heads} heads, "
        f"{args.prompts} prompts of {args.seq_len} tokens ({how}); 95% bootstrap intervals over prompts"
    )
    for name in result.names:
        low, high = result.interval(name)
        best = ", ".join(
            f"L{l}H{h} {result.score(name)[l, h]:.3f} [{low[l, h]:.3f}, {high[l, h]:.3f}]"
            for l, h in result.top_heads(name, args.top)
        )
        print(f"  {name:<17} {best}")
    shared = min(settings.shared_prompts, settings.n_prompts)
    for what, clusters in (
        ("their scores", result.clusters),
        (f"their patterns on {shared} shared prompts", result.pattern_clusters),
    ):
        groups = "; ".join(
            f"{name} ({int((clusters.labels == c).sum())})" for c, name in enumerate(clusters.names)
        )
        print(f"clusters of heads alike by {what} (heads in each): {groups}")
    if out is not None:
        if out.suffix.lower() == ".npz":
            written = save_npz(out, result)
        else:
            from model.atomic import write_atomic

            written = write_atomic(out, result.csv())
        print(f"wrote {written}")
    sys.stdout.flush()
    return 0
