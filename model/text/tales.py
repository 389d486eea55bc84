"""``builtin:tales``'s text: short stories from a grammar in ``assets/corpora/tales.json``.

Pure Python (no torch), so the starter's recipe can build its corpora from these stories cheaply.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

GRAMMAR_FILE = Path(__file__).resolve().parents[2] / "assets" / "corpora" / "tales.json"

#: Size of ``builtin:tales`` (characters) and the seed of its grammar.
TALES_CHARS = 600_000
TALES_SEED = 2024
_SLOT = re.compile(r"\{(?:(a|A|cap):)?(\w+)\}")


def generate_tales(n_chars: int = TALES_CHARS, seed: int = TALES_SEED) -> str:
    """Short stories from the grammar in ``assets/corpora/tales.json``, until ``n_chars`` are written.

    Each story binds a cast once (a hero with a name, kind and pronouns, a friend, a place, a thing) and
    expands ``{rule}`` slots at random; ``{a:x}``/``{A:x}`` add an article, ``{cap:x}`` a capital. The
    repeated names make it a natural-text corpus for induction-like copying. Deterministic for a seed.
    """
    grammar = json.loads(GRAMMAR_FILE.read_text(encoding="utf-8"))
    rules: dict[str, list[str]] = grammar["rules"]
    cast: list[list[str]] = grammar["cast"]
    pronouns: dict[str, dict[str, str]] = grammar["pronouns"]
    rng = random.Random(seed)

    def pick(options: list[Any]) -> Any:
        return options[int(rng.random() * len(options))]

    def expand(template: str, env: dict[str, str], depth: int = 0) -> str:
        if depth > 20:
            raise RuntimeError("tales grammar recurses too deeply")

        def slot(m: re.Match) -> str:
            mod, key = m.group(1), m.group(2)
            value = env[key] if key in env else expand(pick(rules[key]), env, depth + 1)
            if mod in ("a", "A"):
                art = "an" if value[:1].lower() in "aeiou" else "a"
                value = f"{art.capitalize() if mod == 'A' else art} {value}"
            elif mod == "cap":
                value = value[:1].upper() + value[1:]
            return value

        return _SLOT.sub(slot, template)

    stories: list[str] = []
    total = 0
    while total < n_chars:
        hero = pick(cast)
        friend = pick([c for c in cast if c[1] != hero[1]])
        env = {"hero": hero[0], "kind": hero[1], "friend": friend[0], "fkind": friend[1]}
        env.update(pronouns[hero[2]])
        env.update({"f" + k: v for k, v in pronouns[friend[2]].items()})
        for key in grammar["bind"]:
            env[key] = expand(pick(rules[key]), env)
        story = expand(pick(rules["story"]), env)
        stories.append(story)
        total += len(story) + 2
    return "\n\n".join(stories) + "\n"


__all__ = ["GRAMMAR_FILE", "TALES_CHARS", "TALES_SEED", "generate_tales"]
