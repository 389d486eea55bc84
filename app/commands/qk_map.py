"""`attention-lab qk-map`: one head's queries and keys over a corpus in one 2-D map (AttentionViz).

Samples ``--prompts`` windows of ``--seq-len`` tokens of ``--corpus``, takes head (``--layer``,
``--head``)'s queries and keys as the softmax multiplies them, moves the keys and scales queries
against keys so that distance tracks the dot product (every softmax unchanged), embeds them together
by PCA or t-SNE (openTSNE) and prints how well distance tracks q·k (Pearson, in d_k and in 2-D). A typed
``--prompt`` is placed into the same map. ``--out`` writes the points: ``.csv`` one row per point
(``source`` corpus|prompt, ``kind`` query|key, ``window``, ``position``, ``token``, ``x``, ``y``,
``weight``, and both correlations on every row) or ``.npz`` (plain arrays, no pickle). The method:
:mod:`model.interp.analysis.qk_map`.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

from app.cli import UserError
from app.commands.opening import add_keep_stored, open_checkpoint
from model.atomic import OutputError, check_output

HELP = "One head's queries and keys over a corpus in one 2-D map (AttentionViz), with your prompt in it."

#: The CSV's columns, in order.
CSV_COLUMNS = ("source", "kind", "window", "position", "token", "x", "y", "weight", "corr_full", "corr_map")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint", metavar="MODEL", required=True,
        help="a saved model, a Hugging Face folder or GGUF file, hf:REPO[@REVISION] or package:NAME",
    )  # fmt: skip
    add_keep_stored(p)
    p.add_argument("--layer", type=int, required=True, metavar="L", help="the head's layer (from 0)")
    p.add_argument("--head", type=int, required=True, metavar="H", help="the query head (from 0)")
    p.add_argument(
        "--corpus", default="builtin:primer", metavar="C",
        help="builtin:NAME, task:NAME or a UTF-8 text file, read with the model's tokenizer "
        "(default builtin:primer)",
    )  # fmt: skip
    p.add_argument("--prompts", type=int, default=64, metavar="N", help="windows sampled (default 64)")
    p.add_argument("--seq-len", type=int, default=32, metavar="T", help="tokens per window (default 32)")
    p.add_argument("--points", type=int, default=2000, metavar="P", help="at most P queries and P keys")
    p.add_argument("--method", choices=("pca", "tsne"), default="pca", help="the 2-D embedding (default pca)")
    p.add_argument("--prompt", metavar="TEXT", help="a prompt whose queries and keys are placed in the map")
    p.add_argument("--seed", type=int, default=0, help="seed of the windows and points drawn")
    p.add_argument("--out", metavar="FILE.csv|.npz", help="write the points and the correlations")


def _check(args) -> Path | None:
    for flag, value, low, high in (
        ("--prompts", args.prompts, 1, 100_000),
        ("--seq-len", args.seq_len, 2, 1_000_000),
        ("--points", args.points, 3, 1_000_000),
        ("--seed", args.seed, 0, 2**63 - 1),
    ):
        if not low <= value <= high:
            raise UserError(f"{flag} {value}: give a whole number from {low} to {high}")
    if args.out is None:
        return None
    out = Path(args.out)
    if out.suffix.lower() not in (".npz", ".csv"):
        raise UserError(f"--out {args.out}: write a .csv or a .npz file")
    try:  # a folder, a device or a pipe: one line, before the model is opened
        return check_output(out, what="--out")
    except OutputError as exc:
        raise UserError(str(exc)) from None


def _csv(out: Path, qmap, placed) -> Path:
    from model.atomic import write_atomic

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    corr = (f"{qmap.corr_full:.6g}", f"{qmap.corr_map:.6g}")
    for i in range(len(qmap.points)):
        x, y = qmap.points[i]
        kind = "query" if qmap.is_query[i] else "key"
        w.writerow(("corpus", kind, int(qmap.window[i]), int(qmap.position[i]), qmap.token[i],
                    f"{x:.6g}", f"{y:.6g}", f"{qmap.weight[i]:.6g}", *corr))  # fmt: skip
    if placed is not None:
        for i in range(len(placed.points)):
            x, y = placed.points[i]
            kind = "query" if placed.is_query[i] else "key"
            w.writerow(
                (
                    "prompt",
                    kind,
                    -1,
                    int(placed.position[i]),
                    placed.token[i],
                    f"{x:.6g}",
                    f"{y:.6g}",
                    "",
                    *corr,
                )
            )
    return write_atomic(out, buf.getvalue(), text=True)


def _npz(out: Path, qmap, placed) -> Path:
    import numpy as np

    from model.interp.export import save_inspection

    arrays = qmap.arrays()
    if placed is not None:
        arrays |= {
            "prompt_points": placed.points, "prompt_is_query": placed.is_query,
            "prompt_position": placed.position, "prompt_token": np.array(placed.token, dtype=str),
        }  # fmt: skip
    return save_inspection(out, arrays)


def run(args: argparse.Namespace) -> int:
    out = _check(args)
    from model.interp.analysis.qk_map import QKMapError
    from model.progress import Cancelled
    from model.text.datasource import DataError

    lm = open_checkpoint(args, "qk-map")
    import model.api as api

    try:
        qmap, placed = api.qk_map(
            lm, args.layer, args.head, args.corpus, prompts=args.prompts, seq_len=args.seq_len,
            method=args.method, prompt=args.prompt, max_points=args.points, seed=args.seed,
        )  # fmt: skip
    except (QKMapError, DataError) as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:  # a prompt that encodes to nothing, characters the vocabulary lacks
        raise UserError(f"qk-map: {exc}") from None
    except Cancelled:
        return 130
    n = int(qmap.is_query.sum())
    kv = f" (key head {qmap.kv_head})" if qmap.kv_head != qmap.head else ""
    print(
        f"L{qmap.layer}H{qmap.head}{kv} over {args.corpus}: {n:,} queries and {n:,} keys of {args.prompts} "
        f"windows × {args.seq_len} tokens, {args.method.upper()}"
    )
    print("; ".join(qmap.notes))

    def word(c: float) -> str:
        return "n/a" if math.isnan(c) else f"{c:+.3f}"

    print(
        f"correlation of distance with q·k (pairs of a window, key ≤ query): {word(qmap.corr_full)} in d_k, "
        f"{word(qmap.corr_map)} in the map (−1: distance tracks the dot product exactly)"
    )
    if placed is not None:
        print(f"prompt: {len(placed.points) // 2} queries and keys placed in the map")
    if out is not None:
        written = _npz(out, qmap, placed) if out.suffix.lower() == ".npz" else _csv(out, qmap, placed)
        print(f"wrote {written}")
    sys.stdout.flush()
    return 0
