"""Small functions: no function in cloudddp/ over 60 lines unless a comment right above it says why."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from helpers import REPO

LIMIT = 60


def long_functions_without_a_reason(source: str, name: str) -> Iterator[str]:
    """`name:line function (N lines)` for each function over LIMIT lines with no `#` comment line directly above
    its first decorator (or its `def`)."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length <= LIMIT:
            continue
        first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
        above = lines[first - 2].strip() if first >= 2 else ""
        if not above.startswith("#"):
            yield f"{name}:{node.lineno} {node.name} ({length} lines)"


def test_no_function_in_cloudddp_is_over_60_lines_without_a_reason() -> None:
    found = [
        problem
        for path in sorted((REPO / "cloudddp").rglob("*.py"))
        for problem in long_functions_without_a_reason(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert found == []


def test_the_check_finds_a_long_function_and_accepts_one_with_a_reason() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    long = f"def build():\n{body}"
    assert list(long_functions_without_a_reason(long, "m.py")) == [f"m.py:1 build ({LIMIT + 1} lines)"]
    explained = f"import functools\n\n\n# Long because typer reads one parameter per flag.\n@functools.cache\n{long}"
    assert list(long_functions_without_a_reason(explained, "m.py")) == []
    short = "def build():\n" + "".join(f"    x{i} = {i}\n" for i in range(LIMIT - 1))
    assert list(long_functions_without_a_reason(short, "m.py")) == []
