"""`attention-lab budget`: parameters, FLOPs, KV cache, memory and training cost of a config or preset.

Examples::

    attention-lab budget --preset llama2-7b --seq-len 4096 --tokens 2T --peak-tflops 312 --mfu 0.4
    attention-lab budget --layers 12 --d-model 768 --heads 12 --vocab 50257 --context 1024 --tied --json
    attention-lab budget --preset llama2-7b --kv-heads 8          # a preset with one field changed
    attention-lab budget --config runs/my_model                   # a saved config or checkpoint folder
    attention-lab budget --list-presets

Architecture flags given together with ``--preset`` or ``--config`` override that field.
Pure arithmetic: no torch, answers instantly.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Collection

from app.cli import UserError
from app.session.config_files import read_config
from model.budget import arithmetic as budget
from model.budget import bounds, presets
from model.budget.table import render_text
from model.config import CHOICES, FIELD_HELP, GPTConfig

HELP = "Parameters, FLOPs, KV cache, memory and training cost of a config or preset."

# flag -> GPTConfig field
_ARCH_FLAGS = {
    "layers": "n_layers",
    "d_model": "d_model",
    "heads": "n_heads",
    "kv_heads": "n_kv_heads",
    "head_dim": "head_dim",
    "d_ff": "d_ff",
    "mlp": "mlp",
    "vocab": "vocab_size",
    "positions": "positions",
    "context": "context_length",
    "bias": "bias",
    "norm": "norm",
    "norm_position": "norm_position",
    "attn_scale": "attn_scale",
    "tie_embeddings": "tie_embeddings",
}

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_amount(text: str) -> float:
    """'2T' → 2e12, '300B' → 3e11, '1.5e9' → 1.5e9, '4096' → 4096 (argparse type)."""
    m = re.fullmatch(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([kKmMbBgGtTpP]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 2e12, 2T, 300B)")
    value = float(m.group(1)) * _SUFFIX.get(m.group(2).lower(), 1.0)
    return int(value) if value.is_integer() else value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{bounds.short(text)} is not a whole number") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("what to measure (default: the built-in small config; needs --vocab)")
    one = src.add_mutually_exclusive_group()
    one.add_argument("--preset", metavar="NAME", help="a real model, e.g. llama2-7b (see --list-presets)")
    one.add_argument(
        "--config",
        metavar="FILE",
        help="a config JSON saved from the app, a checkpoint folder, or any model the app opens (a Hugging "
        "Face folder, a GGUF file): its config, no weights read",
    )
    src.add_argument("--list-presets", action="store_true", help="list the presets and exit")

    _add_architecture(parser)
    _add_usage(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


#: The architecture flags, in --help's order: (flag, GPTConfig field, metavar); a flag without a
#: metavar takes one of the field's CHOICES. Each flag's help is its field's.
_ARCH_ARGS: tuple[tuple[str, str, str | None], ...] = (
    ("--layers", "n_layers", "L"),
    ("--d-model", "d_model", "D"),
    ("--heads", "n_heads", "H"),
    ("--kv-heads", "n_kv_heads", "H_KV"),
    ("--head-dim", "head_dim", "D_K"),
    ("--d-ff", "d_ff", "D_FF"),
    ("--mlp", "mlp", None),
    ("--vocab", "vocab_size", "V"),
    ("--positions", "positions", None),
    ("--context", "context_length", "T_MAX"),
    ("--bias", "bias", None),
    ("--norm", "norm", None),
    ("--norm-position", "norm_position", None),
    ("--attn-scale", "attn_scale", None),
)


def _add_architecture(parser: argparse.ArgumentParser) -> None:
    """The GPTConfig fields (:data:`_ARCH_ARGS`, then --tied/--untied)."""
    arch = parser.add_argument_group("architecture (override the preset or config when given with one)")
    for flag, field, metavar in _ARCH_ARGS:
        if metavar is None:
            arch.add_argument(flag, choices=CHOICES[field], help=FIELD_HELP[field])
        else:
            arch.add_argument(flag, type=_int, metavar=metavar, help=FIELD_HELP[field])
    tie = arch.add_mutually_exclusive_group()
    tie.add_argument(
        "--tied",
        dest="tie_embeddings",
        action="store_const",
        const=True,
        help="share the token embedding with the output head",
    )
    tie.add_argument(
        "--untied",
        dest="tie_embeddings",
        action="store_const",
        const=False,
        help="a separate output head (Llama)",
    )


def _add_usage(parser: argparse.ArgumentParser) -> None:
    """How the model is used: the sequence, the batch, the precision and the training run."""
    use = parser.add_argument_group("how it is used")
    use.add_argument(
        "--seq-len",
        type=_int,
        metavar="T",
        help="context T for attention FLOPs, KV cache and activations (default: the config's context length)",
    )
    use.add_argument("--batch", type=_int, default=1, metavar="B", help="sequences at once (default 1)")
    use.add_argument(
        "--bytes",
        type=parse_amount,
        default=2,
        metavar="N",
        help="bytes per KV-cache value (2 = fp16/bf16, 1 = int8, 0.5 = int4; default 2)",
    )
    use.add_argument(
        "--causal-halving",
        action="store_true",
        help="count attention-score FLOPs as halved by the causal mask",
    )
    use.add_argument(
        "--precision",
        default="bf16-mixed",
        metavar="MODE",
        help="training memory mode: fp32, bf16-mixed, fp16-mixed, bf16 (default bf16-mixed)",
    )
    use.add_argument(
        "--recompute",
        action="store_true",
        help="activation memory with full recomputation (checkpointing every block)",
    )
    use.add_argument("--tokens", type=parse_amount, metavar="D", help="training tokens, e.g. 2T or 300B")
    use.add_argument(
        "--peak-tflops",
        type=parse_amount,
        metavar="P",
        help="peak dense TFLOP/s of one device (A100 bf16: 312; H100 SXM: 989)",
    )
    use.add_argument(
        "--mfu",
        type=parse_amount,
        default=0.4,
        metavar="M",
        help="model FLOPs utilisation in (0, 1] (default 0.4)",
    )
    use.add_argument(
        "--gpus", type=_int, default=1, metavar="G", help="devices training together (default 1)"
    )
    use.add_argument(
        "--cost-basis",
        default="6N",
        choices=("6N", "matmul"),
        help="6N: 6·N·D with N all parameters (default); matmul: 3·(2·N_mm + attention at T)·D",
    )


def _list_presets(as_json: bool) -> int:
    if as_json:
        out = []
        for p in presets.PRESETS.values():
            d = p.to_dict()
            d["params_total"] = budget.parameters(p.gpt_config()).total
            out.append(d)
        print(json.dumps(out, indent=2))
        return 0
    print(f"{'name':<16} {'model':<16} {'parameters':>17}  L × d, heads (kv)")
    for p in presets.PRESETS.values():
        c = p.gpt_config()
        n = budget.parameters(c).total
        print(
            f"{p.name:<16} {p.title:<16} {n:>17,}  {c.core.n_layers} × {c.core.d_model}, "
            f"{c.attention.n_heads} ({c.kv_heads})"
        )
    return 0


def build_config(args: argparse.Namespace):
    """(GPTConfig, title, preset or None) from --preset / --config / the architecture flags."""
    preset = None
    if args.preset:
        preset = presets.get(args.preset)
        base, title = preset.gpt_config(), preset.title
    elif args.config:
        base, title = read_config(args.config), args.config
    else:
        base, title = GPTConfig(), "custom config"
    changes = {
        field: getattr(args, flag) for flag, field in _ARCH_FLAGS.items() if getattr(args, flag) is not None
    }
    if changes and (args.preset or args.config):
        title += " with " + ", ".join(f"{k}={v}" for k, v in changes.items())
    return base.replace(**changes), title, preset


def run(args: argparse.Namespace) -> int:
    if args.list_presets:
        return _list_presets(args.json)
    cfg, title, preset = build_config(args)
    peak = None if args.peak_tflops is None else args.peak_tflops * 1e12
    settings = dict(
        seq_len=args.seq_len,
        batch=args.batch,
        bytes_per_value=args.bytes,
        tokens=args.tokens,
        peak_flops=peak,
        mfu=args.mfu,
        gpus=args.gpus,
        precision=args.precision,
        cost_basis=args.cost_basis,
    )
    # every count (flags and --config alike) and setting within the bounds the Budget tab keeps too
    given = dict(
        seq_len=args.seq_len,
        batch=args.batch,
        gpus=args.gpus,
        tokens=None if args.tokens is None else float(args.tokens),  # 1e30 read as 1e30, not 31 digits
        peak_tflops=None if args.peak_tflops is None else float(args.peak_tflops),
        mfu=args.mfu,
        bytes_per_value=args.bytes,
    )
    bounded = bounds.out_of_bounds({**bounds.config_counts(cfg), **given})
    found = bounds.merged(bounded, budget.problems(cfg, **settings))
    if found:
        flags = {field for flag, field in _ARCH_FLAGS.items() if getattr(args, flag) is not None}
        in_file = args.config if args.config else None
        raise UserError("; ".join(_flag_names(p, in_file, flags) for p in found))
    rep = budget.report(
        cfg, **settings, recompute=args.recompute, causal_halving=args.causal_halving, title=title
    )
    if preset is not None:
        rep["preset"] = preset.to_dict()
    if args.json:
        json.dump(rep, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render_text(rep))
    return 0


_FIELD_TO_FLAG = {
    **{field: "--" + flag.replace("_", "-") for flag, field in _ARCH_FLAGS.items()},
    "tie_embeddings": "--tied/--untied",
    "seq_len": "--seq-len",
    "batch": "--batch",
    "gpus": "--gpus",
    "tokens": "--tokens",
    "mfu": "--mfu",
    "bytes_per_value": "--bytes",
    "peak_tflops": "--peak-tflops",
    "peak_flops": "--peak-tflops (in FLOP/s)",
    "cost_basis": "--cost-basis",
}


def _flag_names(problem: str, in_file: str | None = None, flags: Collection[str] = ()) -> str:
    """Name the command-line flag next to a config field: 'n_heads=3 ...' → 'n_heads=3 (--heads) ...';
    a field read from the ``--config`` file ``in_file`` and given by no flag names the file too."""
    m = re.match(r"(\w+)=(\S*?)(?=[\s:]|$)", problem)
    if m and m.group(1) in _FIELD_TO_FLAG:
        flag = _FIELD_TO_FLAG[m.group(1)]
        if in_file is not None and m.group(1) in _ARCH_FLAGS.values() and m.group(1) not in flags:
            flag = f"in {in_file}; {flag} overrides it"
        return f"{m.group(0)} ({flag}){problem[m.end() :]}"
    if problem.startswith("vocab_size is not set"):
        return problem.replace("vocab_size", "vocab_size (--vocab)", 1)
    return problem
