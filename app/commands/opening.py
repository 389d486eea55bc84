"""How the commands that open a model (``inspect``, ``generate``, ``circuits``) open ``--checkpoint``:
one flag for how its weights are held, and one function that opens it.

``--keep-stored`` keeps a GGUF file's or a float16 / bfloat16 safetensors folder's matrices as the
file stores them, mapped, each decoded to float32 one layer at a time as it is used (about the file's
size in memory, slower per pass); ``--no-keep-stored`` decodes them once into float32 (the faster to
run); neither: automatic, kept as stored past 1 GiB of float32 weights or when float32 would not fit
(:mod:`model.io.stored`). For a model whose weights are read into float32 whatever is asked (ours,
nanoGPT's, GPT-2's) the flag is not ignored in silence: one note line says so.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli import UserError
from app.commands.download import local_checkpoint


def add_keep_stored(p: argparse.ArgumentParser) -> None:
    """The ``--keep-stored`` / ``--no-keep-stored`` flag (``args.keep_stored``: True, False or None)."""
    p.add_argument(
        "--keep-stored",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep a GGUF's or a bf16/fp16 Hugging Face folder's matrices as stored, decoded layer by "
        "layer as used (least memory); --no-keep-stored decodes them once to float32 (fastest); "
        "default: as stored past 1 GiB of float32 weights or when float32 would not fit",
    )


def open_checkpoint(args: argparse.Namespace, command: str, **kwargs: Any):
    """``args.checkpoint`` opened (:func:`model.io.pretrained.open_model`, ``kwargs`` passed on) as
    ``args.keep_stored`` says, the note of a model it does not apply to on stderr; a model that cannot
    be opened (or fetched) is a :class:`~app.cli.UserError`, one line."""
    from model.io.pretrained import open_model

    try:
        ckpt = open_model(local_checkpoint(args.checkpoint), stored=args.keep_stored, **kwargs)
    except (OSError, ValueError) as exc:  # CheckpointError, HubError, DeviceError, a size refusal
        raise UserError(str(exc)) from None
    note = (ckpt.meta or {}).get("note")
    if note:
        print(f"attention-lab {command}: note: {note}", file=sys.stderr)
    return ckpt


__all__ = ["add_keep_stored", "open_checkpoint"]
