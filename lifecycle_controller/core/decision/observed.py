"""The persisted ``never`` observation: the ``observed`` annotation's encoding and identity.

With ``--persist-observations`` (docs/behaviour.md#persisted-observations) the controller
writes, next to the in-memory ledger arm, one annotation on the object that says "an
occurrence of this schedule, due at this instant, was observed before it was due", so a new
leader after a failover can execute it instead of skipping it under ``catch-up: never``.

The value is ``<due>;v1-<fingerprint>``: the occurrence's due instant (after the maintenance
windows, the instant the occurrence check uses) in RFC 3339 UTC with up to nine fractional
digits, and the first 16 hex digits of a SHA-256 over the ledger
:class:`~lifecycle_controller.core.schedule.catchup.Identity` (object UID, action, catch-up policy
and
the selected action's configuration, which for recurring restarts includes the
``last-restart-timestamp`` anchor). A record counts only if both parts match what the
current annotations produce; anything else (another occurrence, a changed schedule, a copied
object with another UID, a garbled value) is ignored and never acted on.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from lifecycle_controller.core.schedule.catchup import Identity
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
)

__all__ = [
    "FINGERPRINT_VERSION",
    "PERSIST_RESULTS",
    "ObservationError",
    "ObservedRecord",
    "check_record",
    "decode_observation",
    "encode_observation",
    "identity_fingerprint",
    "record_matches",
]

FINGERPRINT_VERSION = "v1"
#: ``result`` of ``lifecycle_observations_persisted_total``, declared up front.
PERSIST_RESULTS = ("written", "conflict", "forbidden", "invalid", "gone", "error")
_FINGERPRINT = re.compile(r"v1-[0-9a-f]{16}")


class ObservationError(ValueError):
    """A value of the ``observed`` annotation that is not a record this controller wrote."""


@dataclass(frozen=True, slots=True)
class ObservedRecord:
    """A decoded record: the occurrence's due instant and the schedule's fingerprint."""

    due_ns: int
    fingerprint: str


def identity_fingerprint(identity: Identity) -> str:
    """``v1-`` and 16 hex digits of SHA-256 over a canonical JSON form of ``identity``."""
    canonical = json.dumps(
        [
            identity.uid,
            identity.action,
            identity.catch_up.mode.value,
            identity.catch_up.window_ns,
            *identity.config,
        ],
        separators=(",", ":"),
        ensure_ascii=True,
    )
    digest = hashlib.sha256(canonical.encode("ascii")).hexdigest()
    return f"{FINGERPRINT_VERSION}-{digest[:16]}"


def encode_observation(identity: Identity, due_ns: int) -> str:
    """The annotation value recording that ``identity``'s occurrence at ``due_ns`` was seen."""
    return f"{format_rfc3339_nano(due_ns)};{identity_fingerprint(identity)}"


def decode_observation(value: str) -> ObservedRecord:
    """Parse an ``observed`` value strictly; raises :class:`ObservationError`."""
    parts = value.split(";")
    if len(parts) != 2:
        raise ObservationError(f"expected <RFC 3339 time>;v1-<16 hex digits>, got {value!r}")
    due_text, fingerprint = parts
    try:
        due_ns = parse_rfc3339(due_text)
    except TimestampError as error:
        raise ObservationError(f"invalid due time in {value!r}: {error}") from None
    if not _FINGERPRINT.fullmatch(fingerprint):
        raise ObservationError(f"invalid fingerprint {fingerprint!r} in {value!r}")
    return ObservedRecord(due_ns, fingerprint)


def record_matches(value: str | None, identity: Identity, due_ns: int) -> bool:
    """Whether ``value`` records exactly this occurrence of this schedule (garbled: False)."""
    if not value:
        return False
    try:
        record = decode_observation(value)
    except ObservationError:
        return False
    return record.due_ns == due_ns and record.fingerprint == identity_fingerprint(identity)


def check_record(
    value: str | None, identity: Identity, due_ns: int, now_ns: int
) -> tuple[bool, str | None]:
    """The persisted half of the ``never`` check: (counts as observed, value to write now).

    A future occurrence is observed now; its record is written unless it is already there.
    A due one counts as observed only if the object carries its exact record.
    """
    matches = record_matches(value, identity, due_ns)
    if due_ns > now_ns:
        return True, None if matches else encode_observation(identity, due_ns)
    return matches, None
