"""When a due restart may run: the per-object restart guard and the restart jitter.

Pure rules with injected time (nanoseconds), docs/behaviour.md#restart-guard and
docs/behaviour.md#restart-jitter:

* :func:`last_restart_ns`: the latest restart this controller is known to have made on an
  object, from its own state (the ``last-restart-timestamp`` annotation and the Pod
  template's ``restartedAt`` marker), so the guard holds across failovers;
* :func:`restart_jitter_ns`: a delay in ``[0, max_ns)`` drawn from a hash of the object's
  UID and the occurrence, so every replica draws the same one;
* :func:`restart_not_before_ns`: the earliest instant the restart may be written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339

__all__ = ["last_restart_ns", "restart_jitter_ns", "restart_not_before_ns"]


def last_restart_ns(values: Iterable[str | None]) -> int | None:
    """The latest of the RFC 3339 timestamps in ``values`` (unparseable ones are ignored)."""
    latest: int | None = None
    for value in values:
        if not value:
            continue
        try:
            instant = parse_rfc3339(value)
        except TimestampError:
            continue
        if latest is None or instant > latest:
            latest = instant
    return latest


def restart_jitter_ns(uid: str, occurrence_ns: int, max_ns: int) -> int:
    """A deterministic delay in ``[0, max_ns)`` for ``uid``'s restart due at ``occurrence_ns``."""
    if max_ns <= 0:
        return 0
    digest = hashlib.sha256(f"{uid}@{occurrence_ns}".encode()).digest()
    return int.from_bytes(digest[:8], "big") * max_ns >> 64


def restart_not_before_ns(
    *,
    due_ns: int | None,
    uid: str,
    last_restart: int | None,
    min_interval_ns: int,
    jitter_max_ns: int,
) -> tuple[int | None, int | None]:
    """``(jittered, guarded)``: the instants before which the restart must wait.

    ``jittered`` is ``due + jitter`` (None without a due time or jitter); ``guarded`` is
    ``last_restart + min_interval`` (None when the guard is off or no restart is known).
    """
    jittered = None
    if due_ns is not None and jitter_max_ns > 0:
        jittered = due_ns + restart_jitter_ns(uid, due_ns, jitter_max_ns)
    guarded = None
    if min_interval_ns > 0 and last_restart is not None:
        guarded = last_restart + min_interval_ns
    return jittered, guarded
