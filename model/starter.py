"""The starter model: a small GPT shipped in ``assets/starter/`` so a first launch shows heads at work.

It is trained by the project's own CLI (``attention-lab train``) from :data:`RECIPE` (``make starter``
runs :func:`main`): fixed seed, data and steps, written down here. The data, :func:`starter_corpus`,
is ``builtin:tales`` with, after each story, a few lines of a random string of its characters
repeated (``"qWfe,xk qWfe,xk qWfe,xk"``): the stories teach a previous-token head, the repeats make
predicting "what followed this token last time" pay, which is what an induction head does. Since the
random strings use only the stories' characters, the model's vocabulary is exactly ``builtin:tales``'s,
so the app opens it with that data and its prompt.

:func:`named_heads` is what the Attention tab's Metrics page computes (``model.inspection``'s metrics
and ``classify_heads`` at the default thresholds), so a test can check that the shipped weights still
name previous-token and induction heads on the default prompt.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

#: Where the starter lives in the source tree (config.json, model.safetensors, tokenizer.json).
STARTER_DIR = Path(__file__).resolve().parent.parent / "assets" / "starter"

#: The data the app shows with the starter (its vocabulary is this corpus's).
STARTER_SOURCE = "builtin:tales"

#: The recipe: the CLI's arguments, every one written down (config, data, schedule, seed).
RECIPE: dict[str, Any] = {
    "corpus": {
        "base": STARTER_SOURCE,
        "seed": 0,
        "repeats_per_story": 3,
        "block_len": [6, 30],
        "copies": [2, 3],
    },
    "config": {
        "context_length": 128,
        "n_layers": 2,
        "d_model": 128,
        "n_heads": 4,
    },
    "settings": {
        "steps": 800,
        "batch_size": 32,
        "seq_len": 128,
        "seed": 0,
        "threads": 2,
    },
}


def starter_corpus(
    seed: int = 0,
    repeats_per_story: int = 3,
    block_len: tuple[int, int] = (6, 30),
    copies: tuple[int, int] = (2, 3),
    base: str = STARTER_SOURCE,
) -> str:
    """``builtin:tales`` with ``repeats_per_story`` lines after each story, each a random string of
    ``block_len`` of the stories' characters (no newline) written ``copies`` times, space-separated."""
    from model.data import generate_tales

    if base != STARTER_SOURCE:
        raise ValueError(f"the starter corpus is built on {STARTER_SOURCE}, not {base}")
    tales = generate_tales()
    alphabet = sorted(set(tales) - {"\n"})
    rng = random.Random(seed)
    out = []
    for story in tales.strip("\n").split("\n\n"):
        lines = [story]
        for _ in range(repeats_per_story):
            block = "".join(rng.choice(alphabet) for _ in range(rng.randint(*block_len)))
            lines.append(" ".join([block] * rng.randint(*copies)))
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def train_args(corpus_path: str | Path, out: str | Path) -> list[str]:
    """``attention-lab train`` arguments for :data:`RECIPE`."""
    args = ["train", "--corpus", str(corpus_path), "--out", str(out), "--log-every", "100"]
    for name, value in {**RECIPE["config"], **RECIPE["settings"]}.items():
        args += ["--" + name.replace("_", "-"), str(value)]
    return args


def named_heads(model: Any, tokenizer: Any, prompt: str) -> dict[str, list[tuple[int, int]]]:
    """``{role: [(layer, head), ...]}`` as the Metrics page names them on ``prompt`` (default thresholds)."""
    from model.analysis.heads import HEAD_ROLES, classify_heads
    from model.inspection import head_metrics_of
    from model.trace import inspect

    trace = inspect(model, None, tokenizer.encode(prompt), kinds=("weights",))
    result = head_metrics_of(model, trace.stack("weights"), trace.mask)
    names = classify_heads(result.metrics)
    return {role: names.heads_named(role) for role in HEAD_ROLES if names.heads_named(role)}


def describe(named: dict[str, list[tuple[int, int]]]) -> str:
    """``"previous-token L0H2 · induction L1H0, L1H3"``."""
    return " · ".join(f"{role} " + ", ".join(f"L{l}H{h}" for l, h in heads) for role, heads in named.items())


def finish(run: str | Path, out: str | Path = STARTER_DIR) -> str:
    """Save the trained ``run``'s weights, config and tokenizer (not its optimizer state) to ``out``
    with the recipe in its meta.json; returns the line naming the heads it has on the default prompt."""
    from model.checkpoint import load_checkpoint, save_checkpoint
    from model.data import resolve_source

    ckpt = load_checkpoint(run, with_train_state=False)
    trained = ckpt.meta if isinstance(ckpt.meta, dict) else {}
    meta = {
        "name": "starter",
        "source": STARTER_SOURCE,
        "step": trained.get("step"),
        "train_loss": trained.get("train_loss"),
        "val_loss": trained.get("val_loss"),
        "recipe": RECIPE,
    }
    save_checkpoint(out, ckpt.model, ckpt.tokenizer, meta=meta)
    prompt = resolve_source(STARTER_SOURCE, tokenizer=ckpt.tokenizer).default_prompt
    return (
        f"starter in {out}: {describe(named_heads(ckpt.model, ckpt.tokenizer, prompt)) or 'no named heads'}"
    )


def main(argv: list[str] | None = None) -> int:
    """``corpus FILE`` | ``args CORPUS RUN`` | ``finish RUN [OUT]`` — the steps of ``make starter``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["corpus"] and len(argv) == 2:
        spec = dict(RECIPE["corpus"])
        spec["block_len"], spec["copies"] = tuple(spec["block_len"]), tuple(spec["copies"])
        Path(argv[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[1]).write_text(starter_corpus(**spec), encoding="utf-8")
    elif argv[:1] == ["args"] and len(argv) == 3:
        print(" ".join(train_args(argv[1], argv[2])))
    elif argv[:1] == ["finish"] and len(argv) in (2, 3):
        print(finish(*argv[1:]))
    else:
        print(
            "usage: python -m model.starter corpus FILE | args CORPUS RUN | finish RUN [OUT]", file=sys.stderr
        )
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
