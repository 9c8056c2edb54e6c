"""The words explain shows for each annotation value, and relative times."""

from __future__ import annotations

from datetime import UTC

import pytest

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.tooling.describe import (
    DESCRIBED_KEYS,
    catch_up_meaning,
    describe_annotations,
    relative,
)

from .support import NOW

S = 1_000_000_000


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (0, "now"),
        (S // 2, "now"),
        (5 * S, "in 5s"),
        (-125 * S, "2m5s ago"),
        (4800 * S, "in 1h20m"),
        (86_400 * S, "in 1d"),
        (86_430 * S, "in 1d"),  # the two largest units: days and hours
        (-(801 * 3600 + 540) * S, "33d9h ago"),
    ],
)
def test_relative(delta: int, text: str) -> None:
    assert relative(NOW + delta, NOW) == text


def meaning(key: str, value: str) -> str:
    [(_, _, text)] = describe_annotations({key: value}, now_ns=NOW, local_zone=UTC)
    return text


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        (
            keys.DELETE_AFTER,
            "90m",
            "1h30m0s from the reference point; the controller converts it to delete-at",
        ),
        (keys.RESTART_AFTER, "2x", 'invalid: invalid duration format: "2x"'),
        (keys.DELETE_AT, "2026-10-05T04:00:00Z", "2026-10-05T04:00:00Z (in 1h)"),
        (keys.RESTART_AT, "soon", "invalid: "),
        (keys.RESTART_EVERY, "30s", "invalid: duration must be at least 1m0s"),
        (keys.RESTART_EVERY, "2h", "every 2h0m0s"),
        (
            keys.RESTART_CRON,
            "0 3 * * *",
            "cron '0 3 * * *' in the zone of cron-timezone (UTC if unset)",
        ),
        (keys.RESTART_CRON, "61 * * * *", "invalid: "),
        (keys.CRON_TIMEZONE, "Europe/Warsaw", "time zone Europe/Warsaw"),
        (keys.CRON_TIMEZONE, "Mars/Olympus", "invalid: "),
        (
            keys.CATCH_UP,
            "15m",
            "a missed action runs if noticed within 15m0s of its due time, else it is skipped",
        ),
        (keys.CATCH_UP, "sometimes", "invalid: "),
        (keys.DRY_RUN, "true", "dry-run: decisions become Events only"),
        (keys.DRY_RUN, "false", "not a dry run"),
        (keys.DRY_RUN, "maybe", "invalid boolean 'maybe': nothing is done until it is fixed"),
        (
            keys.REFERENCE_POINT,
            "creationTimestamp",
            "-after durations count from the object's creation",
        ),
        (
            keys.REFERENCE_POINT,
            "applyTimestamp",
            "-after durations count from when the controller first sees them",
        ),
        (
            keys.REFERENCE_POINT,
            "bogus",
            "unknown reference point 'bogus': falls back to applyTimestamp",
        ),
        (
            keys.LAST_RESTART_TIMESTAMP,
            "2026-10-05T02:00:00Z",
            "anchor of the recurring schedule: 2026-10-05T02:00:00Z (1h ago)",
        ),
        (
            keys.MANAGED_BY,
            "lifecycle-controller",
            "written by the controller when it changes the object",
        ),
        (keys.PREFIX + "delete-afterr", "1h", "not a key the controller reads; ignored"),
    ],
)
def test_every_key_has_a_meaning(key: str, value: str, text: str) -> None:
    assert meaning(key, value).startswith(text)


def test_only_lifecycle_keys_in_key_order() -> None:
    lines = describe_annotations(
        {keys.RESTART_CRON: "0 3 * * *", "other": "x", keys.CRON_TIMEZONE: "UTC"},
        now_ns=NOW,
        local_zone=UTC,
    )
    assert [key for key, _, _ in lines] == [keys.CRON_TIMEZONE, keys.RESTART_CRON]


def test_catch_up_meanings() -> None:
    assert catch_up_meaning("always") == "a missed action runs however late it is noticed"
    assert catch_up_meaning("never").startswith(
        "a missed action runs only if this controller saw it"
    )


# --- every key the controller reads is described (docs/annotations.md) ----------------------


def test_every_known_key_has_a_description() -> None:
    assert frozenset(keys.KNOWN_KEYS) == DESCRIBED_KEYS


def test_known_keys_are_every_key_the_keys_module_spells() -> None:
    spelled = {
        value
        for name, value in vars(keys).items()
        if name.isupper() and isinstance(value, str) and value.startswith(keys.PREFIX)
    }
    spelled.discard(keys.PREFIX)
    assert spelled == set(keys.KNOWN_KEYS)


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        (
            keys.MAINTENANCE_WINDOW,
            "Mon-Sun 00:00-24:00 UTC",
            "due actions run only inside Mon-Sun 00:00-24:00 UTC (open now)",
        ),
        (keys.MAINTENANCE_WINDOW, "Funday 01:00-02:00 UTC", "invalid: "),
        (keys.WARN_BEFORE, "15m", "an UpcomingDeletion/UpcomingRestart Event 15m0s before acting"),
        (keys.WARN_BEFORE, "0s", "no warning before acting"),
        (keys.WARN_BEFORE, "soon", "invalid: "),
        (
            keys.OBSERVED,
            "2026-10-05T04:00:00Z;v1-0123456789abcdef",
            "written by the controller (--persist-observations): it saw the occurrence due "
            "2026-10-05T04:00:00Z (in 1h)",
        ),
        (keys.OBSERVED, "garbled", "invalid: "),
        (keys.MAX_DELETE_TTL, "30d", "read on a Namespace only"),
    ],
)
def test_the_keys_explain_used_to_call_ignored(key: str, value: str, text: str) -> None:
    assert meaning(key, value).startswith(text)
    assert "not a key the controller reads" not in meaning(key, value)


def test_on_a_namespace_the_defaults_and_the_cap_are_described() -> None:
    lines = describe_annotations(
        {keys.MAX_DELETE_TTL: "30d", keys.WARN_BEFORE: "15m", keys.DRY_RUN: "true"},
        now_ns=NOW,
        local_zone=UTC,
        namespace=True,
    )
    meanings = {key: text for key, _, text in lines}
    assert meanings[keys.MAX_DELETE_TTL] == (
        "delete TTLs longer than 720h0m0s are refused in this namespace"
    )
    assert meanings[keys.WARN_BEFORE].endswith(
        "; also the default of the objects in this namespace"
    )
    assert meanings[keys.DRY_RUN].endswith("; also the default of the objects in this namespace")


def test_on_a_namespace_exempt_is_described_for_its_objects() -> None:
    lines = describe_annotations({keys.EXEMPT: "true"}, now_ns=NOW, local_zone=UTC, namespace=True)
    assert lines[0][2] == (
        "no lifecycle policy but an enforced one acts on this Namespace or any object in it "
        "(their own annotations still do)"
    )
    (line,) = describe_annotations(
        {keys.EXEMPT: "false"}, now_ns=NOW, local_zone=UTC, namespace=True
    )
    assert line[2] == "lifecycle policies may act on this object"
