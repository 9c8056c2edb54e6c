"""What each lifecycle annotation means, in words: the grammar's reading of one value.

``explain`` shows these lines beside the decision, so an operator sees how the controller
reads every value (or why it cannot) without looking up the grammar in docs/annotations.md.
Pure: every parser is the one decide() uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import tzinfo

from lifecycle_controller.core import keys
from lifecycle_controller.core.catchup import CatchUpError, CatchUpMode, parse_catch_up_policy
from lifecycle_controller.core.cron import CronError, ZoneError, load_zone, parse_cron
from lifecycle_controller.core.durations import (
    NS_PER_SECOND,
    DurationError,
    parse_duration,
    parse_restart_every,
)
from lifecycle_controller.core.gotext import format_go_duration, go_parse_bool
from lifecycle_controller.core.timestamps import TimestampError, format_rfc3339_nano, parse_rfc3339

__all__ = ["catch_up_meaning", "describe_annotations", "relative"]


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
    policy = parse_catch_up_policy(value)
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


def _one(key: str, value: str, *, now_ns: int, local_zone: tzinfo) -> str:
    if key in (keys.DELETE_AFTER, keys.RESTART_AFTER):
        duration = format_go_duration(parse_duration(value))
        target = "delete-at" if key == keys.DELETE_AFTER else "restart-at"
        return f"{duration} from the reference point; the controller converts it to {target}"
    if key in (keys.DELETE_AT, keys.RESTART_AT):
        return _timestamp(value, now_ns)
    if key == keys.RESTART_EVERY:
        return f"every {format_go_duration(parse_restart_every(value))}"
    if key == keys.RESTART_CRON:
        spec = parse_cron(value)
        return f"cron {spec.expression!r} in the zone of cron-timezone (UTC if unset)"
    if key == keys.CRON_TIMEZONE:
        load_zone(value, local_zone=local_zone)
        return f"time zone {value or 'UTC'}"
    if key == keys.LAST_RESTART_TIMESTAMP:
        return "anchor of the recurring schedule: " + _timestamp(value, now_ns)
    if key == keys.CATCH_UP:
        return catch_up_meaning(value)
    if key == keys.DRY_RUN:
        parsed = go_parse_bool(value)
        if parsed is None:
            return f"invalid boolean {value!r}: nothing is done until it is fixed"
        return "dry-run: decisions become Events only" if parsed else "not a dry run"
    if key == keys.REFERENCE_POINT:
        if value == keys.REFERENCE_POINT_CREATION:
            return "-after durations count from the object's creation"
        if value == keys.REFERENCE_POINT_APPLY:
            return "-after durations count from when the controller first sees them"
        return f"unknown reference point {value!r}: falls back to {keys.REFERENCE_POINT_APPLY}"
    if key == keys.MANAGED_BY:
        return "written by the controller when it changes the object"
    if key == keys.RESTARTED_AT:
        return "restart marker (belongs in the Pod template, where restarts write it)"
    return "not a key the controller reads; ignored"


def describe_annotations(
    annotations: Mapping[str, str], *, now_ns: int, local_zone: tzinfo
) -> list[tuple[str, str, str]]:
    """``(key, value, meaning)`` for every lifecycle annotation, in key order."""
    lines = []
    for key in sorted(annotations):
        if not key.startswith(keys.PREFIX):
            continue
        value = annotations[key]
        try:
            meaning = _one(key, value, now_ns=now_ns, local_zone=local_zone)
        except (DurationError, TimestampError, CronError, ZoneError, CatchUpError) as error:
            meaning = f"invalid: {error}"
        lines.append((key, value, meaning))
    return lines
