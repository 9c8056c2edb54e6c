"""The persisted ``never`` observation (docs/behaviour.md#persisted-observations).

Tables and properties over the encoding and over decide() with ``persist_observations``:
a record written before the due time lets a fresh ledger (a new leader) execute the
occurrence; a changed schedule, another occurrence, another object or a garbled value does
not; without the setting nothing changes. Time is always injected.
"""

from __future__ import annotations

import contextlib
import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    NEVER,
    DecisionSettings,
    Delete,
    DryRun,
    Identity,
    Patch,
    Wait,
    parse_catch_up_rule,
)
from lifecycle_controller.core.decision.observed import (
    ObservationError,
    check_record,
    decode_observation,
    encode_observation,
    identity_fingerprint,
    record_matches,
)
from lifecycle_controller.core.decision.outcomes import Decision
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.relevance import should_enqueue_on_update
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from tests.core.support import CONFIGMAP, DEPLOYMENT, HOUR, MINUTE, NOW, SECOND, World, reasons, ts

PERSIST = DecisionSettings(persist_observations=True)
DUE = "2026-10-05T03:10:00Z"
BEFORE = ts(DUE) - 5 * MINUTE
AFTER = ts(DUE) + 5 * MINUTE


def _patch_record(world: World, decision: Decision) -> None:
    assert isinstance(decision, Wait)
    assert decision.record is not None
    world.annotations.update(decision.record["metadata"]["annotations"])


IDENTITY = Identity("uid-1", "delete", NEVER, (keys.DELETE_AT, DUE))


# --- encoding ------------------------------------------------------------------------------------


def test_encoding_is_due_time_and_versioned_fingerprint() -> None:
    value = encode_observation(IDENTITY, ts(DUE))
    due, fingerprint = value.split(";")
    assert due == DUE
    assert fingerprint.startswith("v1-")
    assert len(fingerprint) == 19
    assert decode_observation(value).due_ns == ts(DUE)


def test_nanoseconds_round_trip() -> None:
    value = encode_observation(IDENTITY, ts(DUE) + 123)
    assert value.startswith("2026-10-05T03:10:00.000000123Z;")
    assert decode_observation(value).due_ns == ts(DUE) + 123


GARBLED = [
    "",
    "yes",
    DUE,
    f"{DUE};",
    f"{DUE};v1-",
    f"{DUE};v2-0123456789abcdef",
    f"{DUE};v1-0123456789ABCDEF",
    f"{DUE};v1-0123456789abcdef;extra",
    "2026-13-05T03:10:00Z;v1-0123456789abcdef",
    "tomorrow;v1-0123456789abcdef",
    f" {DUE};v1-0123456789abcdef",
]


def test_garbled_values_are_refused_and_never_match() -> None:
    for value in GARBLED:
        if value:
            try:
                decode_observation(value)
            except ObservationError:
                pass
            else:  # pragma: no cover - the assertion that makes this test able to fail
                raise AssertionError(f"accepted {value!r}")
        assert not record_matches(value, IDENTITY, ts(DUE))


def test_identity_parts_each_change_the_fingerprint() -> None:
    base = identity_fingerprint(IDENTITY)
    variants = [
        dataclasses.replace(IDENTITY, uid="uid-2"),
        dataclasses.replace(IDENTITY, action="restart"),
        dataclasses.replace(IDENTITY, catch_up=parse_catch_up_rule("15m")),
        dataclasses.replace(IDENTITY, config=(keys.DELETE_AT, "2026-10-05T03:10:01Z")),
        dataclasses.replace(IDENTITY, config=(keys.RESTART_AT, DUE)),
        dataclasses.replace(IDENTITY, config=(keys.RESTART_EVERY, "1h", "")),
        dataclasses.replace(IDENTITY, config=(keys.RESTART_EVERY, "1h;", "")),
        dataclasses.replace(IDENTITY, config=(keys.RESTART_EVERY, "1h", ";")),
    ]
    assert len({base, *map(identity_fingerprint, variants)}) == len(variants) + 1


CHECK_TABLE = [
    # (stored value, due, now) -> (counts as observed, value to write)
    (None, ts(DUE), BEFORE, True, "write"),
    ("garbage", ts(DUE), BEFORE, True, "write"),
    ("match", ts(DUE), BEFORE, True, None),
    ("other-occurrence", ts(DUE), BEFORE, True, "write"),
    (None, ts(DUE), AFTER, False, None),
    ("garbage", ts(DUE), AFTER, False, None),
    ("match", ts(DUE), AFTER, True, None),
    ("match", ts(DUE), ts(DUE), True, None),
    ("other-occurrence", ts(DUE), AFTER, False, None),
]


def test_check_record_table() -> None:
    stored_values = {
        "garbage": "not a record",
        "match": encode_observation(IDENTITY, ts(DUE)),
        "other-occurrence": encode_observation(IDENTITY, ts(DUE) - HOUR),
    }
    for stored, due, now, seen, write in CHECK_TABLE:
        value = stored_values.get(stored) if stored else None
        got_seen, got_write = check_record(value, IDENTITY, due, now)
        assert got_seen is seen, (stored, now)
        expected = encode_observation(IDENTITY, due) if write else None
        assert got_write == expected, (stored, now)


identities = st.builds(
    Identity,
    uid=st.text(max_size=40),
    action=st.sampled_from(["delete", "restart"]),
    catch_up=st.just(NEVER),
    config=st.lists(st.text(max_size=30), min_size=1, max_size=4).map(tuple),
)
instants = st.integers(min_value=0, max_value=ts("9999-12-31T23:59:59Z"))


@given(identities, instants)
def test_property_round_trip(identity: Identity, due: int) -> None:
    value = encode_observation(identity, due)
    record = decode_observation(value)
    assert (record.due_ns, record.fingerprint) == (due, identity_fingerprint(identity))
    assert record_matches(value, identity, due)


@given(identities, instants, st.text(min_size=1, max_size=30))
def test_property_changed_schedule_invalidates(identity: Identity, due: int, extra: str) -> None:
    changed = dataclasses.replace(
        identity, config=(*identity.config[:-1], identity.config[-1] + extra)
    )
    value = encode_observation(identity, due)
    assert not record_matches(value, changed, due)
    assert not record_matches(value, identity, due + 1)


@given(st.text(max_size=60), identities, instants)
def test_property_arbitrary_text_never_crashes(value: str, identity: Identity, due: int) -> None:
    with contextlib.suppress(ObservationError):
        decode_observation(value)
    matched = record_matches(value, identity, due)
    assert matched == (value == encode_observation(identity, due))


# --- decide() ------------------------------------------------------------------------------------

NEVER_DELETE = {keys.DELETE_AT: DUE, keys.CATCH_UP: "never"}


def test_without_the_setting_a_wait_writes_nothing() -> None:
    decision = World(NEVER_DELETE).reconcile(BEFORE)
    assert isinstance(decision, Wait)
    assert decision.record is None


def test_wait_under_never_carries_one_record_patch() -> None:
    world = World(NEVER_DELETE, settings=PERSIST)
    decision = world.reconcile(BEFORE)
    assert isinstance(decision, Wait)
    assert decision.record == {
        "metadata": {
            "annotations": {
                keys.OBSERVED: encode_observation(
                    Identity(DEPLOYMENT.uid, "delete", NEVER, (keys.DELETE_AT, DUE)), ts(DUE)
                ),
                keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
            }
        }
    }
    _patch_record(world, decision)
    again = world.reconcile(BEFORE + MINUTE)
    assert isinstance(again, Wait)
    assert again.record is None


def test_failover_with_a_record_executes_the_occurrence() -> None:
    world = World(NEVER_DELETE, settings=PERSIST)
    _patch_record(world, world.reconcile(BEFORE))
    world.restart_process()  # the new leader: empty ledger
    assert isinstance(world.reconcile(AFTER), Delete)


def test_failover_without_the_setting_skips() -> None:
    world = World(NEVER_DELETE)
    world.reconcile(BEFORE)
    world.restart_process()
    decision = world.reconcile(AFTER)
    assert isinstance(decision, Patch)
    assert decision.operation == "skip"


def test_failed_record_write_keeps_the_in_memory_observation() -> None:
    world = World(NEVER_DELETE, settings=PERSIST)
    world.reconcile(BEFORE)  # the record patch is never applied
    assert isinstance(world.reconcile(AFTER), Delete)  # same process: the ledger still counts


def test_changed_schedule_invalidates_the_record() -> None:
    world = World(NEVER_DELETE, settings=PERSIST)
    _patch_record(world, world.reconcile(BEFORE))
    world.annotations[keys.DELETE_AT] = "2026-10-05T03:11:00Z"  # edited while nobody led
    world.restart_process()
    decision = world.reconcile(ts("2026-10-05T03:20:00Z"))
    assert isinstance(decision, Patch)
    assert decision.operation == "skip"
    assert decision.body["metadata"]["annotations"][keys.OBSERVED] is None  # cleared with it


def test_record_for_another_object_is_ignored() -> None:
    world = World(NEVER_DELETE, settings=PERSIST)
    _patch_record(world, world.reconcile(BEFORE))
    copy = World(
        world.annotations, facts=dataclasses.replace(DEPLOYMENT, uid="uid-9"), settings=PERSIST
    )
    decision = copy.reconcile(AFTER)
    assert isinstance(decision, Patch)
    assert decision.operation == "skip"


def test_garbled_record_is_ignored_and_replaced_before_due() -> None:
    for value in GARBLED:
        world = World({**NEVER_DELETE, keys.OBSERVED: value}, settings=PERSIST)
        decision = world.reconcile(BEFORE)
        assert isinstance(decision, Wait)
        assert decision.record is not None
        late = World({**NEVER_DELETE, keys.OBSERVED: value}, settings=PERSIST).reconcile(AFTER)
        assert isinstance(late, Patch), value
        assert late.operation == "skip", value


def test_other_policies_and_dry_run_never_record() -> None:
    for given_annotations in (
        {keys.DELETE_AT: DUE},
        {keys.DELETE_AT: DUE, keys.CATCH_UP: "15m"},
        {**NEVER_DELETE, keys.DRY_RUN: "true"},
    ):
        decision = World(given_annotations, settings=PERSIST).reconcile(BEFORE)
        assert isinstance(decision, Wait), given_annotations
        assert decision.record is None, given_annotations


def test_dry_run_never_acts_on_a_record() -> None:
    world = World(NEVER_DELETE, settings=PERSIST)
    _patch_record(world, world.reconcile(BEFORE))
    world.annotations[keys.DRY_RUN] = "true"
    world.restart_process()
    assert isinstance(world.reconcile(AFTER), DryRun)


def test_restart_at_record_is_cleared_in_the_restart_patch() -> None:
    world = World({keys.RESTART_AT: DUE, keys.CATCH_UP: "never"}, settings=PERSIST)
    _patch_record(world, world.reconcile(BEFORE))
    world.restart_process()
    decision = world.reconcile(AFTER)
    assert isinstance(decision, Patch)
    assert decision.operation == "restart"
    annotations = decision.body["metadata"]["annotations"]
    assert annotations[keys.RESTART_AT] is None
    assert annotations[keys.OBSERVED] is None
    assert world.writes == 1


def test_recurring_restart_replaces_the_record_in_the_same_patch() -> None:
    annotations = {
        keys.RESTART_EVERY: "1h",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-05T02:00:00Z",
        keys.CATCH_UP: "never",
    }
    world = World(annotations, settings=PERSIST)
    _patch_record(world, world.reconcile(NOW - MINUTE))
    world.restart_process()
    decision = world.reconcile(NOW + SECOND)
    assert isinstance(decision, Patch)
    assert decision.operation == "restart"
    assert reasons(decision.on_success.events) == ["RestartTriggered"]
    record = world.annotations[keys.OBSERVED]
    assert decode_observation(record).due_ns == NOW + HOUR
    follow_up = world.reconcile(NOW + 2 * SECOND)
    assert isinstance(follow_up, Wait)
    assert follow_up.record is None
    world.restart_process()
    at_next = world.reconcile(NOW + HOUR + SECOND)
    assert isinstance(at_next, Patch)
    assert at_next.operation == "restart"


def test_initialize_and_convert_record_in_their_own_patch() -> None:
    init = World({keys.RESTART_EVERY: "1h", keys.CATCH_UP: "never"}, settings=PERSIST)
    decision = init.reconcile(NOW)
    assert isinstance(decision, Patch)
    assert decision.operation == "initialize"
    assert decode_observation(init.annotations[keys.OBSERVED]).due_ns == NOW + HOUR
    convert = World(
        {keys.DELETE_AFTER: "1h", keys.CATCH_UP: "never"}, facts=CONFIGMAP, settings=PERSIST
    )
    decision = convert.reconcile(NOW)
    assert isinstance(decision, Patch)
    assert decision.operation == "convert"
    assert decode_observation(convert.annotations[keys.OBSERVED]).due_ns == NOW + HOUR
    again = convert.reconcile(NOW + SECOND)
    assert isinstance(again, Wait)
    assert again.record is None


def test_without_the_setting_patches_are_unchanged() -> None:
    annotations = {keys.DELETE_AFTER: "1h", keys.CATCH_UP: "never"}
    plain = World(annotations, facts=CONFIGMAP).reconcile(NOW)
    stale = World({**annotations, keys.OBSERVED: "x"}, facts=CONFIGMAP).reconcile(NOW)
    assert isinstance(plain, Patch)
    assert isinstance(stale, Patch)
    assert keys.OBSERVED not in plain.body["metadata"]["annotations"]
    assert keys.OBSERVED not in stale.body["metadata"]["annotations"]


def test_maintenance_window_opening_is_the_recorded_instant() -> None:
    annotations = {
        **NEVER_DELETE,
        keys.MAINTENANCE_WINDOW: "Mon-Sun 04:00-05:00 UTC",
    }
    world = World(annotations, settings=PERSIST)
    decision = world.reconcile(BEFORE)
    _patch_record(world, decision)
    assert decode_observation(world.annotations[keys.OBSERVED]).due_ns == ts("2026-10-05T04:00:00Z")
    world.restart_process()
    assert isinstance(world.reconcile(ts("2026-10-05T04:00:01Z")), Delete)


def test_the_record_annotation_enqueues_nothing() -> None:
    old = dict(NEVER_DELETE)
    new = {**old, keys.OBSERVED: encode_observation(IDENTITY, ts(DUE))}
    assert not should_enqueue_on_update(old, new)
    assert not should_enqueue_on_update(new, {**old, keys.OBSERVED: "edited"})


def test_format_is_rfc3339_utc() -> None:
    assert format_rfc3339_nano(ts(DUE)) == DUE
