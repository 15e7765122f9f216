"""The code's shape: small functions (none over 60 lines without a reason), every module in the layers contract,
and lazy imports of cloudddp's own modules that only get fewer."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator

import pytest
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


def layer_names() -> set[str]:
    """The modules the import-linter layers contract of pyproject.toml names."""
    if sys.version_info < (3, 11):
        raise pytest.skip.Exception("reads pyproject.toml with tomllib, new in Python 3.11")
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    return {name.strip() for layer in contract["layers"] for name in layer.split("|")}


def test_the_layers_contract_names_every_module_of_cloudddp() -> None:
    """A module the contract leaves out is checked against nothing: each new one gets its place in the layers."""
    package = REPO / "cloudddp"
    modules = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    modules |= {path.parent.name for path in package.glob("*/__init__.py")}
    assert layer_names() == modules


def internal_function_level_imports(source: str) -> int:
    """Imports of cloudddp's own modules inside functions: lazy imports, which hide a layering the module
    header does not show (import-linter counts them; this counts them so that their number only goes down)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                module = inner.module or "" if isinstance(inner, ast.ImportFrom) else ""
                names = [alias.name for alias in inner.names] if isinstance(inner, ast.Import) else [module]
                if isinstance(inner, ast.Import | ast.ImportFrom) and any(n.startswith("cloudddp") for n in names):
                    found.add(id(inner))
    return len(found)


# Lazy imports of cloudddp's own modules (to keep start-up fast: the CLI's provider SDKs, `stage`'s argparse
# path). Lower it when you remove some; raise it only with a reason in the commit.
FUNCTION_LEVEL_IMPORTS = 27


def test_lazy_imports_of_cloudddps_own_modules_do_not_grow() -> None:
    counted = sum(internal_function_level_imports(path.read_text()) for path in (REPO / "cloudddp").rglob("*.py"))
    assert counted <= FUNCTION_LEVEL_IMPORTS, f"{counted} function-level imports of cloudddp modules"
    assert internal_function_level_imports("def f():\n    from cloudddp.spec import x\n    import os\n") == 1


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


def provider_branches(source: str, names: set[str]) -> list[str]:
    """`provider == "slurm"`-like comparisons: a provider name compared with something named provider."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = any(isinstance(side, ast.Constant) and side.value in names for side in sides)
        if named and any("provider" in ast.unparse(side) for side in sides):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_generic_code_does_not_branch_on_provider_names() -> None:
    """What differs by provider or platform is a hook on its declaration (ProviderInfo, Provider) or its cluster
    module (torchrun_args, worker_environment): the CLI, session, Estimator, config and launcher name none."""
    from cloudddp.cluster import BY_NAME
    from cloudddp.providers import registry

    names = set(registry.names()) | set(BY_NAME)
    generic = [*(REPO / "cloudddp").glob("*.py"), *(REPO / "cloudddp" / "launcher").glob("*.py")]
    found = {
        str(path.relative_to(REPO)): hits for path in generic if (hits := provider_branches(path.read_text(), names))
    }
    assert found == {}
    assert provider_branches('if plan.provider != "slurm":\n    pass\n', names) == ["1: plan.provider != 'slurm'"]
