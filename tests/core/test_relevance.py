"""The watch-event predicate (docs/behaviour.md#relevance-predicate; ref 40-41; AS-54..AS-56)."""

from __future__ import annotations

import pytest

from lifecycle_controller.core import should_enqueue_on_create, should_enqueue_on_update
from lifecycle_controller.core.objects import keys

DELETE_AT = {keys.DELETE_AT: "2026-10-05T03:00:00Z"}
DELETE_AFTER = {keys.DELETE_AFTER: "1h"}
RESTART_AT = {keys.RESTART_AT: "2026-10-05T03:00:00Z"}
EVERY = {keys.RESTART_EVERY: "1h"}
CRON = {keys.RESTART_CRON: "0 3 * * *"}
ANCHOR = {keys.LAST_RESTART_TIMESTAMP: "2026-10-05T03:00:00Z"}
Annotations = dict[str, str] | None


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (DELETE_AT, True),
        ({"example.com/x": "y"}, False),
        ({keys.DELETE_AT: ""}, False),
        (None, False),
        ({keys.DRY_RUN: "not-a-boolean", keys.CATCH_UP: "junk"}, False),
        *[({key: "v"}, True) for key in keys.ACTION_KEYS],
    ],
)
def test_ref_040_create_events(annotations: Annotations, expected: bool) -> None:
    assert should_enqueue_on_create(annotations) is expected


# Test 40's update cases (delete and generic events never pass: there is no predicate for
# them, the informer layer simply does not enqueue on delete).
UPDATE_CASES = [
    ("name change (same annotations)", DELETE_AT, DELETE_AT, False),
    ("spec change", DELETE_AT, DELETE_AT, False),
    ("template added under restart-at", RESTART_AT, RESTART_AT, False),
    ("unrelated annotation", DELETE_AT, {**DELETE_AT, "example.com/x": "y"}, False),
    ("action added", {}, DELETE_AT, True),
    ("action value changed", DELETE_AT, {keys.DELETE_AT: "2026-10-06T03:00:00Z"}, True),
    ("action removed", DELETE_AT, {}, True),
    ("dry-run changed", DELETE_AT, {**DELETE_AT, keys.DRY_RUN: "true"}, True),
    ("reference-point next to delete-after", DELETE_AFTER,
     {**DELETE_AFTER, keys.REFERENCE_POINT: "creationTimestamp"}, True),
    ("reference-point next to delete-at only", DELETE_AT,
     {**DELETE_AT, keys.REFERENCE_POINT: "creationTimestamp"}, False),
    ("cron-timezone next to restart-cron", CRON, {**CRON, keys.CRON_TIMEZONE: "Europe/Warsaw"},
     True),
    ("cron-timezone without cron", EVERY, {**EVERY, keys.CRON_TIMEZONE: "Europe/Warsaw"}, False),
    ("last-restart-timestamp added next to every", EVERY, {**EVERY, **ANCHOR}, True),
    ("last-restart-timestamp removed next to cron", {**CRON, **ANCHOR}, CRON, True),
    ("last-restart-timestamp next to restart-at", RESTART_AT, {**RESTART_AT, **ANCHOR}, False),
    ("last-restart-timestamp next to delete-after", DELETE_AFTER, {**DELETE_AFTER, **ANCHOR},
     False),
    ("managed-by added", DELETE_AT, {**DELETE_AT, keys.MANAGED_BY: "lifecycle-controller"}, False),
    ("catch-up changed", DELETE_AT, {**DELETE_AT, keys.CATCH_UP: "never"}, False),
    ("no action on either side, even an invalid dry-run", {}, {keys.DRY_RUN: "bogus"}, False),
    ("empty action added", {}, {keys.DELETE_AT: ""}, False),
    ("annotations appear from None", None, DELETE_AT, True),
    ("dry-run removed", {**DELETE_AT, keys.DRY_RUN: "true"}, DELETE_AT, True),
    ("reference-point changed as delete-after is removed", DELETE_AFTER,
     {keys.REFERENCE_POINT: "creationTimestamp", **DELETE_AT}, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [case[1:] for case in UPDATE_CASES],
    ids=[case[0] for case in UPDATE_CASES],
)
def test_ref_040_as_55_update_events(old: Annotations, new: Annotations, expected: bool) -> None:
    assert should_enqueue_on_update(old, new) is expected


def test_ref_041_as_54_the_predicate_drops_most_watch_events() -> None:
    # A create without an action, a delete, a generic event, an unrelated annotation change,
    # a rename, a spec change and an action value change: only the last one passes.
    accepted = [
        should_enqueue_on_create({"example.com/x": "y"}),
        False,  # delete events are never enqueued
        False,  # generic events are never enqueued
        should_enqueue_on_update(DELETE_AT, {**DELETE_AT, "example.com/x": "y"}),
        should_enqueue_on_update(DELETE_AT, DELETE_AT),
        should_enqueue_on_update(DELETE_AT, DELETE_AT),
        should_enqueue_on_update(DELETE_AT, {keys.DELETE_AT: "2026-10-06T03:00:00Z"}),
    ]
    assert accepted.count(True) == 1
