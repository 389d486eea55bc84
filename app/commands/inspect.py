"""`attention-lab inspect`: run one prompt through a model and export every head as .npz."""

from __future__ import annotations

import argparse
import sys

HELP = "Run a prompt through a model and export every head's attention as .npz."


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="a saved model directory, or hf:REPO[@REVISION] (fetched into the Hugging Face cache once)",
    )
    src.add_argument(
        "--config",
        metavar="FILE.json",
        help="a config file: a freshly initialised model with the byte-level tokenizer",
    )
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the text to inspect")
    p.add_argument("--out", required=True, metavar="FILE.npz", help="where to write the arrays")
    p.add_argument("--seed", type=int, default=0, help="seed of the fresh model's weights (with --config)")


def run(args: argparse.Namespace) -> int:
    from app.cli import UserError
    from model.config import GPTConfig
    from model.export import REQUIRED_KINDS, inspection_arrays, save_inspection
    from model.gpt import build_model
    from model.tokens import ByteTokenizer
    from model.trace import inspect

    if not args.prompt:
        raise UserError("--prompt is empty: give at least one character")
    if args.checkpoint:
        from app.commands.download import local_checkpoint
        from model.pretrained import open_model

        try:
            ckpt = open_model(local_checkpoint(args.checkpoint))
        except (OSError, ValueError) as exc:
            raise UserError(str(exc)) from None
        model, tokenizer = ckpt.model, ckpt.tokenizer
    else:
        cfg = GPTConfig.load(args.config, validate=False)
        tokenizer = ByteTokenizer()
        if cfg.vocab_size is None:
            cfg = cfg.with_vocab(tokenizer.vocab_size)
        elif cfg.vocab_size < tokenizer.vocab_size:
            raise UserError(
                f"vocab_size={cfg.vocab_size} is too small for the byte-level tokenizer "
                f"({tokenizer.vocab_size} tokens): omit it or make it at least {tokenizer.vocab_size}"
            )
        model = build_model(cfg.validate(), seed=args.seed)
    try:
        ids = tokenizer.encode(args.prompt)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not ids:
        raise UserError("the prompt encodes to no tokens")
    limit = model.config.context_length
    if len(ids) > limit:
        print(
            f"attention-lab inspect: warning: prompt has {len(ids)} tokens; keeping the last {limit} "
            f"(context_length)",
            file=sys.stderr,
        )
        ids = ids[-limit:]
    trace = inspect(model, tokenizer, ids, kinds=REQUIRED_KINDS)  # eval mode, no grad, kinds checked
    arrays = inspection_arrays(trace, tokenizer.token_strings(ids))
    try:
        path = save_inspection(args.out, arrays)
    except OSError as exc:
        raise UserError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    L, H, T, _ = arrays["weights"].shape
    print(f"wrote {path}: {L} layers × {H} heads × {T} tokens")
    return 0
