"""`attention-lab sae train | eval`: sparse autoencoders on one site of one layer.

``sae train --checkpoint M --site z --layer L --corpus C --features F --tokens N --out DIR`` trains an
SAE on the site's activations streamed from the corpus (:mod:`model.interp.sae.train`) into DIR in
SAELens's format (``cfg.json`` + ``sae_weights.safetensors``), with the run's state beside them: the
same command again resumes a run that was stopped (Ctrl+C stops at the next step, saving first) and
returns a finished one as it is. Progress, ETA and the live figures (MSE, variance explained, L0, dead
features) on stderr; a summary on stdout.

``sae eval --checkpoint M --sae DIR [--corpus C --tokens N] [--out FILE.json]`` measures an SAE (ours
or SAELens's) as SAELens's evals do (:mod:`model.interp.sae.evaluate`): variance explained, L0, dead
and dense features, and the next-token loss clean, with the SAE spliced in and with the site zeroed
(loss recovered).

Bad input is one line and exit 2, before the model is opened when the model's config can tell
(a layer it lacks, a width out of range, an SAE of another model's width).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from pathlib import Path

from app.cli import OneLineParser, UserError, add_size_check
from app.commands.heads import LineProgress
from app.commands.opening import add_keep_stored, open_checkpoint
from app.commands.sae_features import HELP as FEATURES_HELP
from app.commands.sae_features import add_arguments as add_features_arguments
from app.commands.sae_features import run as run_features
from model.atomic import OutputError, check_output

HELP = "Sparse autoencoders on a site of a layer: train one (SAELens's format, resumable), evaluate one."

SITES = ("z", "attn_out", "resid_pre", "mlp_out")

#: The flag of each setting whose name differs.
FLAGS = {
    "d_sae": "--features",
    "l1_coefficient": "--l1",
    "batch_tokens": "--batch",
    "architecture": "--architecture",
}

#: The exit status of a run stopped by Ctrl+C (128 + SIGINT, as a shell reports it).
INTERRUPTED_STATUS = 130


def _model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, metavar="MODEL",
                   help="the model: a folder, a .gguf, hf:REPO, package:NAME")  # fmt: skip
    add_keep_stored(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=OneLineParser, required=True)
    t = sub.add_parser("train", help="train an SAE into a folder (resumable)", description=HELP)
    _model_flags(t)
    t.add_argument(
        "--site", required=True, choices=SITES, help="where it reads (z: every head's output before W_O)"
    )
    t.add_argument("--layer", required=True, type=int, metavar="L", help="the block")
    t.add_argument(
        "--corpus", required=True, metavar="C", help="builtin:NAME, task:NAME or a UTF-8 text file"
    )
    width = t.add_mutually_exclusive_group()
    width.add_argument("--features", type=int, metavar="F", help="number of features (4 to 32 × d_in)")
    width.add_argument(
        "--expansion", type=int, default=8, metavar="X", help="features = X × d_in (default 8)"
    )
    t.add_argument(
        "--tokens", type=int, default=1_000_000, metavar="N", help="tokens to train on (default 1M)"
    )
    t.add_argument("--out", required=True, metavar="DIR", help="the SAE's folder (the same again resumes)")
    t.add_argument("--architecture", choices=("topk", "standard"), default="topk",
                   help="topk (k features a token) or standard (ReLU with an L1 penalty)")  # fmt: skip
    t.add_argument("--k", type=int, default=32, help="features a token, for topk (default 32)")
    t.add_argument("--l1", type=float, default=5.0, help="the L1 coefficient, for standard (default 5)")
    t.add_argument("--lr", type=float, default=4e-4, help="Adam's learning rate (default 4e-4)")
    t.add_argument(
        "--seq-len", type=int, default=128, metavar="T", help="tokens a prompt, BOS included (default 128)"
    )
    t.add_argument("--batch", type=int, default=4096, metavar="B", help="tokens a step (default 4096)")
    t.add_argument("--seed", type=int, default=0, help="seed of the prompts and the initial weights")
    e = sub.add_parser("eval", help="evaluate an SAE folder (ours or SAELens's)", description=HELP)
    _model_flags(e)
    e.add_argument(
        "--sae", required=True, metavar="DIR", help="the SAE's folder (cfg.json + sae_weights.safetensors)"
    )
    e.add_argument("--corpus", metavar="C", help="the corpus (default: the one it was trained on)")
    e.add_argument(
        "--tokens", type=int, default=32_768, metavar="N", help="tokens to evaluate on (default 32768)"
    )
    e.add_argument(
        "--seq-len", type=int, default=0, metavar="T", help="tokens a prompt (default: as trained, or 128)"
    )
    e.add_argument("--batch", type=int, default=4096, metavar="B", help="tokens a batch (default 4096)")
    e.add_argument(
        "--seed", type=int, default=1, help="seed of the prompts (default 1; training draws with 0)"
    )
    e.add_argument("--out", metavar="FILE.json", help="write the evaluation, each feature's density included")
    f = sub.add_parser(
        "features", help="read every feature of an SAE over a corpus", description=FEATURES_HELP
    )
    add_features_arguments(f)
    for action in (t, e, f):
        add_size_check(action)


def _config(args):
    """The model's config, read without a weight."""
    from app.commands.download import local_checkpoint
    from model.io.pretrained import config_of

    try:
        return config_of(local_checkpoint(args.checkpoint))
    except (OSError, ValueError) as exc:
        raise UserError(str(exc)) from None


def _whole(flag: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise UserError(f"{flag} {value}: give a whole number from {low:,} to {high:,}")


# ---- train ------------------------------------------------------------------------------------------
def _settings(args):
    """The run's settings, every flag checked in one line (those the config decides against it)."""
    from model.interp.sae.site import Site, SiteError
    from model.interp.sae.train import SAETrainError, SAETrainSettings

    _whole("--tokens", args.tokens, 1, 10**12)
    _whole("--batch", args.batch, 1, 1 << 20)
    _whole("--seq-len", args.seq_len, 2, 1 << 20)
    if not args.corpus.strip():
        raise UserError("--corpus is empty: give a text file, builtin:NAME or task:NAME")
    try:
        site = Site(args.site, args.layer)
        settings = SAETrainSettings(site, args.corpus, tokens=args.tokens, expansion=args.expansion,
                                    d_sae=args.features or 0, architecture=args.architecture, k=args.k,
                                    l1_coefficient=args.l1, lr=args.lr, batch_tokens=args.batch,
                                    seq_len=args.seq_len, seed=args.seed)  # fmt: skip
        settings.check(_config(args))
    except (SiteError, SAETrainError) as exc:
        text, name = str(exc), str(exc).split("=", 1)[0]
        if name.isidentifier():  # a field's name -> its flag: "d_sae=10: ..." -> "--features 10: ..."
            flag = FLAGS.get(name, "--" + name.replace("_", "-"))
            text = f"{flag} {text[len(name) + 1 :]}"
        raise UserError(text) from None
    return settings


def _train(args) -> int:
    from model.interp.sae.train import SAETrainError, check_out_folder, train_sae
    from model.progress import Cancelled, reporting
    from model.text.sources import check_source

    try:
        out = check_out_folder(check_output(args.out, what="--out", folder=True))
    except (OutputError, SAETrainError) as exc:
        raise UserError(f"--out: {exc}" if isinstance(exc, SAETrainError) else str(exc)) from None
    check_source(args.corpus)
    settings = _settings(args)
    ckpt = open_checkpoint(args, "sae train")
    progress = LineProgress(command="sae train")
    every = [0]

    def on_step(s) -> None:
        if s.step == 1 or s.step * 10 // s.steps > every[0] or s.step == s.steps:
            every[0] = s.step * 10 // s.steps
            figures = f"MSE {s.mse:.4g} · variance explained {s.fve:.3f} · L0 {s.l0:.1f} · dead {s.dead}"
            line = f"step {s.step} of {s.steps} · {s.tokens:,} tokens · {figures}"
            print(f"attention-lab sae train: {line}", file=sys.stderr)

    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda *_: progress.cancel())  # stop at the next step, the state saved
    try:
        with reporting(progress):
            result = train_sae(ckpt.model, ckpt.tokenizer, settings, out=out, on_step=on_step,
                               model_name=str(args.checkpoint))  # fmt: skip
    except Cancelled:
        print(f"attention-lab sae train: stopped; the same command resumes it from {out}", file=sys.stderr)
        return INTERRUPTED_STATUS
    except SAETrainError as exc:
        raise UserError(str(exc)) from None
    finally:
        signal.signal(signal.SIGINT, before)
    cfg = result.sae.config
    how = f"resumed at step {result.resumed_at}, " if result.resumed_at else ""
    print(f"SAE on {cfg.site.label()} of {args.checkpoint}: {cfg.d_sae} features ({cfg.architecture}"
          f"{f', k={cfg.k}' if cfg.architecture == 'topk' else ''}), "
          f"{result.tokens:,} tokens of {args.corpus} "
          f"in {result.steps} steps ({how}{result.seconds:.1f} s this run)")  # fmt: skip
    if result.steps:
        c = result.curves
        print(f"  last step: MSE {c['mse'][-1]:.4g} · variance explained {c['fve'][-1]:.3f} · "
              f"L0 {c['l0'][-1]:.1f} · dead {int(c['dead'][-1])}")  # fmt: skip
    print(f"wrote {out} (SAELens's cfg.json + sae_weights.safetensors)")
    return 0


# ---- eval -------------------------------------------------------------------------------------------
def _eval(args) -> int:
    from model.interp.sae.evaluate import evaluate_sae
    from model.interp.sae.format import SAEFileError, load_sae, read_sae_config
    from model.progress import reporting

    _whole("--tokens", args.tokens, 1, 10**10)
    _whole("--batch", args.batch, 1, 1 << 20)
    _whole("--seed", args.seed, 0, 2**63 - 1)
    out = None
    if args.out is not None:
        if Path(args.out).suffix.lower() != ".json":
            raise UserError(f"--out {args.out}: write a .json file")
        try:
            out = check_output(args.out, what="--out")
        except OutputError as exc:
            raise UserError(str(exc)) from None
    cfg = _config(args)
    try:
        sae_config, _ = read_sae_config(args.sae, model_config=cfg)  # before the model is opened
    except SAEFileError as exc:
        raise UserError(f"--sae {args.sae}: {exc}") from None
    corpus = args.corpus or sae_config.extra.get("corpus")
    if not isinstance(corpus, str) or not corpus.strip():
        raise UserError("--corpus: the SAE does not say what it was trained on; name a corpus")
    seq_len = args.seq_len or int(sae_config.extra.get("seq_len") or 128)
    _whole("--seq-len", seq_len, 3, cfg.core.context_length)
    from model.text.sources import check_source

    check_source(corpus)
    ckpt = open_checkpoint(args, "sae eval")
    try:
        sae = load_sae(args.sae, model_config=ckpt.config)
    except SAEFileError as exc:
        raise UserError(f"--sae {args.sae}: {exc}") from None
    with reporting(LineProgress(command="sae eval")):
        ev = evaluate_sae(ckpt.model, ckpt.tokenizer, sae, corpus=corpus, n_tokens=args.tokens,
                          seq_len=seq_len, batch_tokens=args.batch, seed=args.seed)  # fmt: skip
    print(f"SAE {args.sae} on {sae.config.site.label()} of {args.checkpoint}, over {corpus}:")
    for line in ev.lines():
        print("  " + line)
    if out is not None:
        from model.atomic import write_atomic

        record = {"sae": str(args.sae), "checkpoint": str(args.checkpoint), "corpus": corpus, **ev.to_dict()}
        print(f"wrote {write_atomic(out, json.dumps(record, indent=1) + chr(10))}")
    return 0


def run(args: argparse.Namespace) -> int:
    with contextlib.suppress(AttributeError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if args.action == "features":
        return run_features(args)
    return _train(args) if args.action == "train" else _eval(args)
