"""The package's shape rules, checked on every run: small modules, one meaning per name.

docs/architecture.md states them: no module over 500 lines (split by job), and no two
modules define the same top-level public name (a name has one meaning and one definition;
other modules import it).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import lifecycle_controller
from tests.realtime_guard import fast_tier_sources_that_wait

PACKAGE = Path(lifecycle_controller.__file__).parent
MAX_LINES = 500
#: Names whose one meaning is a role every such module plays: ``main`` is a program's entry.
ROLES = frozenset({"main"})


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _defined_names(tree: ast.Module) -> set[str]:
    """Top-level public classes, functions and assigned constants (TypeVars excluded)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            value = node.value
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "TypeVar"
            ):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {name for name in names if not name.startswith("_") and name not in ROLES}


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_two_modules_define_the_same_public_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in _defined_names(tree):
            where[name].append(str(path.relative_to(PACKAGE)))
    duplicated = {name: places for name, places in where.items() if len(places) > 1}
    assert duplicated == {}


def test_no_fast_tier_test_waits_for_real_time() -> None:
    """tests/core, tests/machinery and tests/unit move time on the fake clock only."""
    assert fast_tier_sources_that_wait() == []
