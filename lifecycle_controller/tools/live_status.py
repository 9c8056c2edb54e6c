"""``status --watch`` and the console: ``status``'s rows, kept in step with the cluster by watches.

:class:`LiveStatus` keeps what :func:`~lifecycle_controller.tools.status.collect_status`
reads in one look, but reads it once and then follows it
(:class:`~lifecycle_controller.tools.follow.Follower`): the lifecycle policies (whole
objects), the Namespaces (metadata: their defaults and, for a ``namespaceSelector``, their
labels) and every selected type (metadata only; whole objects for a type whose policies'
conditions read fields beyond metadata, cut down to those fields), keeping of each type what
``status`` keeps (:func:`~lifecycle_controller.tools.status.keeper`: annotated objects and
those a policy could match). Every row comes from
:func:`~lifecycle_controller.tools.status.judge_row`, the one ``status`` prints.

:meth:`LiveStatus.refresh` judges again, in memory, only what may have changed:

* an object a watch event changed (its row is dropped when the object is gone or no longer
  kept);
* every kept object when the policies (a new generation, or the instant one counts from),
  the Namespaces' defaults or labels, or the guardrails (the latched breaker) changed, but
  not for a policy's status alone, which the controller rewrites as its counts move; a type
  whose policies now keep other objects (or other fields of them) is listed again, as the
  controller's informers are;
* an object whose row names an instant that has now passed (:func:`recheck_at`): a row
  changes with time only when its due action falls due (the following occurrences, the
  Upcoming warning and the texts are computed from that instant), and a row whose action is
  due is judged at every refresh (the breaker may hold it, the controller may be about to
  act).

A refresh makes no API call of its own (bar the reads the decision already makes and keeps:
a workload's restart marker for its resourceVersion, a namespace's references once); the
callers refresh when a follower reports a change (:meth:`LiveStatus.wait`) or every
``--interval`` seconds. Discovery is read again every :data:`REDISCOVER_S` seconds: a type
that appears is followed, one that goes away is dropped.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Final

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.objects.scope import ScopeConfig, plan_resources
from lifecycle_controller.core.policy.field_paths import fields_of, pick
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import static_filters
from lifecycle_controller.core.policy.model import PolicyRef
from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339
from lifecycle_controller.core.tooling.plan import GuardrailView
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.kube.discovery import fetch_discovery
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES, POLICIES
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import sleep_or_wake
from lifecycle_controller.tools.follow import Follower, Item, Keep, without_managed_fields
from lifecycle_controller.tools.policy_live import RestartMarkers
from lifecycle_controller.tools.policy_view import PolicyDocs, policy_docs
from lifecycle_controller.tools.report import Row
from lifecycle_controller.tools.status import (
    Judging,
    Metadata,
    RowSeen,
    StatusReport,
    defaults_of,
    judge_row,
    keeper,
)

__all__ = ["REDISCOVER_S", "LiveStatus", "kept_signature", "recheck_at"]

#: Seconds between two reads of discovery (a type added or removed meanwhile).
REDISCOVER_S: Final = 30.0
#: Objects judged between two yields to the event loop (the page keeps answering while
#: 100,000 objects are judged again).
_YIELD_EVERY: Final = 256

Key = tuple[ResourceType, str]


def _instant(text: str) -> int | None:
    try:
        return parse_rfc3339(text) if text else None
    except TimestampError:
        return None


def recheck_at(row: Row | None, judged_ns: int) -> int | None:
    """When a row judged at ``judged_ns`` must be judged again though its object did not
    change: ``judged_ns`` itself when its action is due already (at every refresh), else the
    first instant it names after ``judged_ns`` (its due action, or the next occurrence of a
    recurring schedule); None when it names none (time changes nothing of it)."""
    if row is None:
        return None
    due = _instant(row.next)
    if due is not None and due <= judged_ns:
        return judged_ns
    ahead = [at for at in map(_instant, (row.next, *row.upcoming)) if at and at > judged_ns]
    return min(ahead, default=None)


def kept_signature(policies: PolicySet, resource: ResourceType) -> tuple[object, ...]:
    """What decides which objects of ``resource`` are kept for the policies and which of
    their fields are read (the policies' static filters, the paths their conditions read,
    the invalid policies, which may hold an object): when it changes, the type is listed
    again (objects dropped while listing may be kept now)."""
    return (
        tuple(static_filters(p) for p in policies.for_resource(resource)),
        policies.reads(resource),
        tuple((p.ref, p.generation) for p in policies.invalid),
    )


def _judged_by(docs: PolicyDocs, defaults: Mapping[str, NamespaceDefaults]) -> tuple[Any, ...]:
    """What every row depends on beyond its own object: the policies' generations and
    anchors, the Namespaces' labels (for a ``namespaceSelector``) and defaults. A policy's
    ``status`` changes it only through its ``scheduleSince``."""
    generations = [(str(p.ref), p.generation) for p in docs.policies.valid]
    generations += [(str(p.ref), p.generation) for p in docs.policies.invalid]
    return (
        sorted(generations),
        {str(ref): at for ref, at in docs.schedule_since.items()},
        dict(docs.namespace_labels),
        dict(defaults),
    )


def _type_keep(docs: PolicyDocs, resource: ResourceType) -> tuple[Keep, bool]:
    """What a type's follower keeps of each object (its metadata, and the fields its
    policies' conditions read), and whether it reads whole objects for those fields."""
    keeps = keeper(docs, resource)
    reads = docs.policies.reads(resource)

    def keep(item: Item) -> Item | None:
        metadata = item.get("metadata")
        if not isinstance(metadata, Mapping) or not keeps(metadata):
            return None
        kept = without_managed_fields({"metadata": metadata})
        if reads:
            kept["fields"] = pick(fields_of(item), reads)
        return kept

    return keep, bool(reads)


def _as(resource: ResourceType) -> Keep:
    """Keep a whole object, typed as ``resource`` (lists and watches leave it out)."""

    def keep(item: Item) -> Item:
        kept = without_managed_fields(item)
        return {**kept, "apiVersion": resource.api_version, "kind": resource.kind}

    return keep


class LiveStatus:
    """See the module docstring: :meth:`start`, then :meth:`refresh` and :meth:`report`
    (or :meth:`rows`) as often as wanted, :meth:`wait` between them, :meth:`stop`."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        scope: ScopeConfig,
        settings: DecisionSettings,
        clock: Clock,
        namespace: str | None = None,
        occurrences: int = 3,
    ) -> None:
        self._kube = kube
        self._scope = scope
        self._settings = settings
        self._clock = clock
        self._namespace = namespace
        self._occurrences = occurrences
        self._markers = RestartMarkers()
        self._moved = asyncio.Event()
        self._policies = tuple(
            Follower(
                kube, kind, keep=_as(kind), changed=self._policy_moved, clock=clock, whole=True
            )
            for kind in (CLUSTER_POLICIES, POLICIES)
        )
        self._namespaces = Follower(
            kube,
            NAMESPACES,
            keep=_as(NAMESPACES),
            changed=self._namespace_moved,
            clock=clock,
            field_selector=None if namespace is None else f"metadata.name={namespace}",
        )
        self._types: dict[ResourceType, Follower] = {}
        self._signatures: dict[ResourceType, tuple[object, ...]] = {}
        self.docs = PolicyDocs()
        self._defaults: dict[str, NamespaceDefaults] = {}
        self._guardrails: GuardrailView | None = None
        self._rows: dict[Key, Row] = {}
        self._dirty: set[Key] = set()
        self._everything = True  # the policies, the Namespaces or the guardrails moved
        self._policies_moved = True
        self._namespaces_moved = True
        self._recheck: dict[Key, int] = {}
        self._heap: list[tuple[int, int, Key]] = []
        self._due: set[Key] = set()
        self._pushed = 0
        self._judged_by: tuple[Any, ...] | None = None
        self._first_seen: dict[tuple[PolicyRef, int], int] = {}
        #: How many objects the last refresh judged.
        self.judged = 0
        self._discovered_at: float | None = None
        self._discovery_problem = ""

    # --- lifetime -------------------------------------------------------------------------

    async def start(self) -> None:
        """Discover, list the policies and the Namespaces, then every selected type (each
        list kept before this returns; failures are named in :meth:`report`)."""
        await self._discover()  # raises when discovery cannot be read at all
        for follower in (*self._policies, self._namespaces):
            follower.start()
        await _tried(*self._policies, self._namespaces)
        self._read_policies()
        for resource in list(self._types):
            self._follow(resource)
        await _tried(*self._types.values())

    async def stop(self) -> None:
        for follower in (*self._policies, self._namespaces, *self._types.values()):
            await follower.stop()

    async def __aenter__(self) -> LiveStatus:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def notify(self) -> None:
        """Wake :meth:`wait` (a caller's own follower saw a change)."""
        self._moved.set()

    async def wait(self, interval: float) -> None:
        """Until a follower reports a change, or ``interval`` seconds."""
        await sleep_or_wake(self._clock, interval, self._moved)
        self._moved.clear()

    # --- what the followers tell ----------------------------------------------------------

    def _policy_moved(self, uid: str, item: Item | None) -> None:
        self._policies_moved = True
        self._moved.set()

    def _namespace_moved(self, uid: str, item: Item | None) -> None:
        self._namespaces_moved = True
        self._moved.set()

    def _object_moved(self, resource: ResourceType) -> Callable[[str, Item | None], None]:
        def moved(uid: str, item: Item | None) -> None:
            self._dirty.add((resource, uid))
            self._moved.set()

        return moved

    # --- the followed types ---------------------------------------------------------------

    async def _discover(self) -> None:
        snapshot = await fetch_discovery(self._kube)
        plan = plan_resources(snapshot.resources, self._scope)
        wanted = {
            resource for resource in plan.watched if self._namespace is None or resource.namespaced
        }
        for resource in [r for r in self._types if r not in wanted]:
            await self._types.pop(resource).stop()
            self._signatures.pop(resource, None)
            for key in [key for key in self._rows if key[0] == resource]:
                self._forget(key)
        started = self._discovered_at is not None
        for resource in sorted(wanted - set(self._types), key=str):
            self._types[resource] = self._new_follower(resource)
            if started:
                self._follow(resource)
        self._discovered_at = self._clock.monotonic()

    def _new_follower(self, resource: ResourceType) -> Follower:
        return Follower(
            self._kube,
            resource,
            changed=self._object_moved(resource),
            clock=self._clock,
            namespace=self._namespace if resource.namespaced else None,
        )

    def _follow(self, resource: ResourceType) -> None:
        keep, whole = _type_keep(self.docs, resource)
        self._signatures[resource] = kept_signature(self.docs.policies, resource)
        self._types[resource].start(keep, whole=whole)

    async def _rediscover(self) -> None:
        due = self._discovered_at is None or (
            self._clock.monotonic() - self._discovered_at >= REDISCOVER_S
        )
        if not due:
            return
        try:
            await self._discover()
            self._discovery_problem = ""
        except KubeError as error:
            self._discovered_at = self._clock.monotonic()
            self._discovery_problem = f"discovery (the types followed are kept): {error}"

    def _read_policies(self) -> None:
        """The policies and the Namespaces' defaults (and labels) as the followers keep them."""
        manifests = [item for follower in self._policies for item in follower.items.values()]
        namespaces = list(self._namespaces.items.values())
        now = self._clock.now_ns()
        docs = policy_docs(manifests, now_ns=now)
        if docs.policies.selects_namespaces_by_label():
            docs = docs.with_namespaces(namespaces)
        docs = replace(docs, schedule_since=self._since(docs, now))
        self.docs = docs
        self._defaults = defaults_of(item.get("metadata") or {} for item in namespaces)
        self._policies_moved = self._namespaces_moved = False
        judged_by = _judged_by(docs, self._defaults)
        if judged_by != self._judged_by:  # not a policy's status alone (its counts)
            self._judged_by = judged_by
            self._everything = True

    def _since(self, docs: PolicyDocs, now: int) -> dict[PolicyRef, int]:
        """When each generation counts from: a generation whose status does not say is
        taken as accepted when this first saw it (not again at every change of a policy)."""
        since = dict(docs.schedule_since)
        for policy in docs.policies.valid:
            first = self._first_seen.setdefault((policy.ref, policy.generation), now)
            if since.get(policy.ref) == now:
                since[policy.ref] = first
        return since

    async def _relist_changed_types(self) -> None:
        for resource, follower in self._types.items():
            signature = kept_signature(self.docs.policies, resource)
            if self._signatures.get(resource) == signature:
                continue
            self._signatures[resource] = signature
            keep, whole = _type_keep(self.docs, resource)
            await follower.restart(keep, whole=whole)

    # --- judging --------------------------------------------------------------------------

    async def refresh(self, guardrails: GuardrailView | None = None) -> bool:
        """Judge again what may have changed (see the module docstring); whether any row
        changed."""
        await self._rediscover()
        if self._policies_moved or self._namespaces_moved:
            policies_moved = self._policies_moved
            self._read_policies()
            if policies_moved:
                await self._relist_changed_types()
        if guardrails != self._guardrails:
            self._guardrails = guardrails
            self._everything = True
        now = self._clock.now_ns()
        if self._everything:
            keys = set(self._kept_keys())
            keys.update(self._rows)  # rows of objects no longer kept are dropped
            self._everything = False
            self._dirty.clear()
        else:
            keys = self._dirty | self._due | set(self._passed(now))
            self._dirty = set()
        judging = Judging(
            scope=self._scope,
            settings=self._settings,
            docs=self.docs,
            now_ns=now,
            markers=self._markers,
            occurrences=self._occurrences,
            guardrails=self._guardrails,
        )
        changed = False
        self.judged = len(keys)
        for count, key in enumerate(keys, start=1):
            changed |= await self._judge(key, judging)
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return changed

    def _kept_keys(self) -> Iterator[Key]:
        for resource, follower in self._types.items():
            for uid in list(follower.items):
                yield resource, uid

    def _passed(self, now: int) -> Iterator[Key]:
        while self._heap and self._heap[0][0] <= now:
            at, _, key = heapq.heappop(self._heap)
            if self._recheck.get(key) == at:
                yield key

    async def _judge(self, key: Key, judging: Judging) -> bool:
        resource, uid = key
        follower = self._types.get(resource)
        item = follower.items.get(uid) if follower is not None else None
        row = None
        if item is not None:
            metadata: Metadata = item.get("metadata") or {}
            fields = item.get("fields") if judging.docs.policies.reads(resource) else None
            row = await judge_row(
                self._kube, resource, metadata, judging, defaults=self._defaults, fields=fields
            )
        before = self._rows.get(key)
        if row is None:
            self._forget(key)
            return before is not None
        self._rows[key] = row if row != before else before  # unchanged rows stay the same
        self._schedule(key, recheck_at(row, judging.now_ns), judging.now_ns)
        return row != before

    def _schedule(self, key: Key, at: int | None, now: int) -> None:
        self._due.discard(key)
        if at is None:
            self._recheck.pop(key, None)
        elif at <= now:
            self._due.add(key)
            self._recheck.pop(key, None)
        elif self._recheck.get(key) != at:
            self._recheck[key] = at
            self._pushed += 1
            heapq.heappush(self._heap, (at, self._pushed, key))

    def _forget(self, key: Key) -> None:
        self._rows.pop(key, None)
        self._recheck.pop(key, None)
        self._due.discard(key)

    # --- what the callers show ------------------------------------------------------------

    def rows(self, seen: RowSeen | None = None) -> list[Row]:
        """Every row, sorted as ``status`` prints them; ``seen`` is told of each with its
        object's metadata."""
        if seen is not None:
            for (resource, uid), row in self._rows.items():
                item = self._types[resource].items.get(uid) or {}
                seen(resource, item.get("metadata") or {}, row)
        return sorted(
            self._rows.values(),
            key=lambda row: (row.next or "~", row.kind, row.namespace, row.name),
        )

    def unreadable(self) -> list[str]:
        """What could not be read, as ``status`` names it."""
        found = [self._discovery_problem] if self._discovery_problem else []
        policies = "; ".join(f.problem for f in self._policies if f.problem)
        if policies:
            found.append(f"lifecycle policies (judged without them): {policies}")
        if self._namespaces.problem:
            found.append(
                f"namespaces (namespace defaults are not shown): {self._namespaces.problem}"
            )
        found += sorted(f.problem for f in self._types.values() if f.problem)
        return found

    def report(self, seen: RowSeen | None = None) -> StatusReport:
        """What :func:`~lifecycle_controller.tools.status.collect_status` would return now."""
        return StatusReport(
            rows=self.rows(seen),
            unreadable=self.unreadable(),
            policies=self.docs.any,
            docs=self.docs,
        )

    def lists(self) -> dict[str, int]:
        """How many times each followed type was listed (by ``group/resource``)."""
        return {resource.key: follower.lists for resource, follower in self._types.items()}


async def _tried(*followers: Follower) -> None:
    await asyncio.gather(*(follower.tried.wait() for follower in followers))
