"""`attention-lab circuits`: how a model's heads compose, from its weights alone.

Prints the strongest Q-, K- and V-compositions between heads (Elhage et al., 2021, with the chance
score of random matrices of the same shapes) and the heads whose OV circuits copy most, and writes
every number with ``--out`` (``.npz``: every array; ``.csv``: one row per pair of heads). The formulas,
and what the norms, biases and RoPE do to them: :mod:`model.interp.analysis.circuits`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from app.cli import UserError
from app.commands.opening import add_keep_stored, open_checkpoint
from model.atomic import OutputError, check_output
from model.config import GPTConfig

HELP = "Print how a model's heads compose (Q/K/V composition, copying) and export every score."

KIND_CHOICES = ("Q", "K", "V", "ALL")


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="a saved model, a Hugging Face folder or GGUF file, or hf:REPO[@REVISION]",
    )
    src.add_argument("--config", metavar="FILE.json", help="a config file: a freshly initialised model")
    add_keep_stored(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the fresh model's weights (with --config)")
    p.add_argument(
        "--kind",
        type=str.upper,
        choices=KIND_CHOICES,
        default="ALL",
        metavar="K",
        help="Q, K or V: only that composition (default: all, the three)",
    )
    p.add_argument("--top", type=int, default=10, metavar="N", help="how many pairs and heads to print")
    p.add_argument("--out", metavar="FILE.npz|.csv", help="write every score: .npz arrays or a .csv table")
    p.add_argument(
        "--rope-offset",
        type=int,
        default=0,
        metavar="D",
        help="RoPE models: the QK circuits of a query D positions after its key (default 0)",
    )


def _check(args) -> Path | None:
    if args.top < 1 or args.top > 100_000:
        raise UserError(f"--top {args.top}: give how many to print, from 1 to 100000")
    if args.rope_offset < 0:
        raise UserError(f"--rope-offset {args.rope_offset}: must be 0 or more (query after its key)")
    if not 0 <= args.seed <= 2**63 - 1:
        raise UserError(f"--seed {args.seed}: must be a whole number from 0 to 2**63 - 1")
    if args.out is None:
        return None
    out = Path(args.out)
    if out.suffix.lower() not in (".npz", ".csv"):
        raise UserError(f"--out {args.out}: write a .npz or a .csv file")
    try:  # a folder, a device or a pipe, a name too long: one line, before the model is built
        return check_output(out, what="--out")
    except OutputError as exc:
        raise UserError(str(exc)) from None


def _model(args):
    """(model, what it is in words)."""
    if args.checkpoint is not None:
        ckpt = open_checkpoint(args, "circuits")
        return ckpt.model, str(args.checkpoint)
    from model.budget.sizing import check, load_need
    from model.text.tokens import ByteTokenizer

    cfg = GPTConfig.load(args.config, validate=False)
    if cfg.core.vocab_size is None:
        cfg = cfg.with_vocab(ByteTokenizer().vocab_size)
    cfg.validate()
    check(load_need(cfg, copies=1, what="building this model"))
    from model.nn.gpt import init_model

    return init_model(cfg, seed=args.seed), f"{args.config} (fresh weights, seed {args.seed})"


def _csv(out: Path, comp, kinds: list[str]) -> Path:
    from model.atomic import write_atomic
    from model.interp.analysis.circuits import KINDS

    rows = ["kind,writer_layer,writer_head,reader_layer,reader_head,score,times_chance"]
    for kind in kinds:
        for k, (l1, h1), (l2, h2), s in comp.strongest(kind):
            assert k in KINDS
            rows.append(f"{k},{l1},{h1},{l2},{h2},{s:.8g},{s / comp.baseline:.6g}")
    return write_atomic(out, "\n".join(rows) + "\n")


def run(args: argparse.Namespace) -> int:
    out = _check(args)
    model, what = _model(args)
    import numpy as np

    from model.interp.analysis.circuits import KINDS, CircuitsUnsupported, model_circuits
    from model.interp.export import save_inspection

    cfg = model.config
    try:
        got = model_circuits(model, rope_offset=args.rope_offset)
    except CircuitsUnsupported as exc:
        raise UserError(f"no circuits for {what}: {exc}") from None
    except ValueError as exc:  # a RoPE offset outside the context
        raise UserError(f"--rope-offset {args.rope_offset}: {exc}") from None
    comp, heads = got.composition, got.heads
    kinds = list(KINDS) if args.kind == "ALL" else [args.kind]
    kv = f" ({cfg.kv_heads} key/value heads)" if cfg.kv_heads != cfg.attention.n_heads else ""
    print(
        f"circuits of {what}: {cfg.core.n_layers} layers × {cfg.attention.n_heads} heads{kv}, d {comp.d}, "
        f"d_k {comp.d_k}; "
        f"{np.isfinite(comp.scores).sum():,} composition scores in {got.seconds['total']:.2f} s"
    )
    print(
        f"chance: {comp.baseline:.4f} (the mean of {comp.samples} pairs of random matrices of these shapes, "
        f"seed {comp.seed}; 95th percentile {comp.baseline_p95:.4f}; √(1/d) = {comp.baseline_rms:.4f})"
    )
    if got.rope_offset is not None:
        print(f"RoPE: QK circuits and Q/K-composition at relative offset {got.rope_offset}")
    top = args.top
    pairs = [e for kind in kinds for e in comp.strongest(kind, top)]
    pairs = sorted(pairs, key=lambda e: -e[3])[:top]
    which = "compositions" if len(kinds) == 3 else f"{kinds[0]}-compositions"
    print(f"strongest {which} (writer → reader: score, × chance):")
    for kind, (l1, h1), (l2, h2), s in pairs:
        print(f"  {kind}  L{l1}H{h1} → L{l2}H{h2}  {s:.4f}  {s / comp.baseline:.1f}×")
    if not pairs:
        print("  none: the model has one layer (composition needs a later head)")
    order = np.argsort(-heads.copying.reshape(-1), kind="stable")[:top]
    H = cfg.attention.n_heads
    subset = "every token" if heads.copying_tokens == heads.vocab else f"{heads.copying_tokens} random tokens"
    print(f"copying heads (share of the OV eigenvalues' mass with Re λ > 0, and Σλ/Σ|λ|; over {subset}):")
    for i in order:
        l, h = divmod(int(i), H)
        c, s = heads.copying[l, h], heads.copying_signed[l, h]
        if math.isfinite(float(c)):
            print(f"  L{l}H{h}  {c:.3f}  {s:+.3f}")
    print("how: " + "; ".join(got.notes) + ".")
    if out is not None:
        if out.suffix.lower() == ".npz":  # a failed write: WriteError (model.atomic), one line
            written = save_inspection(out, got.arrays())
        else:
            written = _csv(out, comp, kinds)
        print(f"wrote {written}")
    sys.stdout.flush()
    return 0
