"""What each lifecycle policy reports in its ``status``, and the Warning for an invalid one.

Every ``interval`` seconds (leader only, like every write) the writer compares what it would
report with what it last wrote and patches the ``status`` subresource of the policies whose
report changed (docs/policies.md#status):

* ``observedGeneration`` and ``scheduleSince`` (when that generation was first accepted:
  recurring restarts count from it);
* ``matched``: the objects it decides for (in one action family at least); ``overlapped``:
  those it matches while another policy, or the object's own action annotations, decide;
  ``held``: those it holds (it is invalid, or its condition failed on them: nothing acts on
  them in its family until it is fixed); ``protected``: those it would match but for their
  protection; ``nextAction``: its earliest pending action (``at``, ``kind``, ``namespace``,
  ``name``, ``action``);
* ``conditions``: ``Ready``; ``Invalid`` with every problem (and one Warning Event on the
  policy per invalid generation); ``Unwatched`` naming the ``resources`` entries that select
  no watched type. ``lastTransitionTime`` moves only when a condition's status does.

A condition that fails on some object gets one Warning (``PolicyConditionFailed``) per
policy generation, naming the first such object, however many it fails on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol

import structlog

from lifecycle_controller.controller.policy_decisions import PolicyDecisions
from lifecycle_controller.controller.policy_store import PolicyDoc, PolicyStore
from lifecycle_controller.controller.recorder import EventRecorder
from lifecycle_controller.core.events import INVALID_POLICY, Event, EventType
from lifecycle_controller.core.policy_contenders import PolicyHoldReason
from lifecycle_controller.core.policy_match import unwatched_resources
from lifecycle_controller.core.policy_model import Policy, PolicyInvalid, PolicyKind, PolicyRef
from lifecycle_controller.core.resources import ObjectKey, ObjectRef, ResourceType
from lifecycle_controller.core.timestamps import format_rfc3339_nano, format_rfc3339_seconds
from lifecycle_controller.kube import KubeError, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from lifecycle_controller.machinery.clock import Clock

__all__ = ["INVALID_POLICY", "PolicyStatusWriter", "StatusApi"]

_log = structlog.get_logger(__name__)
#: The Warning's reason on a policy whose condition failed on objects (once per generation).
CONDITION_FAILED: Final = "PolicyConditionFailed"


class StatusApi(Protocol):
    async def merge_patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        field_manager: str = ...,
        subresource: str = ...,
    ) -> dict[str, Any]: ...


def _resource(ref: PolicyRef) -> ResourceType:
    return POLICIES if ref.kind is PolicyKind.NAMESPACED else CLUSTER_POLICIES


def _condition(
    kind: str, status: bool, reason: str, message: str, generation: int
) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


class PolicyStatusWriter:
    """See the module docstring."""

    def __init__(
        self,
        api: StatusApi,
        store: PolicyStore,
        decisions: PolicyDecisions,
        recorder: EventRecorder,
        clock: Clock,
        *,
        watched_keys: Callable[[], Iterable[str]],
        interval: float = 5.0,
        on_matched: Callable[[dict[str, int]], None] | None = None,
        on_held: Callable[[dict[tuple[str, str], int]], None] | None = None,
    ) -> None:
        self._on_matched = on_matched
        self._on_held = on_held
        self._api = api
        self._store = store
        self._decisions = decisions
        self._recorder = recorder
        self._clock = clock
        self._watched_keys = watched_keys
        self._interval = interval
        self._written: dict[str, dict[str, Any]] = {}
        self._warned: set[tuple[str, int]] = set()
        self._condition_warned: set[tuple[str, int]] = set()

    async def run(self) -> None:
        """Flush every ``interval`` seconds until cancelled."""
        while True:
            await self._clock.sleep(self._interval)
            await self.flush()

    def report(self, doc: PolicyDoc) -> dict[str, Any]:
        """The ``status`` the policy should show now (``lastTransitionTime`` aside)."""
        parsed = doc.parsed
        ref = parsed.ref
        since = self._store.schedule_since().get(ref)
        matched = overlapped = held = protected = 0
        next_action: dict[str, Any] | None = None
        best: int | None = None
        for key, tally in self._decisions.tallies.items():
            if ref in tally.decided_by:
                matched += 1
                due, action = tally.due_ns, tally.action
                if due is not None and action is not None and (best is None or due < best):
                    best = due
                    next_action = _next_action(key, action.value, due)
            elif any(holder == ref for holder, _ in tally.held_by):
                held += 1
            elif ref in tally.overlapped:
                overlapped += 1
            if ref in tally.protected_from:
                protected += 1
        status: dict[str, Any] = {
            "observedGeneration": parsed.generation,
            "matched": matched,
            "overlapped": overlapped,
            "held": held,
            "protected": protected,
            "nextAction": next_action,
            "conditions": self._conditions(parsed),
        }
        if since is not None:
            status["scheduleSince"] = format_rfc3339_nano(since)
        return status

    def _conditions(self, parsed: Policy | PolicyInvalid) -> list[dict[str, Any]]:
        generation = parsed.generation
        if isinstance(parsed, PolicyInvalid):
            return [
                _condition("Ready", False, "Invalid", "the policy acts on nothing", generation),
                _condition("Invalid", True, "InvalidSpec", parsed.message, generation),
            ]
        unwatched = unwatched_resources(parsed, self._watched_keys())
        conditions = [
            _condition(
                "Ready",
                len(unwatched) < len(parsed.resources),
                "Active" if len(unwatched) < len(parsed.resources) else "NothingWatched",
                "the policy is in force",
                generation,
            ),
            _condition("Invalid", False, "Valid", "", generation),
        ]
        if unwatched:
            message = (
                "the controller watches no resource type these select: "
                + ", ".join(unwatched)
                + " (see --watch-resource and --ignore-resource)"
            )
            conditions.append(
                _condition("Unwatched", True, "ResourcesNotWatched", message, generation)
            )
        return conditions

    async def flush(self) -> None:
        """Patch the status of every policy whose report changed; warn once per invalid one."""
        matched: dict[str, int] = {}
        held: dict[tuple[str, str], int] = {}
        failing = self._condition_failures()
        for doc in self._store.docs():
            await self._warn_if_invalid(doc)
            await self._warn_if_condition_fails(doc, failing.get(doc.ref))
            report = self.report(doc)
            matched[str(doc.ref)] = report["matched"]
            reason = (
                PolicyHoldReason.INVALID
                if isinstance(doc.parsed, PolicyInvalid)
                else PolicyHoldReason.CONDITION_ERROR
            )
            if report["held"]:
                held[(str(doc.ref), reason.value)] = report["held"]
            if report["protected"]:
                held[(str(doc.ref), "protected")] = report["protected"]
            if self._written.get(doc.uid) == report:
                continue
            body = {"status": _with_transitions(report, doc.status, self._clock.now_ns())}
            ref = doc.ref
            try:
                await self._api.merge_patch(
                    _resource(ref), ref.namespace, ref.name, body, subresource="status"
                )
            except NotFound:
                continue  # deleted meanwhile; the store hears of it
            except KubeError as error:
                _log.warning("policy status not written", policy=str(ref), error=str(error))
                continue
            self._written[doc.uid] = report
        if self._on_matched is not None:
            self._on_matched(matched)
        if self._on_held is not None:
            self._on_held(held)

    def _condition_failures(self) -> dict[PolicyRef, ObjectKey]:
        """For each policy whose condition failed on an object, the first such object."""
        found: dict[PolicyRef, ObjectKey] = {}
        for key, tally in self._decisions.tallies.items():
            for ref, reason in tally.held_by:
                if reason is PolicyHoldReason.CONDITION_ERROR:
                    found.setdefault(ref, key)
        return found

    async def _warn_if_condition_fails(self, doc: PolicyDoc, first: ObjectKey | None) -> None:
        """One Warning per generation when the condition cannot be evaluated on an object."""
        parsed = doc.parsed
        if first is None or isinstance(parsed, PolicyInvalid):
            return
        mark = (doc.uid, parsed.generation)
        if mark in self._condition_warned:
            return
        self._condition_warned.add(mark)
        where = f"{first.resource.kind} {first.namespace + '/' if first.namespace else ''}"
        message = (
            f"{parsed.ref}'s condition could not be evaluated on {where}{first.name} (and "
            "maybe others); those objects are held: no policy acts on them until it is fixed"
        )
        references = self._decisions.references
        if parsed.condition is not None and parsed.condition.reads_references and references:
            missing = references.missing()
            if missing is not None:
                message += f" ({missing})"
        _log.warning("lifecycle policy condition failed; objects held", policy=str(parsed.ref))
        ref = parsed.ref
        key = ObjectKey(_resource(ref), ref.namespace, ref.name)
        event = Event(EventType.WARNING, CONDITION_FAILED, message)
        await self._recorder.record(ObjectRef(key, doc.uid, doc.resource_version), event)

    async def _warn_if_invalid(self, doc: PolicyDoc) -> None:
        parsed = doc.parsed
        if not isinstance(parsed, PolicyInvalid):
            return
        mark = (doc.uid, parsed.generation)
        if mark in self._warned:
            return
        self._warned.add(mark)
        _log.warning(
            "invalid lifecycle policy; it acts on nothing",
            policy=str(parsed.ref),
            problems=list(parsed.problems),
        )
        ref = parsed.ref
        key = ObjectKey(_resource(ref), ref.namespace, ref.name)
        event = Event(
            EventType.WARNING,
            INVALID_POLICY,
            f"{ref} acts on nothing until it is fixed: {parsed.message}",
        )
        await self._recorder.record(ObjectRef(key, doc.uid, doc.resource_version), event)


def _next_action(key: ObjectKey, action: str, due_ns: int) -> dict[str, Any]:
    return {
        "at": format_rfc3339_nano(due_ns),
        "kind": key.resource.kind,
        "namespace": key.namespace or "",
        "name": key.name,
        "action": action,
    }


def _with_transitions(
    report: Mapping[str, Any], previous: Mapping[str, Any], now_ns: int
) -> dict[str, Any]:
    """``report`` with each condition's ``lastTransitionTime`` (kept while its status holds)."""
    before = {c.get("type"): c for c in previous.get("conditions") or () if isinstance(c, Mapping)}
    now = format_rfc3339_seconds(now_ns)  # metav1.Time: whole seconds
    conditions = []
    for condition in report["conditions"]:
        old = before.get(condition["type"])
        same = old is not None and old.get("status") == condition["status"]
        stamp = old.get("lastTransitionTime") if same and old is not None else now
        conditions.append({**condition, "lastTransitionTime": stamp or now})
    # A merge patch replaces the whole list, so a condition that no longer holds goes with it.
    return {**report, "conditions": conditions}
