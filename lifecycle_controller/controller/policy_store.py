"""The lifecycle policies in force: list and watch both policy kinds, parse each generation once.

The store keeps the current :class:`~lifecycle_controller.core.policy_set.PolicySet` and tells
the app when it changes (``on_change(old, new)``), which re-evaluates the objects concerned
(docs/policies.md#changing-a-policy). It is also the cache's
:class:`~lifecycle_controller.controller.cache.PolicyViews`: which objects the informers must
keep because a policy could match them.

* **Every policy is read**, however many there are: each kind is listed page by page
  (``continue`` tokens), and its watch starts from the resourceVersion of that list.
* **Without the CRDs** (404) the store says once, at info, that policies are off, holds an
  empty set (so the controller runs exactly as without policies) and looks again every
  ``recheck`` seconds (one request a minute by default), so installing the CRDs later turns
  policies on without a restart. Forbidden is logged once at warning and retried the same way.
* **Parsing** happens once per (policy, generation): the CEL condition is compiled then, not
  per object. A status-only or label-only change of a policy object reuses the parsed one.
* **When a generation counts from** (``scheduleSince``): the instant the controller first
  accepted that generation, read back from the policy's ``status`` after a restart (the status
  writer stores it), so recurring restarts do not "catch up" occurrences from before a policy
  or an edit existed (docs/policies.md#how-a-policy-is-anchored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from lifecycle_controller.core.policy_match import DEFAULT_PROTECTION, ObjectView, Protection
from lifecycle_controller.core.policy_model import Policy, PolicyInvalid, PolicyKind, PolicyRef
from lifecycle_controller.core.policy_set import (
    PolicySet,
    object_view,
    policy_from_manifest,
    reported_schedule_since,
)
from lifecycle_controller.core.resources import ResourceType
from lifecycle_controller.kube import Forbidden, Gone, KubeError, NotFound
from lifecycle_controller.kube.errors import error_for_status
from lifecycle_controller.kube.paging import PageFetch, list_whole
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock

__all__ = ["PolicyDoc", "PolicySource", "PolicyStore"]

_log = structlog.get_logger(__name__)

PolicyChange = Callable[[PolicySet, PolicySet], Awaitable[None]]


class PolicySource(Protocol):
    """The two reads the store makes (the kube client implements them)."""

    async def list_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
    ) -> dict[str, Any]: ...

    def watch_objects(
        self, resource: ResourceType, *, resource_version: str, timeout_seconds: int
    ) -> Any: ...


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
        watch_timeout: int = 300,
        namespaces: Callable[[str], bool] | None = None,
        served: Callable[[], bool | None] | None = None,
        protection: Protection = DEFAULT_PROTECTION,
    ) -> None:
        self._source = source
        #: What no policy reaches (docs/policies.md#safety-rules), carried by every snapshot.
        self._protection = protection
        #: Whether API discovery (refreshed anyway, about once a minute) finds the policy
        #: kinds: None when it does not know yet. While it says no, the store sends nothing,
        #: so a cluster without the CRDs sees the same requests as before policies existed.
        self._served = served
        #: Which namespaces' LifecyclePolicies count (the controller's namespace scope): one in
        #: a namespace it does not act in can match nothing, so it is not even reported on.
        self._namespaces = namespaces
        self._clock = clock
        self._recheck = recheck
        self._watch_timeout = watch_timeout
        self._docs: dict[tuple[ResourceType, str | None, str], PolicyDoc] = {}
        self._since: dict[tuple[str, int], int] = {}
        self.current = PolicySet()
        self.on_change: PolicyChange | None = None
        self._off_logged: str | None = None
        self._versions: dict[ResourceType, str] | None = None
        self.available = False

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

    def schedule_since(self) -> dict[PolicyRef, int]:
        """When each valid policy's current generation was first accepted."""
        out: dict[PolicyRef, int] = {}
        for doc in self._docs.values():
            since = self._since.get((doc.uid, doc.parsed.generation))
            if since is not None:
                out[doc.ref] = since
        return out

    def watches(self, resource: ResourceType) -> bool:
        return bool(self.current.for_resource(resource))

    def view(self, resource: ResourceType, metadata: Mapping[str, Any]) -> ObjectView | None:
        if not self.current.for_resource(resource):
            return None
        view = object_view(resource, metadata)
        return view if self.current.candidate(view) else None

    # ------------------------------------------------------------------ applying

    def _parse(self, resource: ResourceType, obj: Mapping[str, Any]) -> PolicyDoc | None:
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            return None
        uid = str(metadata.get("uid", ""))
        key = (resource, metadata.get("namespace") or None, str(metadata.get("name", "")))
        if key[1] is not None and self._namespaces is not None and not self._namespaces(key[1]):
            return None
        generation = metadata.get("generation")
        old = self._docs.get(key)
        raw_status = obj.get("status")
        status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
        if old is not None and old.uid == uid and old.parsed.generation == generation:
            parsed = old.parsed  # a status or label change: the spec is the same
        else:
            manifest = {**obj, "apiVersion": resource.api_version, "kind": resource.kind}
            parsed = policy_from_manifest(manifest)
        since_key = (uid, parsed.generation)
        if since_key not in self._since:
            known = reported_schedule_since(status, parsed.generation)
            self._since[since_key] = known if known is not None else self._clock.now_ns()
        return PolicyDoc(uid, str(metadata.get("resourceVersion", "")), parsed, status)

    def apply(self, resource: ResourceType, event_type: str, obj: Mapping[str, Any]) -> bool:
        """One list item or watch event; True when the set of policies may have changed."""
        doc = self._parse(resource, obj)
        if doc is None:
            return False
        key = (resource, doc.ref.namespace, doc.ref.name)
        if event_type == "DELETED":
            removed = self._docs.pop(key, None)
            if removed is not None:
                self._since.pop((removed.uid, removed.parsed.generation), None)
            return removed is not None
        old = self._docs.get(key)
        self._docs[key] = doc
        return old is None or old.parsed is not doc.parsed

    def replace_all(self, resource: ResourceType, items: list[Mapping[str, Any]]) -> None:
        """A full list of one kind: forget the objects of that kind it no longer has."""
        seen: set[tuple[ResourceType, str | None, str]] = set()
        for item in items:
            doc = self._parse(resource, item)
            if doc is None:
                continue
            key = (resource, doc.ref.namespace, doc.ref.name)
            seen.add(key)
            self._docs[key] = doc
        for key in [k for k in self._docs if k[0] == resource and k not in seen]:
            del self._docs[key]

    async def _publish(self) -> None:
        new = PolicySet.of((doc.parsed for doc in self._docs.values()), self._protection)
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

    async def load(self) -> bool:
        """List both kinds once and publish (without ``on_change``); False when policies are
        off or the list failed (:meth:`run` keeps trying)."""
        if self._not_served():
            self._off(_NOT_INSTALLED)
            return False
        try:
            self._versions = await self._list()
        except NotFound:
            self._off(_NOT_INSTALLED)
        except Forbidden as error:
            self._off(f"reading them is forbidden ({error})")
        except KubeError as error:
            _log.warning("lifecycle policies not loaded yet", error=str(error))
        else:
            self.current = PolicySet.of(
                (doc.parsed for doc in self._docs.values()), self._protection
            )
            _log.info("lifecycle policies are on", policies=len(self._docs))
            self.available = True
        return self.available

    def _not_served(self) -> bool:
        return self._served is not None and self._served() is False

    async def _list(self) -> dict[ResourceType, str]:
        """Every page of both kinds; each kind's watch starts from its list's version."""
        versions: dict[ResourceType, str] = {}
        for resource in self.KINDS:
            items, versions[resource] = await list_whole(self._page_of(resource))
            self.replace_all(resource, items)
        return versions

    def _page_of(self, resource: ResourceType) -> PageFetch:
        async def fetch(token: str | None) -> Mapping[str, Any]:
            return await self._source.list_objects(
                resource, limit=self.PAGE_SIZE, continue_token=token
            )

        return fetch

    async def run(self) -> None:
        """Watch both kinds (listing again as needed) until cancelled; see the module."""
        backoff = Backoff(self._clock, initial=1.0, maximum=30.0)
        while True:
            try:
                versions, self._versions = self._versions, None
                if versions is None:
                    if self._not_served():
                        raise NotFound(404, {"reason": "NotFound"})  # not even asked
                    versions = await self._list()
                    if not self.available:
                        _log.info("lifecycle policies are on", policies=len(self._docs))
                    self.available, self._off_logged = True, None
                    await self._publish()
                backoff.reset()
                await self._watch_all(versions)
            except asyncio.CancelledError:
                raise
            except NotFound:
                await self._unavailable(_NOT_INSTALLED)
            except Forbidden as error:
                await self._unavailable(f"reading them is forbidden ({error})")
            except Gone:
                continue  # list again at once
            except KubeError as error:
                _log.debug("policy watch failed; retrying", error=str(error))
                await backoff.wait()

    async def _unavailable(self, why: str) -> None:
        self._off(why)
        self.available = False
        self._docs.clear()
        await self._publish()
        await self._clock.sleep(self._recheck)

    async def _watch_all(self, versions: dict[ResourceType, str]) -> None:
        """Watch both kinds; the first failure ends both and is raised as it is."""
        tasks = [asyncio.create_task(self._watch(r, v)) for r, v in versions.items()]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            # One wait for both: a cancel arriving meanwhile cannot leave the other's
            # failure unretrieved (gather marks every child's exception as seen).
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self, resource: ResourceType, version: str) -> None:
        while True:
            stream = self._source.watch_objects(
                resource, resource_version=version, timeout_seconds=self._watch_timeout
            )
            async for event in stream:
                obj = event.get("object")
                if not isinstance(obj, Mapping):
                    continue
                kind = str(event.get("type", ""))
                if kind == "ERROR":
                    code = obj.get("code")
                    raise error_for_status(code if isinstance(code, int) else 500, dict(obj))
                metadata = obj.get("metadata") or {}
                version = str(metadata.get("resourceVersion", version))
                if kind == "BOOKMARK":
                    continue
                if self.apply(resource, kind, obj):
                    await self._publish()


def _identity(policies: PolicySet) -> tuple[tuple[PolicyRef, int, bool], ...]:
    valid = tuple((p.ref, p.generation, True) for p in policies.valid)
    return valid + tuple((p.ref, p.generation, False) for p in policies.invalid)
