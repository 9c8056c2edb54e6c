"""The settings types spell no default of their own: each comes from its flag in the table."""

from __future__ import annotations

import dataclasses

import pytest

from lifecycle_controller.config import RUN_FLAGS, build_settings
from lifecycle_controller.config.settings import (
    ActionSettings,
    GuardrailSettings,
    LeaderElectionSettings,
    NotificationSettings,
    ServingSettings,
    Settings,
)

GROUPS = {
    "actions": ActionSettings,
    "guardrails": GuardrailSettings,
    "leader_election": LeaderElectionSettings,
    "serving": ServingSettings,
    "notifications": NotificationSettings,
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_a_group_built_bare_is_the_group_of_the_flag_defaults(group: str) -> None:
    assert GROUPS[group]() == getattr(build_settings({}), group)


@pytest.mark.parametrize("cls", [*GROUPS.values(), Settings], ids=lambda cls: cls.__name__)
def test_no_field_spells_a_literal_default(cls: type) -> None:
    literal = [f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING]
    assert literal == []


def test_every_flag_field_has_a_default_from_the_table() -> None:
    for flag in RUN_FLAGS:
        group, _, name = flag.into.rpartition(".")
        if group == "scope":
            continue  # ScopeConfig is the core's type: build_settings always fills it
        cls = GROUPS.get(group, Settings)
        field = next(f for f in dataclasses.fields(cls) if f.name == name)
        assert field.default_factory is not dataclasses.MISSING, flag.name
