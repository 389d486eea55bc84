"""`attention-lab generate`: continue a prompt with a trained checkpoint, token by token."""

from __future__ import annotations

import argparse
import sys
import warnings

from app.cli import UserError
from app.commands.opening import add_keep_stored, open_checkpoint
from model.budget.sizing import check, generation_need
from model.errors import AttentionLabError

# torch and the model are imported inside run(): a bad flag is refused in milliseconds, before them

HELP = "Generate text from a checkpoint."


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{value} is too many: at most {MAX_COUNT:,}")
    return value


#: The most tokens (and the largest top-k) a flag takes: beyond it is a typo.
MAX_COUNT = 10**6


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        required=True,
        metavar="DIR",
        help="a checkpoint: ours (from train), a Hugging Face GPT-2 folder, a nanoGPT ckpt.pt, "
        "or hf:REPO[@REVISION] (fetched into the Hugging Face cache once)",
    )
    p.add_argument(
        "--prompt", required=True, metavar="TEXT", help="the text to continue (with --chat: your message)"
    )
    p.add_argument(
        "--chat",
        action="store_true",
        help="chat with a model that carries a chat template: the prompt is your message, the model "
        "reads it in its template and the reply (ending at its end-of-turn token) is printed",
    )
    p.add_argument(
        "--system",
        default=None,
        metavar="TEXT",
        help="with --chat: the system prompt (the template's own default otherwise)",
    )
    p.add_argument(
        "--max-new-tokens", type=_positive_int, default=200, metavar="N", help="tokens to add (200)"
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        metavar="T",
        help="softmax temperature; 0 = greedy (default 0.8)",
    )
    p.add_argument(
        "--top-k", type=_positive_int, default=None, metavar="K", help="sample among the K likeliest"
    )
    p.add_argument(
        "--top-p",
        type=float,
        default=None,
        metavar="P",
        help="sample within the smallest set of probability >= P (nucleus)",
    )
    p.add_argument("--greedy", action="store_true", help="always take the likeliest token")
    p.add_argument("--seed", type=int, default=None, help="make sampling reproducible")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    p.add_argument("--no-cache", action="store_true", help="recompute the whole context every token")
    add_keep_stored(p)


def run(args: argparse.Namespace) -> int:
    from model.nn.generate import check_sampling, check_seed, stream, trained_window
    from model.runtime import pick_device

    if args.system is not None and not args.chat:
        raise UserError("--system is the system prompt of a chat: add --chat")
    try:
        check_sampling(args.temperature, args.top_k, args.top_p, greedy=args.greedy)
        check_seed(args.seed)
        device = pick_device(args.device)
        ckpt = open_checkpoint(args, "generate", device=device)  # any model File → Open reads
    except ValueError as exc:  # bad sampling values, DeviceError, CheckpointError
        raise UserError(str(exc)) from None
    if not args.prompt:
        raise UserError("--prompt is empty: give at least one character")
    text = chat_prompt(ckpt, args) if args.chat else args.prompt
    if not args.no_cache:  # the cache is sized before the prompt is printed
        window = trained_window(ckpt) or ckpt.model.config.core.context_length
        check(generation_need(ckpt.model.config, min(window, ckpt.model.config.core.context_length)))
    try:
        ckpt.tokenizer.encode(text)
    except ValueError as exc:  # characters the tokenizer does not know
        raise UserError(f"the prompt cannot be encoded: {exc}") from None

    out = sys.stdout
    if not args.chat:  # a chat prints the reply alone
        out.write(args.prompt)
        out.flush()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pieces = stream(
            ckpt.model,
            ckpt.tokenizer,
            text,
            args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            greedy=args.greedy,
            seed=args.seed,
            use_cache=not args.no_cache,
            window=trained_window(ckpt),
        )
        try:
            for piece in pieces:
                if piece:
                    out.write(piece)
                    out.flush()
        except AttentionLabError:  # e.g. logits that are not finite: the error starts a line of its own
            out.write("\n")
            raise
    out.write("\n")
    for w in caught:
        print(f"attention-lab generate: warning: {w.message}", file=sys.stderr)
    return 0


def chat_prompt(ckpt, args: argparse.Namespace) -> str:
    """The text the model reads for ``--chat``: the message (and ``--system``) in its chat template."""
    from model.text.chat import ChatTemplateError

    chat = getattr(ckpt.tokenizer, "chat_template", None)
    if chat is None:
        name = (ckpt.meta or {}).get("name") or args.checkpoint
        raise UserError(f"--chat needs a model with a chat template: {name} has none (leave out --chat)")
    try:
        return chat.prompt(args.system or "", [], args.prompt)
    except ChatTemplateError as exc:
        raise UserError(str(exc)) from None
