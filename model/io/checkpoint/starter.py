"""The starter model: a small GPT shipped in ``assets/starter/`` so a first launch shows heads at work.

It is trained by the project's own CLI (``attention-lab train``; later stages, if any, ``--resume``)
from :data:`RECIPE`, whose data, shape, steps and seed are written down here (``make starter``).
The recipe is ``task:induction`` on its recommended 2-layer shape: random segments repeated after a
gap, the loss scored only on the repeats, which only "what followed this token last time" predicts.
A previous-token head in layer 0 and an induction head in layer 1 form in a phase change near step
130 (``model.train.recipes.recommended_settings``); 250 steps, then 250 more resumed, take a few minutes on
2 CPU cores.

A stage may also be a generated text over ``builtin:tales``'s characters, so that the model reads
the stories: :func:`repeats_corpus` (segments with copies, every position scored) and
:func:`starter_corpus` (the stories with repeats after each one). With every position scored, neither
reached the phase change within 300-1200 steps in our runs, so the shipped recipe does not use them.

:func:`named_heads` is what the Attention tab's Metrics page computes (``model.interp.inspection``'s metrics
and ``classify_heads`` at the default thresholds, the prompt cut to the context as the tab cuts it),
so a test can check that the shipped weights still name previous-token and induction heads on the
default prompt of the starter's data (:data:`STARTER_SOURCE`).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model.text.tales import generate_tales

if TYPE_CHECKING:
    from model.nn.gpt import GPT
    from model.text.tokens import Tokenizer

# The models' side (model.interp, model.io.checkpoint.saved, model.text.sources: torch) is imported inside
# named_heads() and finish(): `python -m model.io.checkpoint.starter stages|corpus|args`, which `make starter`
# runs between trainings, needs none of it.

#: Where the starter lives in the source tree (config.json, model.safetensors, tokenizer.json).
STARTER_DIR = Path(__file__).resolve().parents[3] / "assets" / "starter"


#: The recipe: the model, the training settings, and per stage its data and total steps.
RECIPE: dict[str, Any] = {
    "config": {"context_length": 64, "n_layers": 2, "d_model": 128, "n_heads": 4},
    "settings": {"batch_size": 64, "seq_len": 64, "lr": 0.003, "warmup": 30, "seed": 0, "threads": 2},
    "stages": [
        {"data": {"kind": "source", "spec": "task:induction"}, "steps": 250},
        # resumed to 500 steps (a fresh cosine from step 250): the heads pass the naming thresholds
        {"data": {"kind": "source", "spec": "task:induction"}, "steps": 500},
    ],
}


#: The data the app shows with the starter: the last stage's source, or ``builtin:tales`` whose
#: characters the generated corpora use (the model's vocabulary is exactly that source's).
_last = RECIPE["stages"][-1]["data"]
STARTER_SOURCE: str = _last["spec"] if _last["kind"] == "source" else "builtin:tales"


def stage_text(stage: int) -> str | None:
    """The corpus text of ``RECIPE["stages"][stage]`` (None for a data source named by its spec)."""
    data = dict(RECIPE["stages"][stage]["data"])
    kind = data.pop("kind")
    if kind == "source":
        return None
    data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return repeats_corpus(**data) if kind == "repeats" else starter_corpus(**data)


def stage_corpus(stage: int, directory: str | Path) -> str:
    """What ``--corpus`` gets for ``stage``: the source's spec, or a text file written into ``directory``."""
    text = stage_text(stage)
    if text is None:
        return str(RECIPE["stages"][stage]["data"]["spec"])
    path = Path(directory) / f"stage{stage}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def starter_corpus(
    seed: int = 0,
    repeats_per_story: int = 3,
    block_len: tuple[int, int] = (6, 30),
    copies: tuple[int, int] = (2, 3),
    base: str = "builtin:tales",
) -> str:
    """``builtin:tales`` with ``repeats_per_story`` lines after each story, each a random string of
    ``block_len`` of the stories' characters (no newline) written ``copies`` times, space-separated."""
    if base != "builtin:tales":
        raise ValueError(f"the starter corpus is built on builtin:tales, not {base}")
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


def repeats_corpus(
    n_chars: int = 400_000, seed: int = 0, seg_len=(8, 24), gap_len=(0, 16), copies=(2, 2)
) -> str:
    """Episodes back to back over ``builtin:tales``'s characters, as ``task:induction`` builds them
    over symbols: a random segment ``S`` (``seg_len``), then ``copies - 1`` times a random gap ``G``
    (``gap_len``) and ``S`` again. The first stage of the recipe: every copy after the first is
    predictable only by an induction head, so those heads form fast."""
    alphabet = sorted(set(generate_tales()))
    rng = random.Random(seed)
    parts, total = [], 0
    while total < n_chars:
        seg = "".join(rng.choice(alphabet) for _ in range(rng.randint(*seg_len)))
        episode = seg
        for _ in range(rng.randint(*copies) - 1):
            episode += "".join(rng.choice(alphabet) for _ in range(rng.randint(*gap_len))) + seg
        parts.append(episode)
        total += len(episode)
    return "".join(parts)


def train_args(stage: int, corpus_path: str | Path, run: str | Path) -> list[str]:
    """``attention-lab train`` arguments for stage ``stage`` (later stages resume ``run``)."""
    steps = str(RECIPE["stages"][stage]["steps"])
    if stage:
        return [
            "train",
            "--resume",
            str(run),
            "--corpus",
            str(corpus_path),
            "--steps",
            steps,
            "--log-every",
            "50",
        ]
    args = ["train", "--corpus", str(corpus_path), "--out", str(run), "--steps", steps, "--log-every", "50"]
    for name, value in {**RECIPE["config"], **RECIPE["settings"]}.items():
        args += ["--" + name.replace("_", "-"), str(value)]
    return args


def named_heads(model: GPT, tokenizer: Tokenizer, prompt: str) -> dict[str, list[tuple[int, int]]]:
    """``{role: [(layer, head), ...]}`` as the Metrics page names them on ``prompt`` (default thresholds)."""
    from model.interp.analysis.heads import HEAD_ROLES, classify_heads
    from model.interp.measures import head_metrics_of
    from model.interp.prompt import encode_prompt
    from model.interp.trace import run_with_trace

    trace = run_with_trace(
        model, encode_prompt(tokenizer, prompt, model.config.core.context_length), kinds=("pattern",)
    )
    result = head_metrics_of(model, trace.stack("pattern"), trace.mask)
    names = classify_heads(result.metrics)
    return {role: names.heads_named(role) for role in HEAD_ROLES if names.heads_named(role)}


def describe(named: dict[str, list[tuple[int, int]]]) -> str:
    """``"previous-token L0H2 · induction L1H0, L1H3"``."""
    return " · ".join(f"{role} " + ", ".join(f"L{l}H{h}" for l, h in heads) for role, heads in named.items())


def finish(run: str | Path, out: str | Path = STARTER_DIR) -> str:
    """Save the trained ``run``'s weights, config and tokenizer (not its optimizer state) to ``out``
    with the recipe in its meta.json; returns the line naming the heads it has on the default prompt."""
    from model.io.checkpoint.saved import load_checkpoint, save_checkpoint
    from model.text.sources import resolve_source

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
    """``stages`` | ``corpus STAGE DIR`` (prints the ``--corpus`` value, writing a file if needed) |
    ``args STAGE CORPUS RUN`` | ``finish RUN [OUT]``: the steps of ``make starter``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["stages"]:
        print(" ".join(str(i) for i in range(len(RECIPE["stages"]))))
    elif argv[:1] == ["corpus"] and len(argv) == 3:
        print(stage_corpus(int(argv[1]), argv[2]))
    elif argv[:1] == ["args"] and len(argv) == 4:
        print(" ".join(train_args(int(argv[1]), argv[2], argv[3])))
    elif argv[:1] == ["finish"] and len(argv) in (2, 3):
        print(finish(*argv[1:]))
    else:
        usage = "stages | corpus STAGE DIR | args STAGE CORPUS RUN | finish RUN [DIR]"
        print(f"usage: python -m model.starter {usage}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
