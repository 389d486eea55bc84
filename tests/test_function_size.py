"""No function over 80 lines in the packages brought to that rule (issue 40): the loaders, the text and
the network (``model/io``, ``model/text``, ``model/nn``), every line of the ``def`` counted (decorators,
docstring, blank lines). A function past it is split by what it does; its complexity is ruff's C901
(``ruff check --select C901 --config 'lint.mccabe.max-complexity=20' model``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("model/io", "model/text", "model/nn")
MAX_FUNCTION_LINES = 80


def test_no_function_is_over_80_lines():
    long = {}
    for path in sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if (n := node.end_lineno - first + 1) > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT).as_posix()}::{node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them by what they do): {long}"
