"""The order in which the integration tier hands its xdist groups out (tests/conftest.py):
the groups with a test marked ``long`` first, then the larger groups, each group whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import pytest

from tests.conftest import long_groups_first


@dataclass
class Item:
    """The part of a collected test that the ordering reads: its marks."""

    name: str
    group: str
    long: bool = False
    marks: dict[str, pytest.Mark] = field(init=False)

    def __post_init__(self) -> None:
        self.marks = {"xdist_group": pytest.mark.xdist_group(self.group).mark}
        if self.long:
            self.marks["long"] = pytest.mark.long.mark

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.marks.get(name)


def order(*items: Item) -> list[str]:
    return [item.name for item in long_groups_first(cast(list[pytest.Item], list(items)))]


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        pytest.param([], [], id="nothing"),
        pytest.param(
            [Item("a1", "a"), Item("b1", "b"), Item("b2", "b"), Item("c1", "c")],
            ["b1", "b2", "a1", "c1"],
            id="the larger group first, ties in collection order",
        ),
        pytest.param(
            [Item("a1", "a"), Item("a2", "a"), Item("z1", "z", long=True)],
            ["z1", "a1", "a2"],
            id="a group with a long test before a larger one",
        ),
        pytest.param(
            [
                Item("a1", "a"),
                Item("k1", "kwok"),
                Item("b1", "b", long=True),
                Item("k2", "kwok", long=True),
                Item("k3", "kwok"),
            ],
            ["k1", "k2", "k3", "b1", "a1"],
            id="one long test puts its whole group first; the long groups by size",
        ),
        pytest.param(
            [Item("a1", "a"), Item("b1", "b"), Item("a2", "a")],
            ["a1", "a2", "b1"],
            id="a group's tests together, in their order",
        ),
    ],
)
def test_long_groups_first(items: list[Item], expected: list[str]) -> None:
    assert order(*items) == expected
