"""The project's size rules (issues 38 and 40): no source file over 500 lines, no class over 400, counting
every line (blank lines, comments and docstrings included); no function over 80 lines or mccabe complexity
20 where that rule has been brought in (:data:`FUNCTION_PACKAGES`). Each is split by what it does, not by
line count; this test only says when one has grown past the rule.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("model", "app", "bench")
MAX_FILE_LINES = 500
MAX_CLASS_LINES = 400


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_packages_are_there():
    assert all((ROOT / pkg).is_dir() for pkg in PACKAGES)
    assert len(_sources()) > 50


def test_no_file_is_over_500_lines():
    long = {_name(p): n for p in _sources() if (n := _line_count(p)) > MAX_FILE_LINES}
    assert not long, f"files over {MAX_FILE_LINES} lines (split them by what they do): {long}"


def test_no_class_is_over_400_lines():
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_CLASS_LINES:
                    long[f"{_name(path)}::{node.name}"] = n
    assert not long, f"classes over {MAX_CLASS_LINES} lines (split them by what they do): {long}"


# ---- functions (issue 40): no function over 80 lines (every line of its def: decorators, docstring,
# blank lines) or over mccabe complexity 20 (ruff's C901), in the packages brought to that rule.
FUNCTION_PACKAGES = ("model", "app/commands")
MAX_FUNCTION_LINES = 80
MAX_COMPLEXITY = 20


def _functions() -> dict[tuple[str, int], tuple[str, int]]:
    """(file, line of the ``def``) -> ("file::qualified name", lines) for every function in
    :data:`FUNCTION_PACKAGES` (methods as ``Class.method``, nested ones as ``outer.inner``)."""
    found: dict[tuple[str, int], tuple[str, int]] = {}

    def visit(node: ast.AST, name: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.end_lineno is not None:
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found[(name, child.lineno)] = (f"{name}::{prefix}{child.name}", child.end_lineno - first + 1)
                visit(child, name, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, name, f"{prefix}{child.name}.")
            else:
                visit(child, name, prefix)

    for pkg in FUNCTION_PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), _name(path), "")
    return found


def _too_complex(functions: dict[tuple[str, int], tuple[str, int]]) -> dict[str, int]:
    """ "file::qualified name" -> complexity for every function over :data:`MAX_COMPLEXITY`, as ruff
    counts it."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--output-format",
            "json",
            "--exit-zero",
            *FUNCTION_PACKAGES,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    complex_ = {}
    for item in json.loads(result.stdout):
        where = (Path(item["filename"]).resolve().relative_to(ROOT).as_posix(), item["location"]["row"])
        number = re.search(r"\((\d+) > \d+\)", item["message"])
        assert where in functions and number, f"a C901 finding that names no function: {item}"
        complex_[functions[where][0]] = int(number.group(1))
    return complex_


def _over_the_limits() -> dict[str, str]:
    functions = _functions()
    over = {name: f"{n} lines" for name, n in functions.values() if n > MAX_FUNCTION_LINES}
    for name, complexity in _too_complex(functions).items():
        over[name] = f"{over[name]}, " if name in over else ""
        over[name] += f"complexity {complexity}"
    return over


def test_no_function_is_over_80_lines_or_complexity_20():
    over = _over_the_limits()
    assert not over, (
        f"functions over {MAX_FUNCTION_LINES} lines or complexity {MAX_COMPLEXITY} (split them by what "
        f"they do): {over}"
    )
