"""Namespace defaults: parsing, precedence (object > namespace > flag), the cap, blocking."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.core import (
    Action,
    DecisionSettings,
    Delete,
    DryRun,
    Idle,
    Invalid,
    Ledger,
    ObjectFacts,
    Patch,
    Wait,
    parse_catch_up_rule,
)
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceSource,
    decide_in_namespace,
    ignoring,
    namespace_defaults_changed,
    parse_namespace_defaults,
    resolve_inputs,
)
from lifecycle_controller.core.decision.outcomes import Decision
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.schedule.windows import parse_windows
from lifecycle_controller.core.tooling.plan import explain

from .support import CONFIGMAP, DEPLOYMENT, HOUR, MINUTE, NAMESPACE, NOW, ts

NS = "team-a"
PAST = "2026-10-05T02:00:00Z"  # due an hour before NOW
FUTURE = "2026-10-05T05:00:00Z"  # due in two hours
WINDOW = "Mon-Sun 22:00-23:00 UTC"  # closed at NOW (03:00 UTC)


def decide_ns(
    annotations: Mapping[str, str],
    namespace: Mapping[str, str] | None,
    *,
    now: int = NOW,
    facts: ObjectFacts = CONFIGMAP,
    settings: DecisionSettings | None = None,
) -> Decision:
    defaults = None if namespace is None else parse_namespace_defaults(NS, namespace)
    return decide_in_namespace(
        annotations=annotations,
        facts=facts,
        now_ns=now,
        settings=settings or DecisionSettings(),
        ledger=Ledger(),
        defaults=defaults,
    )


# --- parsing ----------------------------------------------------------------------------


def test_parses_every_default_and_ignores_other_annotations() -> None:
    defaults = parse_namespace_defaults(
        NS,
        {
            keys.CATCH_UP: "15m",
            keys.DRY_RUN: "true",
            keys.WARN_BEFORE: "10m",
            keys.MAINTENANCE_WINDOW: WINDOW,
            keys.MAX_DELETE_TTL: "7d",
            keys.DELETE_AFTER: "1h",  # acts on the Namespace itself; not a default
        },
    )
    assert defaults.problems == ()
    assert defaults.catch_up == parse_catch_up_rule("15m")
    assert defaults.dry_run is True
    assert defaults.warn_before_ns == 10 * MINUTE
    assert defaults.windows == parse_windows(WINDOW)
    assert defaults.max_delete_ttl_ns == 7 * 24 * HOUR
    assert keys.DELETE_AFTER not in defaults.values


@pytest.mark.parametrize(
    ("key", "value", "blocks"),
    [
        (keys.CATCH_UP, "sometimes", {Action.DELETE, Action.RESTART}),
        (keys.DRY_RUN, "yes", {Action.DELETE, Action.RESTART}),
        (keys.DRY_RUN, "", {Action.DELETE, Action.RESTART}),
        (keys.MAINTENANCE_WINDOW, "Mon-Fri 25:00-26:00 UTC", {Action.DELETE, Action.RESTART}),
        (keys.MAINTENANCE_WINDOW, "", {Action.DELETE, Action.RESTART}),
        (keys.MAX_DELETE_TTL, "-1h", {Action.DELETE}),
        (keys.MAX_DELETE_TTL, "", {Action.DELETE}),
        (keys.MAX_DELETE_TTL, "1h30m", {Action.DELETE}),
        (keys.WARN_BEFORE, "soon", set()),
    ],
)
def test_invalid_values_become_problems_with_what_they_block(
    key: str, value: str, blocks: set[Action]
) -> None:
    defaults = parse_namespace_defaults(NS, {key: value})
    (problem,) = defaults.problems
    assert (problem.key, problem.value, set(problem.blocks)) == (key, value, blocks)
    event = problem.event("uid-ns")
    assert (event.type.value, event.reason) == ("Warning", "InvalidAnnotation")
    assert event.message.startswith(f'Invalid namespace default {key}="{value}": ')
    assert event.dedupe_key is not None  # once per Namespace and value


def test_zero_values_switch_off_the_warning_and_the_namespace_cap() -> None:
    defaults = parse_namespace_defaults(NS, {keys.WARN_BEFORE: "0s", keys.MAX_DELETE_TTL: "0"})
    assert defaults.problems == ()
    assert defaults.warn_before_ns == 0
    assert defaults.max_delete_ttl_ns is None


def test_only_default_keys_count_as_a_change() -> None:
    assert namespace_defaults_changed({}, {keys.DRY_RUN: "true"})
    assert namespace_defaults_changed({keys.DRY_RUN: "true"}, {keys.DRY_RUN: "false"})
    assert namespace_defaults_changed({keys.MAX_DELETE_TTL: "1d"}, {})
    assert not namespace_defaults_changed({keys.DELETE_AT: PAST}, {keys.DELETE_AT: FUTURE})
    assert not namespace_defaults_changed({}, {keys.MANAGED_BY: "x"})


@pytest.mark.parametrize(
    ("value", "exempt"),
    [("true", True), ("yes", True), ("", True), ("false", False), ("0", False)],
)
def test_exempt_on_a_namespace_is_read_as_on_an_object(value: str, exempt: bool) -> None:
    """Any value but a false one: a misspelt value errs on the side of leaving alone."""
    defaults = parse_namespace_defaults(NS, {keys.EXEMPT: value})
    assert defaults.exempt is exempt
    assert defaults.problems == ()
    assert defaults.values == {keys.EXEMPT: value}
    assert parse_namespace_defaults(NS, {}).exempt is False


def test_gaining_or_losing_exempt_is_a_change() -> None:
    """The objects of a Namespace that gains or loses ``exempt`` are decided again."""
    assert namespace_defaults_changed({}, {keys.EXEMPT: "true"})
    assert namespace_defaults_changed({keys.EXEMPT: "true"}, {})
    assert namespace_defaults_changed({keys.EXEMPT: "true"}, {keys.EXEMPT: "false"})
    assert not namespace_defaults_changed({keys.EXEMPT: "true"}, {keys.EXEMPT: "true"})


def test_ignoring_drops_values_settings_and_problems_of_the_keys() -> None:
    defaults = parse_namespace_defaults(
        NS,
        {
            keys.CATCH_UP: "sometimes",
            keys.DRY_RUN: "true",
            keys.MAINTENANCE_WINDOW: WINDOW,
            keys.MAX_DELETE_TTL: "1h",
            keys.EXEMPT: "true",
        },
    )
    left = ignoring(defaults, (keys.CATCH_UP, keys.MAINTENANCE_WINDOW, keys.MAX_DELETE_TTL))
    assert (left.catch_up, left.windows, left.max_delete_ttl_ns) == (None, None, None)
    assert left.problems == ()
    assert left.values == {keys.DRY_RUN: "true", keys.EXEMPT: "true"}
    assert (left.dry_run, left.exempt, left.namespace) == (True, True, NS)
    assert defaults.problems
    assert defaults.windows is not None


# --- precedence -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("own", "namespace", "flag", "dry", "source"),
    [
        ({}, {}, False, False, NamespaceSource.FLAG),
        ({}, {keys.DRY_RUN: "true"}, False, True, NamespaceSource.NAMESPACE),
        ({keys.DRY_RUN: "false"}, {keys.DRY_RUN: "true"}, False, False, NamespaceSource.OBJECT),
        ({keys.DRY_RUN: "true"}, {keys.DRY_RUN: "false"}, False, True, NamespaceSource.OBJECT),
        ({}, {keys.DRY_RUN: "false"}, True, True, NamespaceSource.FLAG),  # --dry-run forces
        ({keys.DRY_RUN: "false"}, {}, True, True, NamespaceSource.FLAG),
    ],
)
def test_dry_run_precedence(
    own: dict[str, str], namespace: dict[str, str], flag: bool, dry: bool, source: str
) -> None:
    annotations = {keys.DELETE_AT: PAST, **own}
    decision = decide_ns(annotations, namespace, settings=DecisionSettings(dry_run=flag))
    assert isinstance(decision, DryRun if dry else Delete)
    resolved = resolve_inputs(
        annotations, parse_namespace_defaults(NS, namespace), DecisionSettings(dry_run=flag)
    )
    assert resolved.sources[keys.DRY_RUN] == source


def test_namespace_catch_up_beats_the_flag_and_the_object_beats_the_namespace() -> None:
    late = {keys.DELETE_AT: "2026-10-05T01:00:00Z"}  # two hours late
    flag = DecisionSettings(delete_catch_up=parse_catch_up_rule("always"))
    assert isinstance(decide_ns(late, {}, settings=flag), Delete)
    skipped = decide_ns(late, {keys.CATCH_UP: "15m"}, settings=flag)
    assert isinstance(skipped, Patch)
    assert skipped.operation.value == "skip"
    own = decide_ns({**late, keys.CATCH_UP: "always"}, {keys.CATCH_UP: "15m"}, settings=flag)
    assert isinstance(own, Delete)


def test_namespace_window_defers_and_the_object_window_wins() -> None:
    deferred = decide_ns({keys.DELETE_AT: PAST}, {keys.MAINTENANCE_WINDOW: WINDOW})
    assert isinstance(deferred, Wait)
    assert deferred.due_ns == ts("2026-10-05T22:00:00Z")
    own = decide_ns(
        {keys.DELETE_AT: PAST, keys.MAINTENANCE_WINDOW: "Mon-Sun 00:00-24:00 UTC"},
        {keys.MAINTENANCE_WINDOW: WINDOW},
    )
    assert isinstance(own, Delete)


def test_namespace_warn_before_announces() -> None:
    decision = decide_ns({keys.DELETE_AT: FUTURE}, {keys.WARN_BEFORE: "3h"})
    assert isinstance(decision, Wait)
    assert [event.reason for event in decision.events] == ["UpcomingDeletion"]
    quiet = decide_ns({keys.DELETE_AT: FUTURE, keys.WARN_BEFORE: "0s"}, {keys.WARN_BEFORE: "3h"})
    assert isinstance(quiet, Wait)
    assert quiet.events == ()


@pytest.mark.parametrize(
    ("flag", "namespace", "limit", "source"),
    [
        (None, None, None, NamespaceSource.FLAG),
        (None, "1h", HOUR, NamespaceSource.NAMESPACE),
        (2 * HOUR, None, 2 * HOUR, NamespaceSource.FLAG),
        (2 * HOUR, "1h", HOUR, NamespaceSource.NAMESPACE),
        (HOUR, "2h", HOUR, NamespaceSource.FLAG),
    ],
)
def test_the_cap_is_the_tighter_one(
    flag: int | None, namespace: str | None, limit: int | None, source: str
) -> None:
    ns = {} if namespace is None else {keys.MAX_DELETE_TTL: namespace}
    resolved = resolve_inputs(
        {}, parse_namespace_defaults(NS, ns), DecisionSettings(max_delete_ttl_ns=flag)
    )
    assert resolved.settings.max_delete_ttl_ns == limit
    assert resolved.sources[keys.MAX_DELETE_TTL] == source


def test_namespace_cap_refuses_a_longer_delete_after() -> None:
    decision = decide_ns({keys.DELETE_AFTER: "2h"}, {keys.MAX_DELETE_TTL: "1h"})
    assert isinstance(decision, Invalid)
    assert [event.reason for event in decision.events] == ["DeleteTTLExceeded"]
    assert isinstance(decide_ns({keys.DELETE_AFTER: "30m"}, {keys.MAX_DELETE_TTL: "1h"}), Patch)


def test_a_cap_on_the_object_itself_is_not_a_cap() -> None:
    decision = decide_ns({keys.DELETE_AFTER: "2h", keys.MAX_DELETE_TTL: "1h"}, {})
    assert isinstance(decision, Patch)


# --- blocking ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "namespace",
    [
        {keys.MAINTENANCE_WINDOW: "whenever"},
        {keys.DRY_RUN: "maybe"},
        {keys.CATCH_UP: "sometimes"},
    ],
)
def test_an_invalid_safety_default_blocks_deletes_and_restarts(namespace: dict[str, str]) -> None:
    delete = decide_ns({keys.DELETE_AT: PAST}, namespace)
    assert isinstance(delete, Invalid)
    assert delete.events == ()
    assert delete.action is Action.DELETE
    assert "invalid" in delete.log
    restart = decide_ns({keys.RESTART_AT: PAST}, namespace, facts=DEPLOYMENT)
    assert isinstance(restart, Invalid)
    assert restart.events == ()
    waiting = decide_ns({keys.DELETE_AT: FUTURE}, namespace)
    assert isinstance(waiting, Invalid)  # no timer either: the Namespace change re-enqueues


def test_the_objects_own_value_lifts_the_block() -> None:
    namespace = {keys.MAINTENANCE_WINDOW: "whenever", keys.DRY_RUN: "maybe"}
    own = {keys.DELETE_AT: PAST, keys.MAINTENANCE_WINDOW: WINDOW, keys.DRY_RUN: "false"}
    assert isinstance(decide_ns(own, namespace), Wait)  # deferred to its own window


def test_an_invalid_cap_blocks_deletes_only() -> None:
    namespace = {keys.MAX_DELETE_TTL: "forever"}
    assert isinstance(decide_ns({keys.DELETE_AT: PAST}, namespace), Invalid)
    restart = decide_ns({keys.RESTART_AT: PAST}, namespace, facts=DEPLOYMENT)
    assert isinstance(restart, Patch)
    assert restart.operation.value == "restart"


def test_an_invalid_warn_before_blocks_only_the_warning() -> None:
    decision = decide_ns(
        {keys.DELETE_AT: FUTURE},
        {keys.WARN_BEFORE: "soon"},
        settings=DecisionSettings(warn_before_ns=3 * HOUR),
    )
    assert isinstance(decision, Wait)
    assert decision.events == ()
    assert isinstance(decide_ns({keys.DELETE_AT: PAST}, {keys.WARN_BEFORE: "soon"}), Delete)


def test_the_objects_own_problems_come_first() -> None:
    decision = decide_ns({keys.DELETE_AT: "tomorrow"}, {keys.MAINTENANCE_WINDOW: "whenever"})
    assert isinstance(decision, Invalid)
    assert [event.reason for event in decision.events] == ["InvalidAnnotation"]


def test_objects_without_actions_stay_idle() -> None:
    assert isinstance(decide_ns({keys.DRY_RUN: "true"}, {keys.DRY_RUN: "maybe"}), Idle)


def test_a_namespace_is_its_own_object() -> None:
    # Cluster-scoped: no namespace defaults (the caller passes none), its own dry-run counts.
    decision = decide_ns({keys.DELETE_AT: PAST, keys.DRY_RUN: "true"}, None, facts=NAMESPACE)
    assert isinstance(decision, DryRun)


# --- properties -------------------------------------------------------------------------

_DEFAULT_KEYS = st.sampled_from(keys.NAMESPACE_DEFAULT_KEYS)
_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["true", "false", "1", "15m", "0s", "never", "always", "7d", WINDOW, "-1h"]),
)
_NAMESPACES = st.dictionaries(_DEFAULT_KEYS, _VALUES, max_size=5)
_TIMES = st.integers(min_value=NOW - 48 * HOUR, max_value=NOW + 48 * HOUR)
_DUE = st.integers(min_value=NOW - 48 * HOUR, max_value=NOW + 48 * HOUR).map(
    lambda ns: f"2026-10-{(ns - ts('2026-10-01T00:00:00Z')) // (24 * HOUR) + 1:02d}T03:00:00Z"
)


@settings(deadline=None)
@given(namespace=_NAMESPACES, now=_TIMES, due=_DUE)
def test_property_never_raises_and_bad_safety_values_never_act(
    namespace: dict[str, str], now: int, due: str
) -> None:
    defaults = parse_namespace_defaults(NS, namespace)
    decision = decide_ns({keys.DELETE_AT: due}, namespace, now=now)
    blocking = {p.key for p in defaults.problems if Action.DELETE in p.blocks}
    if blocking:
        assert isinstance(decision, Invalid)
    if defaults.dry_run and not blocking:
        assert not isinstance(decision, Delete | Patch)


@settings(deadline=None)
@given(namespace=_NAMESPACES, now=_TIMES, due=_DUE, dry=st.booleans())
def test_property_the_objects_own_values_win(
    namespace: dict[str, str], now: int, due: str, dry: bool
) -> None:
    own = {
        keys.DELETE_AT: due,
        keys.DRY_RUN: "true" if dry else "false",
        keys.CATCH_UP: "always",
        keys.MAINTENANCE_WINDOW: "Mon-Sun 00:00-24:00 UTC",
        keys.WARN_BEFORE: "0s",
    }
    with_ns = decide_ns(
        own, {k: v for k, v in namespace.items() if k != keys.MAX_DELETE_TTL}, now=now
    )
    without = decide_ns(own, None, now=now)
    assert with_ns == without


@settings(deadline=None)
@given(
    flag=st.one_of(st.none(), st.integers(min_value=1, max_value=1000)),
    namespace=st.one_of(st.none(), st.integers(min_value=1, max_value=1000)),
)
def test_property_the_cap_is_the_minimum(flag: int | None, namespace: int | None) -> None:
    ns = {} if namespace is None else {keys.MAX_DELETE_TTL: f"{namespace}m"}
    resolved = resolve_inputs(
        {},
        parse_namespace_defaults(NS, ns),
        DecisionSettings(max_delete_ttl_ns=None if flag is None else flag * MINUTE),
    )
    present = [v * MINUTE for v in (flag, namespace) if v is not None]
    assert resolved.settings.max_delete_ttl_ns == (min(present) if present else None)


# --- explain (plan, status, explain) ----------------------------------------------------


def test_explain_names_inherited_values_and_namespace_blocks() -> None:
    defaults = parse_namespace_defaults(NS, {keys.DRY_RUN: "true", keys.WARN_BEFORE: "1h"})
    shown = explain(
        annotations={keys.DELETE_AT: FUTURE, keys.WARN_BEFORE: "0s"},
        facts=CONFIGMAP,
        now_ns=NOW,
        settings=DecisionSettings(),
        namespace_defaults=defaults,
    )
    assert shown.inherited == (f"dry-run: true (from namespace {NS})",)
    blocked = explain(
        annotations={keys.DELETE_AT: PAST},
        facts=CONFIGMAP,
        now_ns=NOW,
        settings=DecisionSettings(),
        namespace_defaults=parse_namespace_defaults(NS, {keys.CATCH_UP: "sometimes"}),
    )
    assert blocked.action is None
    assert blocked.summary == (
        f"blocked: namespace {NS} has an invalid catch-up default; "
        "taking no action until it is fixed"
    )
    assert blocked.problems == (f"InvalidAnnotation: {blocked.summary.removeprefix('blocked: ')}",)
