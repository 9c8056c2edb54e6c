"""A policy's limit, counted from the API server's audit log across failovers.

A limit of N actions per window is checked on the instants the API server received each
successful write (:func:`action_instants`): at most N within any window, a window holding a
leader's SIGKILL included (:func:`past_the_limit`): a leader records the places of its limit
in the policy's status before it uses them, so the next one never lets the limit go again
(docs/reliability.md#policy-sigkill).
"""

from __future__ import annotations

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


#: A place is taken just before its request is sent, and the audit log stamps the request when
#: the API server receives it: two requests a window apart by the controller's instants may
#: arrive a few milliseconds less than a window apart. The windows are checked this much
#: shorter (the controller's own instants are exact to the nanosecond).
SEND_SLACK = 0.5


def past_the_limit(
    instants: list[float], *, actions: int, window: float, kills: list[float]
) -> list[tuple[float, int, bool]]:
    """Every instant ending a window of ``window`` seconds less :data:`SEND_SLACK` that holds
    more than ``actions`` of ``instants`` (sorted), with how many, and whether a leader was
    killed within it (the limit went past across a failover). Empty: never exceeded."""
    span = window - SEND_SLACK
    return [
        (at, count, any(at - span < kill <= at for kill in kills))
        for at, count in over_limit(instants, actions=actions, window=span)
    ]
