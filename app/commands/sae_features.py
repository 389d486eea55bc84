"""`attention-lab sae features`: every feature of a sparse autoencoder read over a corpus, one row each.

Opens the model and the SAE folder (SAELens's format: ``cfg.json`` + ``sae_weights.safetensors``,
checked against the model before anything is allocated), streams ``--prompts`` N prompts of
``--seq-len`` T tokens of ``--corpus`` only as deep as the SAE's site
(:func:`model.interp.sae.dashboard.feature_stats`, bounded memory), and writes with ``--out`` one row
per feature: its firing frequency, mean and max activation, the ``--top`` tokens its decoder direction
promotes and suppresses through the unembedding (:func:`~model.interp.sae.readout.feature_logits`),
its strongest example with the activating token marked ``⟦token⟧``, and for an SAE on ``z`` the head
that writes most of it and that head's share of its decoder norm². Prints how many features fired and
the most frequent ones. Progress on stderr; the file is written whole at the end (Ctrl+C leaves none).
Bad input is one line and exit 2, before the model is opened where it can be.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

from app.cli import UserError
from app.commands.heads import LineProgress, _check_context, check_corpus_flags
from app.commands.opening import add_keep_stored, open_checkpoint
from model.atomic import OutputError, check_output

HELP = "Every feature of a sparse autoencoder over a corpus: frequency, top tokens and examples, heads."

#: The corpus read when the model's folder names none it was trained on.
DEFAULT_CORPUS = "builtin:primer"

#: Features printed (the most frequent first).
PRINTED = 10


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, metavar="MODEL", help="the model the SAE reads")
    add_keep_stored(p)
    p.add_argument(
        "--sae", required=True, metavar="DIR", help="the SAE's folder (cfg.json + sae_weights.safetensors)"
    )
    p.add_argument(
        "--corpus",
        metavar="C",
        help=f"builtin:NAME, task:NAME or a text file (default: the model's own, else {DEFAULT_CORPUS})",
    )
    p.add_argument("--prompts", type=int, default=256, metavar="N", help="how many prompts (default 256)")
    p.add_argument(
        "--seq-len", type=int, default=64, metavar="T", help="tokens per prompt, BOS included (default 64)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts drawn (default 0)")
    p.add_argument("--batch-size", type=int, default=0, metavar="B", help="prompts per pass (default: auto)")
    p.add_argument(
        "--top", type=int, default=5, metavar="K", help="tokens and examples kept per feature (default 5)"
    )
    p.add_argument("--out", metavar="FILE.csv", help="write one row per feature")


def _check(args) -> Path | None:
    """Every flag a run cannot take, in one line, before anything is opened."""
    check_corpus_flags(args)
    if not 1 <= args.top <= 1000:
        raise UserError(f"--top {args.top}: must be from 1 to 1000")
    if not Path(args.sae).is_dir():
        raise UserError(f"--sae {args.sae}: not a folder (an SAE is a folder with cfg.json)")
    if args.corpus is not None and not args.corpus.strip():
        raise UserError("--corpus is empty: give a text file, builtin:NAME or task:NAME")
    if args.out is None:
        return None
    if Path(args.out).suffix.lower() != ".csv":
        raise UserError(f"--out {args.out}: write a .csv file")
    try:
        return check_output(args.out, what="--out")
    except OutputError as exc:
        raise UserError(str(exc)) from None


def open_sae(folder: str, model_config):
    """The SAE at ``folder`` for a model of ``model_config``, through the one reader of SAE folders
    (``model.interp.sae.format.load_sae``: every check before allocation)."""
    from model.interp.sae.format import load_sae

    return load_sae(folder, model_config=model_config)


def feature_table(stats, logits, shares, tokenizer) -> list[dict[str, str]]:
    """One row per feature (module docstring); ``shares`` [F, H] or None."""
    from model.text.tokens import visible

    promoted, suppressed = logits.tokens(tokenizer, "top"), logits.tokens(tokenizer, "bottom")
    rows = []
    for i in range(stats.n_features):
        top = stats.top(i)
        row = {
            "feature": str(i),
            "frequency": f"{stats.frequency[i]:.6g}",
            "mean_activation": f"{stats.mean_activation[i]:.6g}",
            "max_activation": f"{stats.max_activation[i]:.6g}",
            "promoted": " ".join(visible(s) for s in promoted[i]),
            "suppressed": " ".join(visible(s) for s in suppressed[i]),
            "top_example": stats.example_text(i, 0, tokenizer) if top else "",
            "top_activation": f"{top[0][0]:.6g}" if top else "",
        }
        if shares is not None:
            h = int(shares[i].argmax())
            row["dominant_head"], row["head_share"] = str(h), f"{shares[i, h]:.6g}"
        rows.append(row)
    return rows


def run(args: argparse.Namespace) -> int:
    out = _check(args)
    from model.text.sources import check_source

    if args.corpus is not None:
        check_source(args.corpus)  # empty, binary, not UTF-8: one line, before the model is opened
    _check_context(args)
    ckpt = open_checkpoint(args, "sae features")
    sae = open_sae(args.sae, ckpt.model.config)
    corpus = args.corpus or (ckpt.meta or {}).get("source") or DEFAULT_CORPUS
    from model.interp.sae.dashboard import feature_stats
    from model.interp.sae.readout import feature_logits, head_shares
    from model.progress import reporting

    t0 = time.perf_counter()
    with reporting(LineProgress(command="sae features")):
        stats = feature_stats(
            ckpt.model, ckpt.tokenizer, sae, corpus, n_prompts=args.prompts, seq_len=args.seq_len,
            top_k=args.top, seed=args.seed, batch_size=args.batch_size,
        )  # fmt: skip
    logits = feature_logits(ckpt.model, sae, None, k=args.top)
    site = sae.config.site
    shares = head_shares(sae, ckpt.model.config) if site.kind == "z" else None
    rows = feature_table(stats, logits, shares, ckpt.tokenizer)
    alive = int((stats.fired > 0).sum())
    print(
        f"{stats.n_features} features of the SAE on {site.label()} over {corpus}: {args.prompts} prompts "
        f"of {args.seq_len} tokens ({stats.n_tokens} read) in {time.perf_counter() - t0:.1f} s; "
        f"{alive} fired, {stats.n_features - alive} never did"
    )
    if alive:
        by = ", the head that writes most of it" if shares is not None else ""
        print(f"most frequent (feature, frequency, max activation{by}, promoted tokens, strongest example):")
    for i in stats.frequency.argsort(kind="stable")[::-1][: min(PRINTED, alive)]:
        row = rows[int(i)]
        head = (
            f" L{site.layer}H{row['dominant_head']} {float(row['head_share']):.0%}"
            if shares is not None
            else ""
        )
        what = f"max {row['max_activation']:>8}{head} → {row['promoted']}  {row['top_example']}"
        print(f"  {i:>6} {row['frequency']:>9} {what}")
    if out is not None:
        from model.atomic import write_atomic

        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        print(f"wrote {write_atomic(out, text.getvalue())}")
    sys.stdout.flush()
    return 0
