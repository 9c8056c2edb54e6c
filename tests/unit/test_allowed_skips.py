"""The skip allow-list (tests/allowed_skips.txt): every id names a test that exists, and a
junit test case maps to the list's ids as .ci/run reads them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.allowed_skips import LIST, allowed, node_id

ROOT = LIST.parent.parent


def functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_every_allowed_skip_names_a_test_that_exists_and_says_why() -> None:
    entries = allowed()
    assert entries, "the list is read"
    for test, why in entries.items():
        module, _, name = test.partition("::")
        assert (ROOT / module).is_file(), test
        assert name in functions(ROOT / module), test
        assert why, f"{test}: say why it may skip"


@pytest.mark.parametrize(
    ("classname", "name", "expected"),
    [
        (
            "tests.integration.test_kube_client",
            "test_a_connection_closed_before_the_pool_got_it_leaks_no_socket",
            "tests/integration/test_kube_client.py::"
            "test_a_connection_closed_before_the_pool_got_it_leaks_no_socket",
        ),
        (
            "tests.faults.test_policy_stale_view",
            "test_a_policy_changed_behind_a_held_watch_deletes_nothing_it_no_longer_allows[narrowed]",
            "tests/faults/test_policy_stale_view.py::"
            "test_a_policy_changed_behind_a_held_watch_deletes_nothing_it_no_longer_allows",
        ),
        ("tests.unit.test_nothing.TestA", "test_b", "tests.unit.test_nothing.TestA::test_b"),
        (
            "tests.unit.test_allowed_skips.Case",
            "test_c",
            "tests/unit/test_allowed_skips.py::Case::test_c",
        ),
    ],
)
def test_a_junit_case_maps_to_its_id(classname: str, name: str, expected: str) -> None:
    assert node_id(classname, name, ROOT) == expected


def test_comments_and_blank_lines_are_not_entries() -> None:
    text = "# a comment\n\ntests/x.py::test_y  # why\n  \n"
    assert allowed(text) == {"tests/x.py::test_y": "why"}
