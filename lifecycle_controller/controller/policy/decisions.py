"""The reconciler's policy side: resolve an object's policies, and keep what a verdict said.

For an object the cache keeps because a policy could match it (``CachedObject.view``), the
pass's facts include its policies, resolved once per pass:

* :meth:`PolicyDecisions.match` says what every policy says of the object (its conditions
  evaluated), and whether a restart policy contends, for which the pass knows the workload's
  template marker before it goes on; :meth:`PolicyDecisions.resolve` then resolves them
  (:meth:`~lifecycle_controller.core.policy.in_force.PolicySet.resolve`) with what a recurring
  restart counts from (``MetadataCache.restart_anchor``: the template marker, or an occurrence
  a policy skipped); the pure verdict
  (:func:`~lifecycle_controller.core.policy.decide.decide_pass`) decides on them;
* :meth:`PolicyDecisions.record` keeps what the verdict said: an occurrence a policy skipped
  (catch-up) is acknowledged in memory, instead of on the object (a restart fact of the cache,
  written back through the writer like the marker, so it goes with the object), and the
  tallies (which policies decide each object, which they overlapped, which hold it, are kept
  from it by its protection or by ``exempt`` on it or its Namespace, or leave it alone for
  their own reasons, whose deletion of it ``max-delete-ttl`` refuses, the next action) are
  what the policies' ``status`` reports
  (:mod:`~lifecycle_controller.controller.policy.status`), summed per policy as they change
  (:mod:`~lifecycle_controller.controller.policy.tallies`);
* :attr:`PolicyDecisions.limits` holds the policies' ``limit`` windows and the audit entries
  of their actions (:mod:`~lifecycle_controller.controller.policy.limits`);
* :attr:`PolicyDecisions.matched_at` holds when objects began to match the policies whose
  ``since`` reads ``matchedAt`` (:mod:`~lifecycle_controller.controller.policy.matched_at`): given
  to each resolution, and what a recorded one used kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import structlog

from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.policy.limits import DueObject, PolicyLimits
from lifecycle_controller.controller.policy.matched_at import MatchedAt
from lifecycle_controller.controller.policy.places import PolicyPlaces, StatusApi
from lifecycle_controller.controller.policy.references import ReferenceWatch
from lifecycle_controller.controller.policy.store import PolicyStore, with_namespace_labels
from lifecycle_controller.controller.policy.tallies import PolicyAggregates
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.decision.outcomes import Action, Delete, DryRun, Patch, Wait
from lifecycle_controller.core.policy.decide import Verdict
from lifecycle_controller.core.policy.in_force import Matched, PolicySet
from lifecycle_controller.core.policy.limit import PolicyLimit
from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.core.policy.model import Policy, PolicyRef
from lifecycle_controller.core.policy.places import Place
from lifecycle_controller.core.policy.precedence import Resolution, UnjudgedReason
from lifecycle_controller.core.policy.refused import cap_refusals
from lifecycle_controller.core.text.timestamps import (
    parse_rfc3339_or_none,
)
from lifecycle_controller.machinery.clock import Clock

__all__ = ["PolicyDecisions", "Tally"]

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Tally:
    """What the last pass over one object said about policies."""

    decided_by: tuple[PolicyRef, ...]
    overlapped: tuple[PolicyRef, ...]
    action: Action | None = None
    due_ns: int | None = None
    #: The policies holding the object, and why.
    held_by: tuple[tuple[PolicyRef, UnjudgedReason], ...] = ()
    #: The policies that would match it but for its protection.
    protected_from: tuple[PolicyRef, ...] = ()
    #: The policies that would match it but for ``exempt`` on it or on its Namespace.
    exempt_from: tuple[PolicyRef, ...] = ()
    #: The deciding policies whose deletion ``max-delete-ttl`` refuses, and why.
    refused: tuple[tuple[PolicyRef, str], ...] = ()
    #: The matching policies that leave it alone for their own reasons (a spent one-off).
    left_alone_by: tuple[PolicyRef, ...] = ()


def _refs(policies: PolicySet) -> set[PolicyRef]:
    """Every policy in the set, valid or not."""
    return {p.ref for p in policies.valid} | {p.ref for p in policies.invalid}


class PolicyDecisions:
    """See the module docstring; one per pipeline."""

    def __init__(
        self,
        store: PolicyStore,
        cache: MetadataCache,
        writer: ObjectWriter,
        *,
        default_limit: PolicyLimit | None = None,
        references: ReferenceWatch | None = None,
        on_freed: Callable[[ObjectKey], None] = lambda key: None,
        places: tuple[StatusApi, Clock] | None = None,
    ) -> None:
        """``on_freed``: told an object waiting in a policy's limit line that may take a
        place now; ``places``: where and on which clock a limit's places are recorded in
        the policy's status before they are used (None: not recorded, as in the tools)."""
        self.store = store
        self._cache = cache
        self._writer = writer
        self.tallies: dict[ObjectKey, Tally] = {}
        #: Per-policy sums of the tallies, kept as they change (what the status reports).
        self.aggregates = PolicyAggregates()
        self.limits = PolicyLimits(
            default_limit,
            policy_of=self._policy_of,
            on_change=self.aggregates.dirty.add,
            on_freed=on_freed,
            due_objects=self._due_objects,
            places=None if places is None else PolicyPlaces(*places, done=self.place_done),
        )
        self._by_name: tuple[object, dict[str, Policy]] = (None, {})
        #: The reference index ``referencedBy`` reads (None: unknown, such conditions hold).
        self.references = references
        #: When objects began to match the policies whose ``since`` reads ``matchedAt``.
        self.matched_at = MatchedAt()

    def policies_changed(self, old: PolicySet, new: PolicySet) -> None:
        """What the policies' change ends here: a policy gone takes its ``matchedAt`` (and
        record) with it, a deleted one its limit window (re-created, it starts a new one),
        and a policy removed or made invalid cancels its pending actions (logged with how
        many objects it was deciding)."""
        self.matched_at.sync(new)
        deleted = _refs(old) - _refs(new)
        if deleted:
            self.limits.drop(deleted)
        removed = {p.ref for p in old.valid} - {p.ref for p in new.valid}
        for ref in sorted(removed, key=str):
            pending = sum(1 for t in self.tallies.values() if ref in t.decided_by)
            _log.info(
                "lifecycle policy removed or invalid; its pending actions are cancelled",
                policy=str(ref),
                objects=pending,
            )

    def _policy_of(self, name: str) -> tuple[Policy, dict[str, object], str] | None:
        """The valid policy ``Kind/namespace/name``, its status as last seen and its UID."""
        current = self.store.current
        if self._by_name[0] is not current:
            self._by_name = (current, {str(p.ref): p for p in current.valid})
        policy = self._by_name[1].get(name)
        if policy is None:
            return None
        doc = self.store.doc(policy.ref)
        if doc is None:
            return policy, {}, ""
        return policy, dict(doc.status), doc.uid

    def _due_objects(self, ref: PolicyRef, now_ns: int) -> list[DueObject]:
        """The objects ``ref`` decides with an action due by ``now_ns``, earliest first
        (ties by key): those a batch of its limit's places is recorded for."""
        due: list[tuple[int, str, DueObject]] = []
        for key, pending in self.aggregates.of(ref).matched.items():
            obj = None if pending is None or pending[0] > now_ns else self._cache.get(key)
            if pending is not None and obj is not None:
                due.append((pending[0], key.id, (key, obj.uid, pending[0], pending[1])))
        return [entry for _, _, entry in sorted(due, key=lambda d: d[:2])]

    def place_done(self, place: Place, since_ns: int) -> bool:
        """Whether the action a stopped leader recorded a place for was done (since
        ``since_ns``, when its batch was recorded): a deletion whose object is gone (or is
        another object now), a restart the workload's template marker shows since. Asked
        once every object has been decided since the start, so the cache is listed and the
        markers of the workloads a restart policy decides have been read."""
        if place.action == Action.RESTART.value:
            fact = self._cache.restart_fact(place.uid)
            marker = None if fact is None or fact.marker is None else fact.marker
            at = None if marker is None else parse_rfc3339_or_none(marker)
            return at is not None and at >= since_ns
        resource = next((r for r in self._cache.types() if r.key == place.resource), None)
        if resource is None:
            return False  # a type no longer watched: not known, not counted
        obj = self._cache.get(ObjectKey(resource, place.namespace or None, place.name))
        return obj is None or obj.uid != place.uid

    def applies(self, obj: CachedObject) -> bool:
        """The object is one a policy could match (else: annotations alone decide)."""
        return obj.view is not None and bool(self.store.current)

    def match(self, obj: CachedObject) -> Matched | None:
        """What the policies in force say of the object (None: its annotations alone
        decide)."""
        if not self.applies(obj):
            return None
        current = self.store.current
        return current.matched(self._view(obj, current, self.store.namespace_labels))

    def resolve(
        self, obj: CachedObject, now_ns: int, matched: Matched | None = None
    ) -> Resolution | None:
        """The object's policies resolved now (None: its annotations alone decide), on what
        :meth:`match` found if it was asked already."""
        if not self.applies(obj):
            return None
        self.matched_at.sync(self.store.current)
        return self._resolve(obj, now_ns, self.store.current, self.store.namespace_labels, matched)

    def resolve_on(
        self,
        obj: CachedObject,
        now_ns: int,
        policies: PolicySet,
        namespace_labels: Mapping[str, str] | None,
    ) -> Resolution | None:
        """The object resolved as :meth:`resolve` does, on other ``policies`` and its
        Namespace's ``namespace_labels`` (the policy fence's fresh view); None when the
        cache does not keep it for a policy."""
        if obj.view is None:
            return None
        return self._resolve(obj, now_ns, policies, lambda _name: namespace_labels)

    def _view(
        self,
        obj: CachedObject,
        policies: PolicySet,
        namespace_labels: Callable[[str], Mapping[str, str] | None],
    ) -> ObjectView:
        assert obj.view is not None
        view = obj.view
        if self.references is not None and policies.reads_references():
            view = self.references.view_of(view)
        if view.namespace is not None and self.store.namespace_exempt(view.namespace):
            view = replace(view, namespace_exempt=True)
        return with_namespace_labels(view, policies, namespace_labels)

    def _resolve(
        self,
        obj: CachedObject,
        now_ns: int,
        policies: PolicySet,
        namespace_labels: Callable[[str], Mapping[str, str] | None],
        matched: Matched | None = None,
    ) -> Resolution:
        assert obj.view is not None
        matched_at = None
        if self.matched_at.tracks:
            key = ObjectKey(obj.view.resource, obj.namespace, obj.name)
            matched_at = self.matched_at.of(key, obj.uid)
        return policies.resolve(
            obj.annotations,
            self._view(obj, policies, namespace_labels),
            restart_marker=self._cache.restart_anchor(obj.uid),
            now_ns=now_ns,
            schedule_since_ns=self.store.schedule_since(),
            matched_at=matched_at,
            matched=matched,
        )

    def record(
        self, key: ObjectKey, obj: CachedObject, resolution: Resolution, verdict: Verdict
    ) -> None:
        """Keep what the verdict over ``resolution`` said; see the module docstring."""
        acknowledged = parse_rfc3339_or_none(verdict.acknowledged)
        if acknowledged is not None:
            self._writer.acknowledge(key, obj, acknowledged)
        if self.matched_at.tracks:
            self.matched_at.observe(key, obj.uid, resolution)
        decision = verdict.decision
        pending = isinstance(decision, Wait | Patch | Delete | DryRun)
        deciders = {str(ref): ref for ref in resolution.deciders}
        refused = tuple(
            (deciders[policy], cause)
            for policy, cause in cap_refusals((decision, *verdict.others))
            if policy in deciders
        )
        tally = Tally(
            decided_by=resolution.deciders,
            overlapped=resolution.overlapped,
            action=decision.action if pending else None,
            due_ns=decision.due_ns if pending else None,
            held_by=tuple((hold.ref, hold.reason) for hold in resolution.holds),
            protected_from=resolution.protected,
            exempt_from=resolution.exempted,
            refused=refused,
            left_alone_by=tuple(
                spent.ref for spent in resolution.left_alone if not spent.unanchored
            ),
        )
        old = self.tallies.get(key)
        if old != tally:
            self.tallies[key] = tally
            self.aggregates.update(key, old, tally)

    def gone(self, key: ObjectKey) -> None:
        """The object is gone or no policy can match it any more: forget its tally (what is
        known of its restarts goes with the object, from the cache)."""
        old = self.tallies.pop(key, None)
        if old is not None:
            self.aggregates.update(key, old, None)
        self.limits.gone(key)
        self.matched_at.gone(key)
