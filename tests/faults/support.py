"""Counting actions from the API server's audit log and from Events; the figures' record.

Every write request of the controller's own user is counted, whatever its answer: a second
DELETE is answered 404 (or 409, its preconditions failing) and a second restart patch 409,
and they are doubled writes all the same. An action is *executed* when the audit log holds a
successful (2xx) write of it; *duplicated* when its object got any write after that first
successful one (the retry of a write whose answer was lost on the way, which the client could
not know was done, is excused by the test that lost it: :meth:`Tally.of`'s ``excused``);
*missed* when a due action has none and the object is still there at the end. A write
refused before the successful one (409 on a stale resourceVersion, 429, 5xx) is a retry, not
a second action. A delete whose request was in flight when the API server was SIGKILLed can
be committed without a 2xx audit line: such an object is gone without a logged delete and
counts as executed (``unaudited``), never as missed.

Events are counted per occurrence: an Event the recorder folded into a ``series`` counts
``series.count`` times, so a doubled Event shows as two occurrences for one object
(``doubled_events``) whether it was written twice or folded.

Doubles are looked for once the controller is quiet (:mod:`tests.faults.quiet`); a policy's
limit is counted per window from the audit log (:mod:`tests.faults.limits`).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import EVENTS, KubeClient
from tests.faults.proxy import Recorded
from tests.integration.keys import CONTROLLER

#: The controller's own identity in the fault tests (cluster-admin through system:masters),
#: so its requests are told apart from the test's in the audit log.
CONTROLLER_USER = "lifecycle-controller-faults"


def controller_kubeconfig(control_plane: ControlPlane, user: str = CONTROLLER_USER) -> str:
    return str(control_plane.user_kubeconfig(user, groups=("system:masters",)))


#: Object name -> the answer codes of every write request for it, in the order the API server
#: received them (0: the audit line has no answer code).
Writes = dict[str, list[int]]


def writes(
    control_plane: ControlPlane,
    *,
    user: str = CONTROLLER_USER,
    verb: str,
    resource: str,
    namespace: str,
    subresource: str | None = None,
) -> Writes:
    """Every request of ``user`` per object name (``verb`` on ``resource``), any answer."""
    received: dict[str, list[tuple[str, int]]] = {}
    for event in control_plane.audit_events():
        ref = event.get("objectRef") or {}
        if (
            event.get("stage") == "ResponseComplete"
            and (event.get("user") or {}).get("username") == user
            and event.get("verb") == verb
            and ref.get("resource") == resource
            and ref.get("namespace") == namespace
            and ref.get("subresource") == subresource
            and ref.get("name")
        ):
            code = int((event.get("responseStatus") or {}).get("code", 0))
            at = str(event.get("requestReceivedTimestamp", ""))
            received.setdefault(str(ref["name"]), []).append((at, code))
    return {name: [code for _, code in sorted(answers)] for name, answers in received.items()}


def merged(*parts: Writes) -> Writes:
    """One :data:`Writes` of several (of different resources: their names do not collide)."""
    out: Writes = {}
    for part in parts:
        for name, codes in part.items():
            out.setdefault(name, []).extend(codes)
    return out


def succeeded(found: Writes) -> Counter[str]:
    """The successful (2xx) writes per object name."""
    return Counter({name: sum(1 for c in codes if 200 <= c < 300) for name, codes in found.items()})


def audited(
    control_plane: ControlPlane,
    *,
    user: str = CONTROLLER_USER,
    verb: str,
    resource: str,
    namespace: str,
    subresource: str | None = None,
) -> Counter[str]:
    """Successful (2xx) requests of ``user`` per object name (``verb`` on ``resource``): how
    far a run got. The figures count every write (:func:`writes`)."""
    found = writes(
        control_plane,
        user=user,
        verb=verb,
        resource=resource,
        namespace=namespace,
        subresource=subresource,
    )
    return +succeeded(found)


def doubled_writes(codes: list[int]) -> int:
    """The writes an object got after its first successful one (whatever their answers)."""
    first = next((i for i, code in enumerate(codes) if 200 <= code < 300), None)
    return 0 if first is None else len(codes) - first - 1


def object_name(path: str) -> str:
    """The object a request's path and query names (its last path segment)."""
    return path.partition("?")[0].rstrip("/").rpartition("/")[2]


def lost_successes(records: Iterable[Recorded]) -> Counter[str]:
    """Per object, the writes (DELETE, PATCH) the API server carried out whose answer the
    proxy then lost: the client sends each again, unable to know it was done, and that one
    retry is excused. A lost answer to a refused write excuses nothing: it was no action."""
    return Counter(
        object_name(record.path)
        for record in records
        if record.fault == "lost"
        and record.method in ("DELETE", "PATCH")
        and 200 <= record.status < 300
    )


def requests_of(control_plane: ControlPlane, user: str = CONTROLLER_USER) -> list[dict[str, Any]]:
    """Every audited request of ``user`` (any verb, any outcome)."""
    return [
        event
        for event in control_plane.audit_events()
        if event.get("stage") == "ResponseComplete"
        and (event.get("user") or {}).get("username") == user
    ]


async def event_reasons(kube: KubeClient, namespace: str) -> dict[str, Counter[str]]:
    """reason -> (object name -> how many occurrences) of the controller's Events: every
    Event counts ``series.count`` occurrences (1 without a series)."""
    listing = await kube.request("GET", EVENTS.collection_path(namespace))
    by_reason: dict[str, Counter[str]] = {}
    for item in listing["items"]:
        if item.get("reportingController") != CONTROLLER:
            continue
        name = str((item.get("regarding") or {}).get("name", ""))
        count = int((item.get("series") or {}).get("count", 1))
        by_reason.setdefault(str(item.get("reason")), Counter())[name] += count
    return by_reason


async def deletion_tally(
    control_plane: ControlPlane,
    kube: KubeClient,
    scenario: str,
    names: Iterable[str],
    *,
    namespace: str,
    resources: Iterable[str] = ("configmaps",),
    user: str = CONTROLLER_USER,
    gone: Iterable[str] = (),
) -> Tally:
    """The figures of a scenario whose actions are deletions: every DELETE of ``user`` on
    ``resources`` in ``namespace`` (any answer) and every occurrence of the ``Deleted``
    Events there, so a doubled Event fails it as a doubled DELETE does."""
    found = merged(
        *(
            writes(control_plane, user=user, verb="delete", resource=r, namespace=namespace)
            for r in resources
        )
    )
    events = (await event_reasons(kube, namespace)).get("Deleted") or Counter()
    return Tally.of(scenario, names, found, gone=gone, events=events)


@dataclass
class Tally:
    """One scenario's figures: expected, executed, duplicated, missed (docs/reliability.md)."""

    scenario: str
    expected: int
    executed: int = 0
    duplicated: int = 0
    missed: int = 0
    events: int = 0
    unaudited: int = 0
    #: Every write request for the expected objects, whatever its answer.
    writes: int = 0
    #: Objects with more than one occurrence of their Event (series counts included).
    doubled_events: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        scenario: str,
        expected: Iterable[str],
        found: Writes,
        *,
        gone: Iterable[str] = (),
        events: Counter[str] | None = None,
        excused: Counter[str] | None = None,
    ) -> Tally:
        """``found``: every write per name (:func:`writes`); ``gone``: names whose action the
        cluster's state shows done (deleted, or restarted exactly once), counted executed
        without a 2xx audit line (a write committed while its client was killed is audited as
        504); ``events``: occurrences per name (:func:`event_reasons`); ``excused``: per name,
        the writes sent again because the answer to a successful one was lost on the way."""
        names = set(expected)
        gone_names = set(gone)
        ok = succeeded(found)
        spare = excused or Counter()
        occurrences = events or Counter()
        executed = {name for name in names if ok[name] >= 1}
        unaudited = {name for name in names - executed if name in gone_names}
        doubled = {name for name in names if doubled_writes(found.get(name, [])) > spare[name]}
        return cls(
            scenario=scenario,
            expected=len(names),
            executed=len(executed) + len(unaudited),
            duplicated=len(doubled),
            missed=len(names - executed - unaudited),
            events=sum(1 for name in names if occurrences[name] >= 1),
            unaudited=len(unaudited),
            writes=sum(len(found.get(name, [])) for name in names),
            doubled_events=sum(1 for name in names if occurrences[name] > 1),
        )

    def record(self) -> None:
        """Print the figures and append them to ``$LIFECYCLE_FAULTS_REPORT`` (JSON lines)."""
        line = json.dumps({"at": time.time(), **asdict(self)}, sort_keys=True)
        print(f"[faults] {line}")
        target = os.environ.get("LIFECYCLE_FAULTS_REPORT")
        if target:
            with Path(target).open("a") as out:
                out.write(line + "\n")

    def assert_exactly_once(self) -> None:
        """No action doubled (any second write counts) or missed, no Event doubled."""
        assert (self.duplicated, self.missed, self.doubled_events) == (0, 0, 0), self
        assert self.executed == self.expected, self
