"""A policy's limit, counted from the API server's audit log across failovers.

A limit of N actions per window is checked on the instants the API server received each
successful write (:func:`action_instants`): at most N within any window. Across a SIGKILL
failover the next leader seeds its window from the policy's ``status.lastActions``, which
lacks what the killed leader did after its last status write (docs/reliability.md#policy-sigkill);
:func:`unwritten_at` counts those from the audit log and :func:`allowance` is the bound a
window holding that kill may reach, so a scenario asserts the bound exactly, not a guess.
"""

from __future__ import annotations

from collections.abc import Callable

from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from tests.faults.support import CONTROLLER_USER, requests_of


def action_instants(
    control_plane: ControlPlane,
    *,
    user: str = CONTROLLER_USER,
    verb: str,
    resource: str,
    namespace: str | None = None,
    subresource: str | None = None,
    name: str | None = None,
) -> list[float]:
    """When the API server received each successful (2xx) write of ``user`` (``verb`` on
    ``resource``, of object ``name`` if given), in seconds since the epoch, sorted: a limit
    is checked on these."""
    out: list[float] = []
    for event in requests_of(control_plane, user):
        ref = event.get("objectRef") or {}
        code = int((event.get("responseStatus") or {}).get("code", 0))
        if (
            event.get("verb") == verb
            and ref.get("resource") == resource
            and ref.get("namespace") == namespace
            and ref.get("subresource") == subresource
            and name in (None, ref.get("name"))
            and 200 <= code < 300
        ):
            out.append(parse_rfc3339(str(event["requestReceivedTimestamp"])) / 1e9)
    return sorted(out)


def in_window(instants: list[float], window: float) -> list[tuple[float, int]]:
    """For each of ``instants`` (sorted): how many fell within the ``window`` seconds ending
    there (itself included)."""
    out: list[tuple[float, int]] = []
    start = 0
    for end, instant in enumerate(instants):
        while instant - instants[start] >= window:
            start += 1
        out.append((instant, end - start + 1))
    return out


def max_in_window(instants: list[float], window: float) -> int:
    """The most of ``instants`` (sorted) within any ``window`` seconds."""
    return max((count for _, count in in_window(instants, window)), default=0)


def over_limit(instants: list[float], *, actions: int, window: float) -> list[tuple[float, int]]:
    """Every instant at which more than ``actions`` of ``instants`` (sorted) fell within the
    ``window`` seconds ending there, with how many: a limit exceeded (empty: never)."""
    return [(at, count) for at, count in in_window(instants, window) if count > actions]


#: An action's DELETE arrives, its audit entry is recorded when the answer is back, and the
#: status writer takes the entries recorded when it starts its read-then-patch: an action
#: this long before the patch may still be missing from it.
WRITE_LAG = 2.0


def unwritten_at(
    actions: list[float], status_writes: list[float], kill: float, *, since: float
) -> int:
    """The actions done after the policy's last status write before ``kill`` (less
    :data:`WRITE_LAG`) and after the kill before (``since``: those are that kill's), up to
    the kill: what the killed leader had not written into the audit, so what the next
    leader cannot know."""
    last = max((at for at in status_writes if at < kill), default=0.0) - WRITE_LAG
    return sum(1 for at in actions if max(last, since) < at <= kill)


def allowance(
    limit: int, window: float, kills: list[float], unwritten: list[int]
) -> Callable[[float], int]:
    """The most actions a window ending at an instant may hold: the limit, plus what each
    leader killed within that window had not written (its successor's window lacks them)."""

    def allowed(at: float) -> int:
        pairs = zip(kills, unwritten, strict=True)
        return limit + sum(n for kill, n in pairs if at - window <= kill <= at)

    return allowed
