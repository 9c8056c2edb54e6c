"""The lifecycle policies in force: list and watch both policy kinds, parse each generation once.

The store keeps the current :class:`~lifecycle_controller.core.policy.in_force.PolicySet` and tells
the app when it changes (``on_change(old, new)``), which re-evaluates the objects concerned
(docs/policies.md#changing-a-policy). It is also the cache's
:class:`~lifecycle_controller.controller.watch.cache.PolicyViews`: which objects the informers must
keep because a policy could match them.

* **One informer per kind** (:class:`~lifecycle_controller.controller.watch.reflector.Informer`,
  whole objects, purpose ``policies``): the same list, watch and recovery as every other
  watch of the process. Every policy is read, however many there are: each kind is listed
  page by page (``continue`` tokens), and its watch starts from the resourceVersion of that
  list. A change is published (``on_change``) by one task, in the order the changes came.
* **Without the CRDs** (404) the store says once, at info, that policies are off, holds an
  empty set (so the controller runs exactly as without policies) and looks again every
  ``recheck`` seconds (one request a minute by default), so installing the CRDs later turns
  policies on without a restart. Forbidden is logged once at warning and retried the same way
  (either ends both informers; the next look starts them again).
* **Parsing** happens once per (policy, generation): the CEL condition is compiled then, not
  per object. A status-only or label-only change of a policy object reuses the parsed one.
* **When a generation counts from** (``scheduleSince``): the instant the controller first
  accepted that generation, read back from the policy's ``status`` after a restart (the status
  writer stores it), so recurring restarts do not "catch up" occurrences from before a policy
  or an edit existed (docs/policies.md#how-a-policy-is-anchored).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import structlog

from lifecycle_controller.controller.watch.ports import (
    InformerMetrics,
    InformerSettings,
    Keeper,
    ObjectSource,
)
from lifecycle_controller.controller.watch.projection import WholeObjects
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.controller.watch.supervisor import InformerSupervisor, Stop
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.condition import Stopwatch
from lifecycle_controller.core.policy.field_paths import FieldInterner, pick
from lifecycle_controller.core.policy.in_force import (
    NameTest,
    PolicySet,
    object_view,
    policy_from_manifest,
    reported_schedule_since,
)
from lifecycle_controller.core.policy.match import DEFAULT_PROTECTION, ObjectView, Protection
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, PolicyRef
from lifecycle_controller.kube import Forbidden, KubeError, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from lifecycle_controller.machinery.clock import Clock, thread_cpu_ns

__all__ = ["PolicyDoc", "PolicySource", "PolicyStore", "with_namespace_labels"]

_log = structlog.get_logger(__name__)

PolicyChange = Callable[[PolicySet, PolicySet], Awaitable[None]]


PolicySource = ObjectSource
"""The two reads the store makes (the kube client implements them)."""

_Key = tuple[ResourceType, str | None, str]


@dataclass(frozen=True, slots=True)
class PolicyDoc:
    """One policy object as last seen: identity, its parsed generation and its status."""

    uid: str
    resource_version: str
    parsed: Policy | PolicyInvalid
    status: Mapping[str, Any]

    @property
    def ref(self) -> PolicyRef:
        return self.parsed.ref


_NOT_INSTALLED = "the lifecycle.cezary.dev CRDs are not installed"


class PolicyStore:
    """Both policy kinds, parsed, as one :class:`PolicySet`; see the module docstring."""

    KINDS = (CLUSTER_POLICIES, POLICIES)
    #: Policies per list request; every page is read (:mod:`~lifecycle_controller.kube.paging`).
    PAGE_SIZE = 500

    def __init__(
        self,
        source: PolicySource,
        *,
        clock: Clock,
        recheck: float = 60.0,
        namespaces: Callable[[str], bool] | None = None,
        served: Callable[[], bool | None] | None = None,
        protection: Protection = DEFAULT_PROTECTION,
        settings: InformerSettings | None = None,
        metrics: InformerMetrics | None = None,
        rng: random.Random | None = None,
        stopwatch: Stopwatch | None = thread_cpu_ns,
        on_change: PolicyChange | None = None,
        namespace_labels: Callable[[str], Mapping[str, str] | None] = lambda _name: None,
        namespace_exempt: Callable[[str], bool] = lambda _name: False,
    ) -> None:
        self._projection = WholeObjects(source)
        # A 403 or 404 ends the watch (no retry of its own), and with it both: the store says
        # policies are off and looks again (:meth:`run`).
        self._watches: InformerSupervisor[ResourceType] = InformerSupervisor(
            clock=clock,
            metrics=metrics,
            settings=replace(
                settings or InformerSettings(), page_size=self.PAGE_SIZE, stop_when_forbidden=True
            ),
            rng=rng,
        )
        #: What no policy reaches (docs/policies.md#safety-rules), carried by every snapshot.
        self._protection = protection
        #: Times each condition's evaluation (docs/architecture.md#condition-time-budget).
        self._stopwatch = stopwatch
        #: Whether API discovery (refreshed anyway, about once a minute) finds the policy
        #: kinds: None when it does not know yet. While it says no, the store sends nothing,
        #: so a cluster without the CRDs sees the same requests as before policies existed.
        self._served = served
        #: Which namespaces' LifecyclePolicies count (the controller's namespace scope): one in
        #: a namespace it does not act in can match nothing, so it is not even reported on.
        self._namespaces = namespaces
        self._clock = clock
        self._recheck = recheck
        self._docs: dict[_Key, PolicyDoc] = {}
        #: Moves whenever a policy object is stored, replaced or forgotten: a reader that saw
        #: this version and finds it unchanged knows that :meth:`docs` is what it saw.
        self.version = 0
        self._since: dict[tuple[str, int], int] = {}
        self._since_view: Mapping[PolicyRef, int] | None = None
        self.current = PolicySet()
        #: Equal picked fields shared among objects (docs/policies.md#what-a-condition-reads).
        self._interned = FieldInterner()
        self.on_change = on_change
        #: Told of each policy object the store forgets (deleted, or no longer listed), as
        #: soon as it does: the policy fence drops the reads that still hold the policy.
        self.on_removed: list[Callable[[PolicyRef], None]] = []
        self._off_logged: str | None = None
        #: The informers :meth:`load` listed with, which :meth:`run` goes on watching with.
        self._loaded: list[Informer] | None = None
        self._changed = asyncio.Event()
        self.available = False
        #: The labels of a Namespace, None while unknown (the namespace store's); a
        #: namespaceSelector holds what it cannot judge.
        self.namespace_labels = namespace_labels
        #: Whether a Namespace is exempt (the namespace store's).
        self.namespace_exempt = namespace_exempt

    # ------------------------------------------------------------------ reading

    def docs(self) -> list[PolicyDoc]:
        """Every policy object as last seen (valid or not)."""
        return list(self._docs.values())

    def doc(self, ref: PolicyRef) -> PolicyDoc | None:
        """The policy ``ref`` as last seen, if the store holds it."""
        return self._docs.get((self.resource_of(ref), ref.namespace, ref.name))

    @staticmethod
    def resource_of(ref: PolicyRef) -> ResourceType:
        return CLUSTER_POLICIES if ref.kind is PolicyKind.CLUSTER else POLICIES

    def schedule_since(self) -> Mapping[PolicyRef, int]:
        """When each valid policy's current generation was first accepted (built once per
        change of the policies, not per object decided: read-only)."""
        if self._since_view is None:
            out: dict[PolicyRef, int] = {}
            for doc in self._docs.values():
                since = self._since.get((doc.uid, doc.parsed.generation))
                if since is not None:
                    out[doc.ref] = since
            self._since_view = MappingProxyType(out)
        return self._since_view

    def watches(self, resource: ResourceType) -> bool:
        return bool(self.current.for_resource(resource))

    def with_namespace(self, view: ObjectView) -> ObjectView:
        """``view`` with whether its Namespace is exempt and, when a namespaceSelector reads
        them, its Namespace's labels (the cached view leaves both out: they change without
        the object changing)."""
        if view.namespace is not None and self.namespace_exempt(view.namespace):
            view = replace(view, namespace_exempt=True)
        return with_namespace_labels(view, self.current, self.namespace_labels)

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        read: frozenset[tuple[str, ...]] | None = None,
    ) -> ObjectView | None:
        if not self.current.for_resource(resource):
            return None
        reads = self.current.reads(resource)
        # An informer's projection read with the same paths cut the fields already.
        cut = fields if read == reads or not fields else pick(fields, reads)
        kept = self._interned(dict(cut)) if cut and reads else None
        view = object_view(resource, metadata, kept, read=read)
        return view if self.current.candidate(view) else None

    def reads(self, resource: ResourceType) -> frozenset[tuple[str, ...]]:
        return self.current.reads(resource)

    def name_test(self, resource: ResourceType) -> NameTest | None:
        return self.current.name_test(resource)

    # ------------------------------------------------------------------ applying

    @property
    def protection(self) -> Protection:
        """What no policy reaches (every snapshot carries it)."""
        return self._protection

    @property
    def stopwatch(self) -> Stopwatch | None:
        """What times the conditions' evaluations (every snapshot carries it)."""
        return self._stopwatch

    def parse_current(
        self, resource: ResourceType, obj: Mapping[str, Any]
    ) -> Policy | PolicyInvalid | None:
        """``obj``, a policy object of ``resource``, parsed as the store parses what its watch
        sends (None: one the store would not keep), its parsed form shared when the store
        holds that generation; nothing of the store changes (the policy fence's fresh view)."""
        found = self._parsed(resource, obj)
        return None if found is None else found[1]

    def _parsed(
        self, resource: ResourceType, obj: Mapping[str, Any]
    ) -> tuple[str, Policy | PolicyInvalid] | None:
        """The object's UID and its parsed generation (None: not one the store keeps)."""
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            return None
        uid = str(metadata.get("uid", ""))
        key = (resource, metadata.get("namespace") or None, str(metadata.get("name", "")))
        if key[1] is not None and self._namespaces is not None and not self._namespaces(key[1]):
            return None
        old = self._docs.get(key)
        if (
            old is not None
            and old.uid == uid
            and old.parsed.generation == metadata.get("generation")
        ):
            return uid, old.parsed  # a status or label change: the spec is the same
        manifest = {**obj, "apiVersion": resource.api_version, "kind": resource.kind}
        return uid, policy_from_manifest(manifest)

    def _parse(self, resource: ResourceType, obj: Mapping[str, Any]) -> PolicyDoc | None:
        found = self._parsed(resource, obj)
        if found is None:
            return None
        uid, parsed = found
        metadata = obj["metadata"]
        raw_status = obj.get("status")
        status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
        since_key = (uid, parsed.generation)
        if since_key not in self._since:
            known = reported_schedule_since(status, parsed.generation)
            self._since[since_key] = known if known is not None else self._clock.now_ns()
        return PolicyDoc(uid, str(metadata.get("resourceVersion", "")), parsed, status)

    def apply(self, resource: ResourceType, event_type: str, obj: Mapping[str, Any]) -> bool:
        """One list item or watch event; True when the set of policies may have changed."""
        self._since_view = None
        doc = self._parse(resource, obj)
        if doc is None:
            return False
        key = (resource, doc.ref.namespace, doc.ref.name)
        self.version += 1
        if event_type == "DELETED":
            return self._forget(key)
        old = self._docs.get(key)
        self._docs[key] = doc
        return old is None or old.parsed is not doc.parsed

    def _kinds_keys(self, resource: ResourceType) -> set[Hashable]:
        return {key for key in self._docs if key[0] == resource}

    def _listed(self, stale: set[Hashable]) -> None:
        """A full list of one kind is in: forget what it no longer has, publish the rest."""
        self._since_view = None
        self.version += 1
        for key in stale:
            if isinstance(key, tuple):
                self._forget(key)
        self._changed.set()

    def _forget(self, key: _Key) -> bool:
        """Drop the policy object stored under ``key``, tell :attr:`on_removed`; False when
        none was stored."""
        removed = self._docs.pop(key, None)
        if removed is None:
            return False
        self._since.pop((removed.uid, removed.parsed.generation), None)
        for listener in self.on_removed:
            listener(removed.ref)
        return True

    async def _publish(self) -> None:
        self._changed.clear()
        new = PolicySet.of(
            (doc.parsed for doc in self._docs.values()), self._protection, self._stopwatch
        )
        old, self.current = self.current, new
        if _identity(old) == _identity(new):
            return
        _log.info(
            "lifecycle policies changed",
            valid=[str(p.ref) for p in new.valid],
            invalid=[str(p.ref) for p in new.invalid],
        )
        if self.on_change is not None:
            await self.on_change(old, new)

    # ------------------------------------------------------------------ running

    def _off(self, why: str) -> None:
        if self._off_logged != why:
            log = _log.warning if "forbidden" in why else _log.info
            log(f"lifecycle policies are off: {why}")
            self._off_logged = why

    def _informers(self) -> list[Informer]:
        """One whole-object informer per policy kind, cluster-wide, keeping into this store."""
        return [
            self._watches.informer(
                resource,
                projection=self._projection,
                keeper=_PolicyKeeper(self, resource),
                purpose="policies",
            )
            for resource in self.KINDS
        ]

    async def load(self) -> bool:
        """List both kinds once and publish (without ``on_change``); False when policies are
        off or the list failed (:meth:`run` keeps trying)."""
        if self._not_served():
            self._off(_NOT_INSTALLED)
            return False
        informers = self._informers()
        try:
            # Both kinds at once: the start waits for the slower list, not for their sum.
            listed = await asyncio.gather(
                *(informer.list_once() for informer in informers), return_exceptions=True
            )
            for outcome in listed:  # the first kind's failure first, as when listed in turn
                if isinstance(outcome, BaseException):
                    raise outcome
        except NotFound:
            self._off(_NOT_INSTALLED)
        except Forbidden as error:
            self._off(f"reading them is forbidden ({error})")
        except KubeError as error:
            _log.warning("lifecycle policies not loaded yet", error=str(error))
        else:
            self.current = PolicySet.of(
                (doc.parsed for doc in self._docs.values()), self._protection, self._stopwatch
            )
            self._changed.clear()
            _log.info("lifecycle policies are on", policies=len(self._docs))
            self.available = True
            self._loaded = informers
        return self.available

    def _not_served(self) -> bool:
        return self._served is not None and self._served() is False

    async def run(self) -> None:
        """Watch both kinds (listing again as needed) until cancelled; see the module."""
        while True:
            informers, self._loaded = self._loaded, None
            if self._not_served():
                why = _NOT_INSTALLED  # not even asked
            else:
                why = await self._watch_all(informers or self._informers())
            self._off(why)
            self.available = False
            self._docs.clear()
            self.version += 1
            await self._publish()
            await self._clock.sleep(self._recheck)

    def informers(self) -> list[Informer]:
        """The informers running now, one per policy kind (none while policies are off)."""
        return list(self._watches.informers().values())

    async def _watch_all(self, informers: list[Informer]) -> str:
        """Run both informers and publish what they keep until one of them stops: the CRDs
        are gone (404) or reading them is forbidden; return why."""
        for informer in informers:
            self._watches.start(
                informer.resource, informer, name=f"policy informer {informer.resource}"
            )
        ended = asyncio.create_task(self._watches.first_ended(), name="policy informers")
        publisher = asyncio.create_task(self._publish_changes(informers), name="policy changes")
        try:
            done, _ = await asyncio.wait([ended, publisher], return_when=asyncio.FIRST_COMPLETED)
            if publisher in done:
                publisher.result()  # it ends only by raising: a failed on_change
            stopped = await ended
            if stopped.why is Stop.FORBIDDEN:
                return f"reading them is forbidden ({stopped.error})"
            return _NOT_INSTALLED
        finally:
            # Every watch cancelled now, then one wait for all: a cancel arriving meanwhile
            # cannot leave one's failure unretrieved (gather marks every child's exception
            # as seen).
            self._watches.cancel(*self.KINDS)
            ended.cancel()
            publisher.cancel()
            await asyncio.gather(self._watches.aclose(), ended, publisher, return_exceptions=True)

    async def _publish_changes(self, informers: list[Informer]) -> None:
        """Publish every change the informers keep, one at a time, in order, once both kinds
        have been listed (never one kind without the other: a namespaced policy outranks a
        cluster policy that is not enforced); say then that policies are on."""
        while True:
            await self._changed.wait()
            if not all(informer.synced for informer in informers):
                self._changed.clear()  # the other kind's list will publish both
                continue
            if not self.available:
                _log.info("lifecycle policies are on", policies=len(self._docs))
                self.available, self._off_logged = True, None
            await self._publish()

    def _kept(self, changed: bool) -> None:
        if changed:
            self._changed.set()


class _PolicyKeeper(Keeper):
    """What one policy kind's informer reads, kept in the store (parsed once per generation)."""

    def __init__(self, store: PolicyStore, resource: ResourceType) -> None:
        super().__init__()
        self._store = store
        self._resource = resource

    def listing(self) -> set[Hashable]:
        return self._store._kinds_keys(self._resource)

    def upsert(self, obj: Mapping[str, Any], *, created: bool, listed: bool) -> Hashable:
        self._store._kept(self._store.apply(self._resource, "MODIFIED", obj))
        metadata = obj.get("metadata") or {}
        return (self._resource, metadata.get("namespace") or None, str(metadata.get("name", "")))

    def remove(self, obj: Mapping[str, Any]) -> None:
        self._store._kept(self._store.apply(self._resource, "DELETED", obj))

    def listed(self, stale: set[Hashable]) -> None:
        super().listed(stale)
        self._store._listed(stale)


def with_namespace_labels(
    view: ObjectView,
    policies: PolicySet,
    labels: Callable[[str], Mapping[str, str] | None],
) -> ObjectView:
    """``view`` with the labels of its Namespace (``labels``, None while unknown) when a
    namespaceSelector of ``policies`` reads them."""
    if view.namespace is None or not policies.selects_namespaces_by_label():
        return view
    return replace(view, namespace_labels=labels(view.namespace))


def _identity(policies: PolicySet) -> tuple[tuple[PolicyRef, int, bool], ...]:
    valid = tuple((p.ref, p.generation, True) for p in policies.valid)
    return valid + tuple((p.ref, p.generation, False) for p in policies.invalid)
