"""The repository explains itself: citations point at its own docs, and those docs agree with
the tests.

* Comments, docstrings and docs cite ``docs/behaviour.md``, ``docs/annotations.md``,
  ``docs/architecture.md`` and friends, never texts that a clone does not contain.
* Every ``docs/<file>.md#anchor`` citation and every Markdown link between the docs resolves.
* Every cross-reference in a docstring or comment that names a module (``:mod:``), or an object
  by its module path (``:class:``, ``:func:`` and the other roles with
  ``lifecycle_controller.x.Y`` or the relative ``.sibling.f``), names one that imports: a
  module moved or renamed leaves no reference to its old place behind.
* ``docs/acceptance-scenarios.md`` lists AS-1 … AS-70 once each, and the ``test_as_NN``
  tests it names are exactly the ``test_as_NN`` tests that exist, each in the rows of the
  scenario numbers in its name.
"""

from __future__ import annotations

import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SCENARIOS = DOCS / "acceptance-scenarios.md"

#: Where citations may appear: everything a clone of the repository ships.
SCANNED = ["lifecycle_controller", "tests", "benchmarks", "docs", "deploy", ".ci"]
SCANNED_FILES = ["README.md", "tox.ini", "pyproject.toml", "Dockerfile"]
TEXT_SUFFIXES = {".py", ".md", ".ini", ".toml", ".yaml", ".yml", ".tpl", ".txt", ".json", ".cfg"}

# The patterns are assembled from pieces so that this file does not match them itself.
_SECTION = "\N{SECTION SIGN}"
FORBIDDEN = [
    re.compile(re.escape("SPEC" + " " + _SECTION)),
    re.compile(re.escape("REFERENCE" + " " + _SECTION)),
    re.compile(re.escape("PYTHON" + "-NOTES")),
    re.compile(re.escape(".." + "/shared")),
    re.compile(re.escape("SPEC" + ".md") + "|" + re.escape("REFERENCE" + ".md")),
    re.compile(re.escape("ARCHITECTURE" + ".md")),
    re.compile(_SECTION + r"\s?\d"),
]


def _scanned_files() -> list[Path]:
    files = [ROOT / name for name in SCANNED_FILES if (ROOT / name).is_file()]
    for folder in SCANNED:
        base = ROOT / folder
        if base.is_dir():
            files.extend(
                path
                for path in sorted(base.rglob("*"))
                if path.is_file()
                and (path.suffix in TEXT_SUFFIXES or path.name == "run")
                and "__pycache__" not in path.parts
            )
    return files


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def test_nothing_cites_texts_outside_the_repository() -> None:
    offenders: list[str] = []
    for path in _scanned_files():
        text = _read(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if any(pattern.search(line) for pattern in FORBIDDEN):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "cite the repository's own docs instead:\n" + "\n".join(offenders)


# --------------------------------------------------------------------------- anchors


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(markdown: Path) -> set[str]:
    text = markdown.read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    anchors.update(_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M))
    return anchors


CITATION = re.compile(r"\bdocs/([\w.-]+\.md)(?:#([\w-]+))?")
MARKDOWN_LINK = re.compile(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)")


def test_every_docs_citation_resolves() -> None:
    broken: list[str] = []
    for path in _scanned_files():
        text = _read(path)
        if text is None:
            continue
        for match in CITATION.finditer(text):
            target = DOCS / match.group(1)
            anchor = match.group(2)
            if not target.is_file():
                broken.append(f"{path.relative_to(ROOT)}: {match.group(0)} (no such file)")
            elif anchor is not None and anchor not in _anchors(target):
                broken.append(f"{path.relative_to(ROOT)}: {match.group(0)} (no such anchor)")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    "markdown", [*sorted(DOCS.glob("*.md")), ROOT / "README.md"], ids=lambda p: p.name
)
def test_markdown_links_between_docs_resolve(markdown: Path) -> None:
    broken: list[str] = []
    for match in MARKDOWN_LINK.finditer(markdown.read_text(encoding="utf-8")):
        file, anchor = match.group(1), match.group(2)
        if file is None and anchor is None:
            continue
        target = (markdown.parent / file).resolve() if file else markdown
        if not target.is_file():
            broken.append(f"{match.group(0)} (no such file)")
        elif anchor is not None and anchor not in _anchors(target):
            broken.append(f"{match.group(0)} (no such anchor)")
    assert not broken, "\n".join(broken)


# --------------------------------------------------------------------------- cross-references

#: The Python trees whose docstrings cross-reference modules and objects.
PYTHON_TREES = ["lifecycle_controller", "tests", "benchmarks"]
CROSS_REFERENCE = re.compile(r":(mod|class|func|meth|data|attr|exc|obj):`~?([^`<>]+?)`")


def _module_of(path: Path) -> tuple[str, str]:
    """The dotted name of the module at ``path`` and of its package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        name = ".".join(parts[:-1])
        return name, name
    return ".".join(parts), ".".join(parts[:-1])


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or an attribute path inside the longest module it starts
    with."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def _meanings(target: str, module: str, package: str) -> list[str]:
    """The absolute names ``target`` may mean: ``.x`` (Python's relative spelling, one dot per
    package up) is a sibling of the module or a name inside it."""
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
        rest = target[dots:]
        return [f"{base}.{rest}", f"{module}.{rest}"]
    return [target]


def test_every_module_cross_reference_imports() -> None:
    broken: list[str] = []
    for tree in PYTHON_TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            module, package = _module_of(path)
            for match in CROSS_REFERENCE.finditer(path.read_text(encoding="utf-8")):
                role, target = match.group(1), re.sub(r"\s+", "", match.group(2)).rstrip("()")
                # A bare or otherwise-rooted object name ("run", "asyncio.Task") is not a path.
                if not (
                    role == "mod" or target.startswith((".", f"{tree}.", "lifecycle_controller."))
                ):
                    continue
                if not any(_resolves(name) for name in _meanings(target, module, package)):
                    broken.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert not broken, "no such module or object:\n" + "\n".join(broken)


# --------------------------------------------------------------------------- scenarios

SCENARIO_ROW = re.compile(r"^\| (?:<a id=\"as-\d+\"></a>)?AS-(\d+) \|(.*)$", re.M)
CITED_TEST = re.compile(r"`(tests/[\w/]+\.py)::(test_as_\w+)`")
TEST_FILE = re.compile(r"`(tests/[\w/]+\.py)`")
AS_NUMBER = re.compile(r"(?:^test_|_)as_(\d+)")


def _scenario_numbers(test_name: str) -> set[int]:
    """The scenarios a test is named after: ``test_as_20_as_21_x`` -> {20, 21}."""
    return {int(n) for n in AS_NUMBER.findall(test_name)}


def _scenario_tests() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for name in re.findall(r"^\s*(?:async\s+)?def (test_as_\w+)", path.read_text(), re.M):
            found.add((str(path.relative_to(ROOT)), name))
    return found


def _rows() -> dict[int, str]:
    rows: dict[int, str] = {}
    for match in SCENARIO_ROW.finditer(SCENARIOS.read_text(encoding="utf-8")):
        number = int(match.group(1))
        assert number not in rows, f"AS-{number} is listed twice"
        rows[number] = match.group(2)
    return rows


def test_every_scenario_is_listed_once() -> None:
    assert sorted(_rows()) == list(range(1, 71))


def test_the_scenario_table_names_exactly_the_scenario_tests() -> None:
    cited_in: dict[tuple[str, str], set[int]] = defaultdict(set)
    for number, row in _rows().items():
        tests = CITED_TEST.findall(row)
        if not tests:
            files = TEST_FILE.findall(row)
            assert files, f"AS-{number} names no test"
            for file in files:
                assert (ROOT / file).is_file(), f"AS-{number}: {file} does not exist"
        for test in tests:
            cited_in[test].add(number)

    existing = _scenario_tests()
    missing = sorted(set(cited_in) - existing)
    unlisted = sorted(existing - set(cited_in))
    assert not missing, f"named in {SCENARIOS.name} but not found in tests/: {missing}"
    assert not unlisted, f"test_as_NN tests missing from {SCENARIOS.name}: {unlisted}"
    wrong_rows = {
        f"{path}::{name}": sorted(rows)
        for (path, name), rows in cited_in.items()
        if rows != _scenario_numbers(name)
    }
    assert not wrong_rows, f"tests listed under other scenarios than their names say: {wrong_rows}"
