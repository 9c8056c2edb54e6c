"""Lifecycle keys nothing reads, and the nearest known key (the typo check)."""

from __future__ import annotations

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.unknown_keys import describe_unknown, unknown_keys

P = keys.PREFIX


def test_a_typo_is_named_with_the_key_it_was_probably_meant_to_be() -> None:
    found = unknown_keys([P + "delete-afer", keys.DELETE_AT, "example.com/other", P + "zzz"])
    assert found == [(P + "delete-afer", "delete-after"), (P + "zzz", None)]
    assert describe_unknown(*found[0]) == (
        f"{P}delete-afer is not a key the controller reads; did you mean delete-after?"
    )
    assert describe_unknown(*found[1]) == f"{P}zzz is not a key the controller reads"


def test_every_key_the_controller_reads_or_writes_is_known() -> None:
    assert unknown_keys(keys.KNOWN_KEYS) == []
