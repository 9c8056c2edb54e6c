"""The package's shape rules, checked on every run: one concept per module, one meaning per name.

docs/architecture.md#module-size states them: a module holds one concept, whatever its length;
one over 600 lines is named in that section with a sentence saying why it is still one
concept (so a long module is a decision someone wrote down, not an accident); and no two
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
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
#: Past this many lines a module needs its sentence in docs/architecture.md#module-size.
LONG_MODULE = 600
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


def _module_size_section() -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index("\n## Module size\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_long_module_says_why_it_is_one_concept() -> None:
    """A module over 600 lines is named, with its reason, in docs/architecture.md#module-size."""
    section = _module_size_section()
    unexplained = {
        name: n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LONG_MODULE
        and f"`{(name := str(path.relative_to(PACKAGE)))}`" not in section
    }
    assert unexplained == {}


def test_the_module_size_section_names_only_long_modules() -> None:
    """A module that shrank below the bound leaves the list, so the list stays the truth."""
    section = _module_size_section()
    named = {
        str(path.relative_to(PACKAGE))
        for path in _modules()
        if f"`{path.relative_to(PACKAGE)}`" in section
    }
    short = {
        name
        for name in named
        if len((PACKAGE / name).read_text(encoding="utf-8").splitlines()) <= LONG_MODULE
    }
    assert short == set()


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
