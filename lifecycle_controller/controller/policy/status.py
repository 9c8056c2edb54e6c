"""What each lifecycle policy reports in its ``status``, and the Warning for an invalid one.

Every ``interval`` seconds (leader only, like every write) the writer looks at the policies
that may have changed (the per-policy aggregates of :mod:`.tallies` say which: an idle
cluster costs nothing), compares what it would report with what it last wrote and patches the
``status`` subresource of those whose report changed, at most once per policy per interval
(docs/policies.md#status):

* ``observedGeneration`` and ``scheduleSince`` (when that generation was first accepted:
  recurring restarts count from it);
* ``matched``: the objects it decides for (in one action family at least); ``overlapped``:
  those it matches while another policy, or the object's own action annotations, decide;
  ``held``: those it holds (it is invalid, or its condition failed on them: nothing acts on
  them in its family until it is fixed); ``protected``: those it would match but for their
  protection; ``exempt``: those it would match but for ``exempt`` on them or on their
  Namespace; ``nextAction``: its earliest pending action (``at``, ``kind``, ``namespace``,
  ``name``, ``action``);
* ``conditions``: ``Ready``; ``Invalid`` with every problem (and one Warning Event on the
  policy per invalid generation); ``Unwatched`` naming the ``resources`` entries that select
  no watched type; ``Held`` (a valid policy) saying why it holds objects: its condition
  failed (``ConditionFailed``), their Namespace's labels are not known yet
  (``NamespaceUnknown``), what uses them is not known (``ReferencesUnknown``: the reference
  index has not synced, or may not list a type), each counted, as
  ``lifecycle_policy_held_objects{reason}`` counts them; ``Spent`` (a ``delete-at`` or
  ``restart-at`` policy) while it leaves objects it matches alone, created (or restarted)
  at or after its time: the next contender decides for them. ``lastTransitionTime`` moves
  only when a condition's status does.

* ``actions`` (``deleted``, ``restarted``, ``dryRun`` since the policy's creation, and
  ``held``: the objects its limit holds now) and ``lastActions`` (newest first, at most 50):
  the audit (:mod:`~lifecycle_controller.core.policy.audit`). A policy with new entries is
  read fresh, the entries merged into what its status already shows (each counted once)
  and patched with that read's resourceVersion (a Conflict: read and merge again next
  time); ``actions.dryRunThrough``, how far its dry-run reports go, recorded only once every
  object known has been decided (``idle``), so that a restart counts no rehearsal twice;
  ``Limited`` (``LimitReached`` while its limit holds objects, one Warning
  ``PolicyLimitReached`` per trip). ``limit``, the places of the policy's limit recorded
  before they are used, is written by the passes themselves
  (:mod:`~lifecycle_controller.controller.policy.places`), one write per batch of places;
  this writer only settles, once every object has been decided, the places a stopped
  leader left (the actions it did counted in the audit then).

A condition that fails on some object gets one Warning (``PolicyConditionFailed``) per
policy generation, naming the first such object, however many it fails on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import structlog

from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.controller.policy.decisions import PolicyDecisions
from lifecycle_controller.controller.policy.limits import LimitState
from lifecycle_controller.controller.policy.places import StatusApi
from lifecycle_controller.controller.policy.store import PolicyDoc, PolicyStore
from lifecycle_controller.controller.policy.tallies import Aggregate
from lifecycle_controller.core.decision.events import INVALID_POLICY, Event, EventType
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef, ResourceType
from lifecycle_controller.core.policy.audit import THROUGH, merge
from lifecycle_controller.core.policy.match import REFERENCES_NOT_SYNCED, unwatched_resources
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, PolicyRef
from lifecycle_controller.core.policy.places import RECORD
from lifecycle_controller.core.policy.precedence import UnjudgedReason
from lifecycle_controller.core.policy.refused import readiness, refused_condition
from lifecycle_controller.core.text.timestamps import (
    format_rfc3339_nano,
    format_rfc3339_seconds,
    parse_rfc3339,
)
from lifecycle_controller.kube import Conflict, KubeError, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from lifecycle_controller.machinery.clock import Clock

__all__ = ["INVALID_POLICY", "PolicyStatusWriter", "StatusApi"]

_log = structlog.get_logger(__name__)
#: The Warning's reason on a policy whose condition failed on objects (once per generation).
CONDITION_FAILED: Final = "PolicyConditionFailed"
#: The Warning's reason when a policy's limit starts holding objects (once per trip).
LIMIT_REACHED: Final = "PolicyLimitReached"


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
        idle: Callable[[], bool] = lambda: False,
    ) -> None:
        #: Every object known has been decided since it last changed (the caches are synced,
        #: nothing is queued or being reconciled): how far the dry-run reports go may be
        #: recorded. The default never says so, and records nothing.
        self._idle = idle
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
        #: Each policy object as last looked at (a new object from the store: look again).
        self._seen: dict[str, PolicyDoc] = {}
        self._watched: tuple[str, ...] | None = None
        #: The store's version when every policy object was last gone through.
        self._docs_version: int | None = None
        self._retry: set[PolicyRef] = set()
        self._matched: dict[PolicyRef, int] = {}
        self._held: dict[PolicyRef, dict[tuple[str, str], int]] = {}

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
        aggregate = self._decisions.aggregates.of(ref)
        best = aggregate.next_action()
        next_action = None if best is None else _next_action(best[0], best[2].value, best[1])
        matched, held = len(aggregate.matched), len(aggregate.held)
        overlapped, protected = len(aggregate.overlapped), len(aggregate.protected)
        exempt = len(aggregate.exempt)
        limited = self._decisions.limits.state(ref, self._clock.now_ns())
        status: dict[str, Any] = {
            "observedGeneration": parsed.generation,
            "matched": matched,
            "overlapped": overlapped,
            "held": held,
            "protected": protected,
            "exempt": exempt,
            "nextAction": next_action,
            "conditions": self._conditions(parsed, aggregate)
            + self._held_condition(parsed, aggregate.held_by_reason)
            + _refused(parsed, aggregate)
            + _limited(limited, parsed.generation)
            + _spent(parsed, len(aggregate.left_alone), matched),
        }
        if limited is not None:
            status["actions"] = {"held": limited.held}
        through = self._through(ref, aggregate)
        if through is not None:
            status.setdefault("actions", {})[THROUGH] = format_rfc3339_nano(through)
        if since is not None:
            status["scheduleSince"] = format_rfc3339_nano(since)
        return status

    def _through(self, ref: PolicyRef, aggregate: Aggregate) -> int | None:
        """How far the policy's dry-run reports go: further when the status may say more now
        (the pipeline is idle), else what it shows (None: nothing known)."""
        limits = self._decisions.limits
        if self._idle():
            moved = limits.next_through(ref, aggregate.matched, self._clock.now_ns())
            if moved is not None:
                return moved
        return limits.written_through(ref)

    def _conditions(
        self, parsed: Policy | PolicyInvalid, aggregate: Aggregate
    ) -> list[dict[str, Any]]:
        generation = parsed.generation
        if isinstance(parsed, PolicyInvalid):
            return [
                _condition("Ready", False, "Invalid", "the policy acts on nothing", generation),
                _condition("Invalid", True, "InvalidSpec", parsed.message, generation),
            ]
        unwatched = unwatched_resources(parsed, self._watched_keys())
        watched = len(unwatched) < len(parsed.resources)
        ready = (watched, "Active" if watched else "NothingWatched", "the policy is in force")
        if watched:
            ready = readiness(len(aggregate.matched), len(aggregate.refused)) or ready
        conditions = [
            _condition("Ready", *ready, generation),
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

    def _held_condition(
        self, parsed: Policy | PolicyInvalid, held: Mapping[UnjudgedReason, int]
    ) -> list[dict[str, Any]]:
        """``Held``: why a valid policy holds objects (an invalid one says ``Invalid``)."""
        if isinstance(parsed, PolicyInvalid):
            return []
        references = self._decisions.references
        missing = None if references is None else references.missing()
        return [_held(held, missing or REFERENCES_NOT_SYNCED, parsed.generation)]

    async def flush(self) -> None:
        """Patch the status of every policy whose report changed; warn once per invalid one.

        Only the policies that may have changed are looked at: a new or changed policy
        object, one whose objects' tallies changed (:mod:`.tallies`), one with audit
        entries to write or a limit holding objects, one whose last write failed; all of
        them when the watched types changed. An idle cluster costs nothing: while none is
        dirty and the store holds the objects last gone through, they are not gone through
        (each would be passed over), so a flush does not grow with the policies."""
        watched = tuple(sorted(self._watched_keys()))
        everything = watched != self._watched
        self._watched = watched
        limits = self._decisions.limits
        dirty = self._decisions.aggregates.take_dirty() | self._retry
        dirty |= set(limits.pending) | limits.tripped | limits.holding()
        if self._idle():
            limits.settled = True  # every object decided once: an edit now is an edit
            limits.quiet()  # a hold no object rejoined is over
        if limits.settled:  # a stopped leader's places: its actions counted in the audit
            await limits.settle_places(self._clock.now_ns())
        if lagging := limits.lagging():
            dirty |= lagging  # until their status says how far their reports go
        self._retry = set()
        version = self._store.version
        if not everything and not dirty and version == self._docs_version:
            return
        present: set[str] = set()
        changed = False
        for doc in self._store.docs():
            present.add(doc.uid)
            if not everything and doc.ref not in dirty and self._seen.get(doc.uid) is doc:
                continue
            self._seen[doc.uid] = doc
            changed |= await self._look_at(doc)
        self._docs_version = version
        for uid in set(self._seen) - present:
            gone = self._seen.pop(uid)
            self._written.pop(uid, None)
            self._matched.pop(gone.ref, None)
            self._held.pop(gone.ref, None)
            changed = True
        if changed and self._on_matched is not None:
            self._on_matched({str(ref): count for ref, count in self._matched.items()})
        if changed and self._on_held is not None:
            self._on_held({key: n for held in self._held.values() for key, n in held.items()})

    async def _look_at(self, doc: PolicyDoc) -> bool:
        """Warn, report and write for one policy; True when its metrics changed."""
        ref = doc.ref
        await self._warn_if_invalid(doc)
        failed = self._decisions.aggregates.of(ref).condition_failed
        await self._warn_if_condition_fails(doc, next(iter(failed), None))
        report = self.report(doc)
        held: dict[tuple[str, str], int] = {}
        if isinstance(doc.parsed, PolicyInvalid):
            if report["held"]:
                held[(str(ref), UnjudgedReason.INVALID.value)] = report["held"]
        else:
            for reason, count in self._decisions.aggregates.of(ref).held_by_reason.items():
                held[(str(ref), reason.value)] = count
        if report["protected"]:
            held[(str(ref), "protected")] = report["protected"]
        if report["exempt"]:
            held[(str(ref), "exempt")] = report["exempt"]
        if limited := report.get("actions", {}).get("held", 0):
            held[(str(ref), "limit")] = limited
        changed = self._matched.get(ref) != report["matched"] or self._held.get(ref) != held
        self._matched[ref] = report["matched"]
        self._held[ref] = held
        await self._warn_if_limited(doc)
        pending = self._decisions.limits.pending.get(ref)
        if not pending and doc.uid not in self._written and _shown(doc.status, report):
            self._written[doc.uid] = report  # a former leader wrote it: nothing to write
        if self._written.get(doc.uid) == report and not pending:
            return changed
        if await self._write(doc, report, pending or []):
            self._written[doc.uid] = report
            through = report.get("actions", {}).get(THROUGH)
            if through is not None:
                self._decisions.limits.through_written(ref, parse_rfc3339(through))
        else:
            self._retry.add(ref)
        return changed

    async def _write(self, doc: PolicyDoc, report: dict[str, Any], pending: list[Any]) -> bool:
        """Patch the status; with audit entries, on a fresh read merged (docs/reliability.md)."""
        ref = doc.ref
        previous: Mapping[str, Any] = doc.status
        body: dict[str, Any] = {}
        places = self._decisions.limits.places
        occurrences = [entry.occurrence for entry in pending]
        try:
            if pending:
                fresh = await self._api.get(_resource(ref), ref.namespace, ref.name)
                if fresh.get("metadata", {}).get("uid") != doc.uid:
                    raise NotFound(404)
                previous = fresh.get("status") or {}
                actions, last, _ = merge(previous, pending)
                body["metadata"] = {"resourceVersion": fresh["metadata"]["resourceVersion"]}
                shown = report.get("actions", {})  # held, and dryRunThrough if it moves
                report = {
                    **report,
                    "actions": {**actions, **shown, "held": shown.get("held", 0)},
                    "lastActions": last,
                }
            body["status"] = _with_transitions(report, previous, self._clock.now_ns())
            if pending and places is not None:  # counted now: named no more in the record
                unnamed = places.unnamed(ref, previous, occurrences)
                if unnamed is not None:
                    body["status"][RECORD] = unnamed
            await self._api.merge_patch(
                _resource(ref), ref.namespace, ref.name, body, subresource="status"
            )
        except NotFound:
            self._decisions.limits.pending.pop(ref, None)
            return False  # deleted meanwhile; the store hears of it
        except Conflict:
            return False  # written meanwhile: read and merge again next time
        except KubeError as error:
            _log.warning("policy status not written", policy=str(ref), error=str(error))
            return False
        if pending and places is not None:
            places.audited(ref, occurrences)
        if pending:
            queue = self._decisions.limits.pending.get(ref, [])
            del queue[: len(pending)]  # those merged; later ones wait for the next write
            if not queue:
                self._decisions.limits.pending.pop(ref, None)
        return True

    async def _warn_if_limited(self, doc: PolicyDoc) -> None:
        """One Warning each time the policy's limit starts holding objects."""
        limits = self._decisions.limits
        if doc.ref not in limits.tripped:
            return
        limits.tripped.discard(doc.ref)
        state = limits.state(doc.ref, self._clock.now_ns())
        if state is None:
            return
        message = f"{doc.ref} reached its limit: {_limited_message(state)}"
        _log.warning("lifecycle policy limit reached; actions held", policy=str(doc.ref))
        ref = doc.ref
        key = ObjectKey(_resource(ref), ref.namespace, ref.name)
        event = Event(EventType.WARNING, LIMIT_REACHED, message)
        await self._recorder.record(ObjectRef(key, doc.uid, doc.resource_version), event)

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
        what = "condition" if parsed.since is None else "condition or since"
        message = (
            f"{parsed.ref}'s {what} could not be evaluated on {where}{first.name} (and "
            "maybe others); those objects are held: no policy acts on them until it is fixed"
        )
        references = self._decisions.references
        if parsed.reads_references and references:
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


def _limited_message(state: LimitState) -> str:
    until = "" if state.until_ns is None else format_rfc3339_seconds(state.until_ns)[11:]
    held = f"; {state.held} held until {until}" if state.held else ""
    return f"{state.used} actions in the last {state.limit.window}{held}"


#: The ``Held`` condition's reason for each cause, and what it says of the objects.
_HOLDS: Final = {
    UnjudgedReason.CONDITION_ERROR: ("ConditionFailed", "its condition failed on them"),
    UnjudgedReason.NAMESPACE_UNKNOWN: (
        "NamespaceUnknown",
        "the labels of their Namespace are not known yet (namespaceSelector)",
    ),
    UnjudgedReason.REFERENCES_UNKNOWN: (
        "ReferencesUnknown",
        "what uses them is not known (referencedBy): {missing}",
    ),
    UnjudgedReason.SINCE_ERROR: ("SinceFailed", "its since failed on them"),
}


def _held(held: Mapping[UnjudgedReason, int], missing: str, generation: int) -> dict[str, Any]:
    """The ``Held`` condition of a valid policy: ``True`` while it holds objects, its reason
    the commonest cause (ties: the order of ``_HOLDS``), its message every cause counted."""
    causes = [(reason, held[reason]) for reason in _HOLDS if held.get(reason)]
    if not causes:
        return _condition("Held", False, "NothingHeld", "", generation)
    first = max(causes, key=lambda cause: cause[1])[0]
    message = "; ".join(
        f"{count} held: {_HOLDS[reason][1].format(missing=missing)}" for reason, count in causes
    )
    return _condition("Held", True, _HOLDS[first][0], message, generation)


def _refused(parsed: Policy | PolicyInvalid, aggregate: Aggregate) -> list[dict[str, Any]]:
    """``Refused`` (a valid policy): the deletions ``max-delete-ttl`` refuses it, by cause."""
    if isinstance(parsed, PolicyInvalid):
        return []
    refused = refused_condition(aggregate.refused_by_cause)
    return [_condition("Refused", *refused, parsed.generation)]


def _spent(parsed: Policy | PolicyInvalid, left_alone: int, matched: int) -> list[dict[str, Any]]:
    """The ``Spent`` condition while a one-off policy leaves objects it matches alone, past
    its time (none otherwise): what happened to them, and what can be done."""
    if not left_alone or isinstance(parsed, PolicyInvalid):
        return []
    key = "delete-at" if "delete-at" in parsed.lifecycle else "restart-at"
    since = "created" if key == "delete-at" else "created or restarted"
    one = left_alone == 1
    objects, them, their = (
        ("1 object", "it", "its") if one else (f"{left_alone} objects", "them", "their")
    )
    message = (
        f"it leaves alone {objects} it matches, {since} at or after its {key} "
        f"{parsed.lifecycle[key]}: the next policy (or {their} own annotations) decides for {them}"
    )
    if not matched:
        message += f"; nothing is left for it to do: delete it, or move its {key} to cover {them}"
    reason = "DeleteAtPassed" if key == "delete-at" else "RestartAtDone"
    return [_condition("Spent", True, reason, message, parsed.generation)]


def _limited(state: LimitState | None, generation: int) -> list[dict[str, Any]]:
    """The ``Limited`` condition (none while the policy has no limit in force)."""
    if state is None:
        return []
    if state.held:
        return [_condition("Limited", True, "LimitReached", _limited_message(state), generation)]
    message = f"at most {state.limit.actions} actions per {state.limit.window}"
    return [_condition("Limited", False, "WithinLimit", message, generation)]


def _shown(status: Mapping[str, Any], report: Mapping[str, Any]) -> bool:
    """The policy's status already shows ``report`` (conditions compared without their
    ``lastTransitionTime``): a restarted controller does not write it again."""
    for key, value in report.items():
        shown = status.get(key)
        if key == "conditions":
            shown = [
                {k: v for k, v in c.items() if k != "lastTransitionTime"}
                for c in shown or ()
                if isinstance(c, Mapping)
            ]
        elif key == "actions" and isinstance(shown, Mapping):
            shown = {k: shown.get(k) for k in value}
        if shown != value:
            return False
    return True


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
