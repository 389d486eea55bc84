"""`attention-lab inspect`: run one prompt through a model and export every head as .npz.

Every head's weights [L, H, T, T] when they fit (in float16, or without the scores, if they must);
past that, or with ``--streamed``, the streamed form the Attention tab keeps of a long prompt: every
head pooled, and each layer's queries and keys, which recompute any head exactly
(:mod:`model.interp.export` documents both). A prompt longer than the model's context is cut to its
last tokens (BOS kept), and the warning and the file (``dropped``, ``positions``) say where.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from app.cli import UserError
from app.commands.opening import add_keep_stored, open_checkpoint
from model.atomic import OutputError, check_output, clean_stale_temps
from model.budget.arithmetic import human_bytes
from model.budget.sizing import OVERRIDE_ENV, check, load_need, usable_bytes
from model.config import GPTConfig

# numpy, torch and the model are imported inside the functions: a bad flag is refused before numpy,
# and torch only once the inspection is known to fit, so that with --config a refusal takes
# milliseconds instead of the second and a half that importing torch costs

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
    add_keep_stored(p)
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the text to inspect")
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE.npz",
        help=f"where to write the arrays (.npz is added when missing): a FILE.npz you name is replaced; "
        f"a folder gets {DEFAULT_NAME} inside it, never replaced (name that file to replace it)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the fresh model's weights (with --config)")
    p.add_argument(
        "--max-memory",
        type=float,
        default=None,
        metavar="GB",
        help="memory the inspection may use (default: most of what the machine has free): the model, the "
        "logits or one layer in flight, since each layer's heads go to the file as they are computed; "
        "when the file does not fit on its disk, float16, then the weights alone are kept, then it is "
        "streamed",
    )
    p.add_argument(
        "--streamed",
        action="store_true",
        help="write the streamed form (the default past ~1 GiB of heads or when they do not fit): every "
        "head pooled to at most 256×256 (max and mean) and each layer's queries and keys, from which "
        "model.interp.export.streamed_head recomputes any head",
    )
    p.add_argument(
        "--float16",
        action="store_true",
        help="record and export the heads in float16 (the streamed form keeps its queries and keys float32)",
    )
    p.add_argument(
        "--compress",
        action="store_true",
        help="deflate the .npz (smaller, but minutes for a long prompt: attention patterns barely shrink)",
    )


#: The file written when ``--out`` names a folder.
DEFAULT_NAME = "inspection.npz"


def _out_path(out: str):
    """``--out`` as a file path: inside the folder when it names one (an existing folder or ``DIR/``).

    A file is replaced only when the user named it: a folder that already holds ``inspection.npz`` is
    refused, and so is a path that is no regular file (``/dev/null``, a FIFO) or a name too long for
    the file system (:func:`model.atomic.check_output`). (No torch is imported here: a refusal must
    not wait for it.)"""
    try:
        if os.path.isdir(out) or out.endswith((os.sep, "/")):
            inside = check_output(out, what="--out", folder=True) / DEFAULT_NAME
            if os.path.lexists(inside):
                raise UserError(
                    f"--out {out}: the folder already holds {DEFAULT_NAME}; name the file to replace it "
                    f"(--out {inside}) or give another folder"
                )
            return check_output(inside, what="--out")
        path = check_output(out, what="--out")
        target = path if path.suffix == ".npz" else path.with_name(path.name + ".npz")  # what is written
        check_output(target, what="--out")
    except OutputError as exc:
        raise UserError(str(exc)) from None
    return path


def _budget(args) -> int:
    if args.max_memory is None:
        return usable_bytes()
    if not (args.max_memory > 0 and args.max_memory < 1e6):  # NaN fails too
        raise UserError(f"--max-memory {args.max_memory}: give the gigabytes to use, e.g. 4")
    return int(args.max_memory * 1024**3)


def _free_disk(path) -> int:
    """Bytes free on the disk that will hold ``path`` (its nearest folder that exists)."""
    folder = os.path.abspath(os.path.dirname(path) or ".")
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return shutil.disk_usage(folder).free


def _plan(cfg, tokenizer, args, budget: int, out, *, with_model: bool):
    """The one plan (:func:`model.interp.plan.plan_prompt`, an export): the prompt read by the one
    rule (the last ``context_length`` tokens, BOS kept) and what is recorded so that what is held fits
    in ``budget`` and the file on the disk of ``out``; a warning names what was left out, and why."""
    from model.interp.plan import plan_prompt

    free = _free_disk(out)
    disk: int | None = free // 2 if args.compress else free  # --compress: the stored file beside it
    if os.environ.get(OVERRIDE_ENV):
        budget, disk = 1 << 62, None
    plan = plan_prompt(
        cfg,
        tokenizer,
        args.prompt,
        budget=budget,
        export=True,
        float16=True if args.float16 else None,
        with_model=with_model,
        streamed=args.streamed,
        disk=disk,
    )
    T = plan.prompt.T
    if plan.for_context:
        print(
            f"attention-lab inspect: warning: {_cut(plan.prompt, cfg.core.context_length)}", file=sys.stderr
        )
    if not plan.held and not args.streamed:
        print(
            f"attention-lab inspect: note: every head of {T:,} tokens is not written ({cfg.core.n_layers} × "
            f"{cfg.attention.n_heads} heads of {T:,}² weights{': ' + plan.why if plan.why else ''}): "
            "writing the "
            "streamed form, every head pooled and each layer's queries and keys, which recompute any head "
            "(model.interp.export.streamed_head)",
            file=sys.stderr,
        )
    left_out = []
    if plan.float16 and not args.float16:
        left_out.append("float16 instead of float32")
    if plan.dropped_kinds:
        left_out.append(f"without {' and '.join(plan.dropped_kinds)}")
    if left_out:
        print(
            f"attention-lab inspect: warning: every head of {T} tokens does not fit ({plan.why}); "
            f"exporting {'; '.join(left_out)}",
            file=sys.stderr,
        )
    return plan


def _cut(prompt, context: int) -> str:
    """Where ``prompt`` was cut to the model's ``context``, in one line: which tokens were left out."""
    T, gone = prompt.T, prompt.dropped
    front = next((i for i, at in enumerate(prompt.positions) if at != i), T)  # kept in front: a BOS
    first = "the first token" if front == 1 else f"the first {front:,}"
    kept = f"{first} and the last {T - front:,}" if front else f"the last {T:,}"
    return (
        f"the prompt is {T + gone:,} tokens, longer than the model's context of {context:,}: keeping {kept}, "
        f"leaving out its tokens {front:,} to {front + gone - 1:,} (counting from 0; the file's positions "
        "give each kept token's place)"
    )


def run(args: argparse.Namespace) -> int:
    from model.text.tokens import ByteTokenizer

    if not args.prompt:
        raise UserError("--prompt is empty: give at least one character")
    if not args.out.strip():
        raise UserError("--out is empty: give the .npz file (or folder) to write")
    if not 0 <= args.seed <= 2**63 - 1:
        raise UserError(f"--seed {args.seed}: must be a whole number from 0 to 2**63 - 1")
    out = _out_path(args.out)
    clean_stale_temps(out if out.suffix == ".npz" else out.with_name(out.name + ".npz"))
    budget = _budget(args)
    if args.checkpoint is not None:
        ckpt = open_checkpoint(args, "inspect")  # sized before it is built (model.sizing)
        model, tokenizer, cfg = ckpt.model, ckpt.tokenizer, ckpt.model.config
    else:
        model = None
        cfg = GPTConfig.load(args.config, validate=False)
        tokenizer = ByteTokenizer()
        if cfg.core.vocab_size is None:
            cfg = cfg.with_vocab(tokenizer.vocab_size)
        elif not isinstance(cfg.core.vocab_size, int) or isinstance(cfg.core.vocab_size, bool):
            cfg.validate()  # names the problem
        elif cfg.core.vocab_size < tokenizer.vocab_size:
            raise UserError(
                f"vocab_size={cfg.core.vocab_size} is too small for the byte-level tokenizer "
                f"({tokenizer.vocab_size} tokens): omit it or make it at least {tokenizer.vocab_size}"
            )
        cfg.validate()
        check(load_need(cfg, copies=1, what="building this model"))
    plan = _plan(cfg, tokenizer, args, budget, out, with_model=model is None)  # refuses in milliseconds
    import numpy as np

    from model.interp.export import npz_path, save_inspection, streamed_arrays
    from model.interp.inspection import write_inspection
    from model.nn.gpt import init_model

    if model is None:
        model = init_model(cfg, seed=args.seed)
    prompt = plan.prompt
    where = dict(dropped=np.array(prompt.dropped), positions=np.array(prompt.positions, dtype=np.int64))
    size = human_bytes(plan.file) + (" before compression" if args.compress else "")
    print(f"writing {npz_path(out)}: about {size}…", flush=True)
    if plan.held:  # each layer's squares to the file as they are computed; a failed write: one line
        path = write_inspection(
            model,
            tokenizer,
            list(prompt.ids),
            out,
            kinds=plan.kinds,
            layers=plan.layers,
            float16=plan.float16,
            compress=args.compress,
            extra=where,
        )
    else:  # every head pooled, and what recomputes any of them, never a [T, T] in flight
        arrays = streamed_arrays(model, list(prompt.ids), list(prompt.texts), plan.block)
        path = save_inspection(out, {**arrays, **where}, compress=args.compress)
    L, H, T = len(plan.layers or range(cfg.core.n_layers)), cfg.attention.n_heads, prompt.T
    S = -(-T // plan.block) if not plan.held else T
    form = f", streamed: every head pooled to {S}×{S}, each layer's queries and keys" if not plan.held else ""
    print(f"wrote {path}: {L} layers × {H} heads × {T} tokens{form}")
    return 0
