"""What each lifecycle annotation means, in words: the grammar's reading of one value.

``explain`` shows these lines beside the decision, so an operator sees how the controller
reads every value (or why it cannot) without looking up the grammar in docs/annotations.md.
Pure: every parser is the one decide() uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import tzinfo

from lifecycle_controller.core.decision.observed import ObservationError, decode_observation
from lifecycle_controller.core.decision.warnings import parse_warn_before
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.schedule.catchup import (
    CatchUpError,
    CatchUpMode,
    parse_catch_up_rule,
)
from lifecycle_controller.core.schedule.windows import WindowError, parse_windows
from lifecycle_controller.core.text.cron import CronError, ZoneError, load_zone, parse_cron
from lifecycle_controller.core.text.durations import (
    NS_PER_SECOND,
    DurationError,
    parse_duration,
    parse_max_delete_ttl,
    parse_restart_every,
)
from lifecycle_controller.core.text.gotext import format_go_duration, go_parse_bool
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
)

__all__ = ["DESCRIBED_KEYS", "catch_up_meaning", "describe_annotations", "relative"]


def relative(instant_ns: int, now_ns: int) -> str:
    """``in 3h20m``, ``33d9h ago``: the two largest units, ``now`` within a second."""
    seconds = abs(instant_ns - now_ns) // NS_PER_SECOND
    if seconds == 0:
        return "now"
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count or parts:
            parts.append(f"{count}{unit}")
    text = "".join(part for part in parts[:2] if not part.startswith("0")) or parts[0]
    return f"in {text}" if instant_ns > now_ns else f"{text} ago"


def catch_up_meaning(value: str) -> str:
    """What a catch-up policy does with an action that comes due while nobody watches."""
    policy = parse_catch_up_rule(value)
    if policy.mode is CatchUpMode.ALWAYS:
        return "a missed action runs however late it is noticed"
    if policy.mode is CatchUpMode.NEVER:
        return (
            "a missed action runs only if this controller saw it before it was due; "
            "otherwise it is skipped (ActionSkipped)"
        )
    window = format_go_duration(policy.window_ns)
    return f"a missed action runs if noticed within {window} of its due time, else it is skipped"


def _timestamp(value: str, now_ns: int) -> str:
    instant = parse_rfc3339(value)
    return f"{format_rfc3339_nano(instant)} ({relative(instant, now_ns)})"


def _after(value: str, ctx: _Context) -> str:
    return f"{format_go_duration(parse_duration(value))} from the reference point"


def _dry_run(value: str, ctx: _Context) -> str:
    parsed = go_parse_bool(value)
    if parsed is None:
        return f"invalid boolean {value!r}: nothing is done until it is fixed"
    return "dry-run: decisions become Events only" if parsed else "not a dry run"


def _reference_point(value: str, ctx: _Context) -> str:
    if value == keys.REFERENCE_POINT_CREATION:
        return "-after durations count from the object's creation"
    if value == keys.REFERENCE_POINT_APPLY:
        return "-after durations count from when the controller first sees them"
    return f"unknown reference point {value!r}: falls back to {keys.REFERENCE_POINT_APPLY}"


def _window(value: str, ctx: _Context) -> str:
    windows = parse_windows(value)
    opens = windows.first_open(ctx.now_ns)
    state = "open now" if opens == ctx.now_ns else "next opening " + _timestamp_ns(opens, ctx)
    return f"due actions run only inside {value} ({state})"


def _timestamp_ns(instant: int, ctx: _Context) -> str:
    return f"{format_rfc3339_nano(instant)} ({relative(instant, ctx.now_ns)})"


def _warn_before(value: str, ctx: _Context) -> str:
    lead = parse_warn_before(value)
    if lead == 0:
        return "no warning before acting (turns a --warn-before default off)"
    return f"an UpcomingDeletion/UpcomingRestart Event {format_go_duration(lead)} before acting"


def _max_delete_ttl(value: str, ctx: _Context) -> str:
    if not ctx.namespace:
        return "read on a Namespace only (a cap for the objects in it); ignored here"
    if not value:
        raise DurationError("an empty value is not a duration")
    cap = parse_max_delete_ttl(value)
    if cap is None:
        return "no cap on the delete TTLs in this namespace"
    return f"delete TTLs longer than {format_go_duration(cap)} are refused in this namespace"


def _exempt(value: str, ctx: _Context) -> str:
    if go_parse_bool(value) is False:
        return "lifecycle policies may act on this object"
    if ctx.namespace:
        return (
            "no lifecycle policy but an enforced one acts on this Namespace or any object "
            "in it (their own annotations still do)"
        )
    return "no lifecycle policy acts on this object (its own annotations still do)"


def _observed(value: str, ctx: _Context) -> str:
    record = decode_observation(value)
    return (
        "written by the controller (--persist-observations): it saw the occurrence due "
        f"{_timestamp_ns(record.due_ns, ctx)} before it was due, so it runs under catch-up never"
    )


def _cron(value: str, ctx: _Context) -> str:
    spec = parse_cron(value)
    return f"cron {spec.expression!r} in the zone of cron-timezone (UTC if unset)"


def _zone(value: str, ctx: _Context) -> str:
    load_zone(value, local_zone=ctx.local_zone)
    return f"time zone {value or 'UTC'}"


@dataclass(frozen=True, slots=True)
class _Context:
    now_ns: int
    local_zone: tzinfo
    namespace: bool


#: How each key the controller reads is described: one entry per ``keys.KNOWN_KEYS``.
_MEANINGS: Mapping[str, Callable[[str, _Context], str]] = {
    keys.DELETE_AFTER: lambda v, c: _after(v, c) + "; the controller converts it to delete-at",
    keys.RESTART_AFTER: lambda v, c: _after(v, c) + "; the controller converts it to restart-at",
    keys.DELETE_AT: lambda v, c: _timestamp(v, c.now_ns),
    keys.RESTART_AT: lambda v, c: _timestamp(v, c.now_ns),
    keys.RESTART_EVERY: lambda v, c: f"every {format_go_duration(parse_restart_every(v))}",
    keys.RESTART_CRON: _cron,
    keys.CRON_TIMEZONE: _zone,
    keys.LAST_RESTART_TIMESTAMP: lambda v, c: (
        "anchor of the recurring schedule: " + _timestamp(v, c.now_ns)
    ),
    keys.CATCH_UP: lambda v, c: catch_up_meaning(v),
    keys.DRY_RUN: _dry_run,
    keys.REFERENCE_POINT: _reference_point,
    keys.MAINTENANCE_WINDOW: _window,
    keys.WARN_BEFORE: _warn_before,
    keys.EXEMPT: _exempt,
    keys.MAX_DELETE_TTL: _max_delete_ttl,
    keys.OBSERVED: _observed,
    keys.MANAGED_BY: lambda v, c: "written by the controller when it changes the object",
    keys.RESTARTED_AT: lambda v, c: (
        "restart marker (belongs in the Pod template, where restarts write it)"
    ),
}

#: The keys :func:`describe_annotations` gives a meaning to (every known key).
DESCRIBED_KEYS = frozenset(_MEANINGS)

_IGNORED = "not a key the controller reads; ignored"


def _one(key: str, value: str, ctx: _Context) -> str:
    describe = _MEANINGS.get(key)
    if describe is None:
        return _IGNORED
    meaning = describe(value, ctx)
    if ctx.namespace and key in keys.NAMESPACE_DEFAULT_KEYS and key != keys.MAX_DELETE_TTL:
        meaning += "; also the default of the objects in this namespace"
    return meaning


def describe_annotations(
    annotations: Mapping[str, str], *, now_ns: int, local_zone: tzinfo, namespace: bool = False
) -> list[tuple[str, str, str]]:
    """``(key, value, meaning)`` for every lifecycle annotation, in key order.

    ``namespace``: the annotations are a Namespace's, whose defaults and cap its objects take
    (docs/annotations.md#namespace-defaults).
    """
    ctx = _Context(now_ns, local_zone, namespace)
    lines = []
    for key in sorted(annotations):
        if not key.startswith(keys.PREFIX):
            continue
        value = annotations[key]
        try:
            meaning = _one(key, value, ctx)
        except (
            DurationError,
            TimestampError,
            CronError,
            ZoneError,
            CatchUpError,
            WindowError,
            ObservationError,
        ) as error:
            meaning = f"invalid: {error}"
        lines.append((key, value, meaning))
    return lines
