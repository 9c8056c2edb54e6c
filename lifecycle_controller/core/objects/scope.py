"""Which resources and namespaces the controller may touch (docs/behaviour.md#discovery-and-scope).

Everything here is pure: the four scope flags (:class:`ScopeConfig`), the startup checks of
the namespace lists and the per-namespace read scoping (docs/behaviour.md#read-scoping), the
runtime namespace filter applied to every event (docs/behaviour.md#namespace-scoping), the
choice of one version per group-resource that client-go's ``ServerPreferredResources``
makes, and the eligibility planner (docs/behaviour.md#eligibility) that turns a discovery
result into the sorted set of resource types to watch, with the reference's skip reasons,
metric counts and startup error texts.
:mod:`lifecycle_controller.controller.watch.discovery` does the I/O.

Resource keys are ``<plural>`` for the core group and ``<plural>.<group>`` otherwise; all
patterns are Go ``filepath.Match`` globs (:mod:`..text.globs`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from lifecycle_controller.core.objects.resources import ResourceType, resource_key
from lifecycle_controller.core.text.globs import (
    example_with_suffix,
    has_glob_meta,
    matches_any,
    matching_patterns,
)
from lifecycle_controller.core.text.gotext import go_quote

__all__ = [
    "REASON_CACHE_SYNC",
    "REASON_CONFIGURED",
    "REASON_GROUP_DISCOVERY",
    "REASON_INVALID_GROUP_VERSION",
    "REASON_REQUEST_MISSING",
    "REASON_REQUEST_UNWATCHABLE",
    "REASON_SUBRESOURCE",
    "REASON_UNSUPPORTED_VERBS",
    "REASON_WATCHABLE",
    "REQUIRED_VERBS",
    "RESULT_DISCOVERED",
    "RESULT_FAILED",
    "RESULT_SKIPPED",
    "DiscoveredGroup",
    "DiscoveredResource",
    "DiscoveredVersion",
    "ResourcePlan",
    "ScopeConfig",
    "ScopeError",
    "carry_over",
    "go_string_list",
    "plan_resources",
    "preferred_resources",
    "resource_key",
]

#: Verbs a resource must serve to be watched (``update`` is not required: we merge-patch).
REQUIRED_VERBS: Final = frozenset({"get", "list", "watch", "patch", "delete"})

# Labels of lifecycle_controller_discovery_resources{result, reason} (docs/behaviour.md#metrics).
RESULT_DISCOVERED: Final = "discovered"
RESULT_SKIPPED: Final = "skipped"
RESULT_FAILED: Final = "failed"
REASON_WATCHABLE: Final = "watchable"
REASON_CONFIGURED: Final = "configured"
REASON_SUBRESOURCE: Final = "subresource"
REASON_UNSUPPORTED_VERBS: Final = "unsupported_verbs"
REASON_REQUEST_MISSING: Final = "request_missing"
REASON_REQUEST_UNWATCHABLE: Final = "request_unwatchable"
REASON_GROUP_DISCOVERY: Final = "group_discovery"
REASON_INVALID_GROUP_VERSION: Final = "invalid_group_version"
REASON_CACHE_SYNC: Final = "cache_sync"

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL_MAX = 63


def go_string_list(values: Iterable[str]) -> str:
    """Go's ``%v`` of a ``[]string``: ``[a b c]`` (``[]`` when empty)."""
    return "[" + " ".join(values) + "]"


class ScopeError(ValueError):
    """An invalid namespace watch list (the app exits 1; config adds the flag context)."""


# --------------------------------------------------------------------------- configuration


def _tuple(values: Iterable[str]) -> tuple[str, ...]:
    return values if isinstance(values, tuple) else tuple(values)


_FIELDS = ("watch_resources", "ignore_resources", "watch_namespaces", "ignore_namespaces")


@dataclass(frozen=True)
class ScopeConfig:
    """The four scope flags, each a list of Go globs; ignore lists take precedence."""

    watch_resources: tuple[str, ...] = ()
    ignore_resources: tuple[str, ...] = ()
    watch_namespaces: tuple[str, ...] = ()
    ignore_namespaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Accept any sequence (lists from flag parsing) but keep the value hashable.
        for name in (
            "watch_resources",
            "ignore_resources",
            "watch_namespaces",
            "ignore_namespaces",
        ):
            object.__setattr__(self, name, _tuple(getattr(self, name)))

    @property
    def explicit(self) -> bool:
        """Explicit mode: a ``--watch-resource`` list is set (discovery failures are fatal)."""
        return bool(self.watch_resources)

    def is_resource_allowed(self, key: str) -> bool:
        """Not ignored, and selected by the watch list when there is one."""
        if matches_any(self.ignore_resources, key):
            return False
        return not self.watch_resources or matches_any(self.watch_resources, key)

    def is_namespace_allowed(self, namespace: str) -> bool:
        """Not ignored, and selected by the watch list when there is one."""
        if matches_any(self.ignore_namespaces, namespace):
            return False
        return not self.watch_namespaces or matches_any(self.watch_namespaces, namespace)

    @property
    def watches_namespace_objects(self) -> bool:
        """The watch list holds the exact string ``namespaces`` and it is not ignored.

        Only then can Namespace objects be watched together with namespace filters.
        """
        return "namespaces" in self.watch_resources and self.is_resource_allowed("namespaces")

    def allows(self, *, group: str, kind: str, namespace: str, name: str) -> bool:
        """The namespace filter (docs/behaviour.md#namespace-scoping) for one watched object.

        ``group`` and ``kind`` are those of the watched resource type; only the core
        ``Namespace`` kind counts as a Namespace (a custom kind of that name does not).
        """
        if namespace:
            return self.is_namespace_allowed(namespace)
        if group == "" and kind == "Namespace":
            if self.watch_namespaces and not self.watches_namespace_objects:
                return False
            return self.is_namespace_allowed(name)
        # Other cluster-scoped objects: a namespace watch list means strict mode.
        return not self.watch_namespaces

    def allows_object(self, resource: ResourceType, namespace: str | None, name: str) -> bool:
        """:meth:`allows` for one object of a watched ``resource``."""
        return self.allows(
            group=resource.group, kind=resource.kind, namespace=namespace or "", name=name
        )

    def informer_namespaces(self) -> tuple[str, ...] | None:
        """Where namespaced informers read (docs/behaviour.md#read-scoping); None: cluster-wide.

        With only exact names in ``--watch-namespace``, the sorted names that survive the
        ignore rules (so namespaced Roles suffice). Raises :class:`ScopeError` for an
        invalid name or when no name survives.
        """
        if not self.watch_namespaces or any(map(has_glob_meta, self.watch_namespaces)):
            return None
        for namespace in self.watch_namespaces:
            if len(namespace) > _DNS1123_LABEL_MAX or not _DNS1123_LABEL.fullmatch(namespace):
                raise ScopeError(f"invalid namespace name {go_quote(namespace)}")
        kept = sorted({ns for ns in self.watch_namespaces if self.is_namespace_allowed(ns)})
        if not kept:
            raise ScopeError("watch list requires at least one namespace after ignore rules")
        return tuple(kept)

    def validate(self) -> None:
        """The startup check of the namespace lists; raises :class:`ScopeError`."""
        self.informer_namespaces()

    def may_select_group(self, group: str) -> bool:
        """Whether a key of ``group`` could be watched (docs/behaviour.md#discovery-modes).

        Always true in broad mode. In explicit mode, true when a watch pattern can match
        some ``<plural>.<group>`` key (plurals are DNS labels: no dots, no slashes).
        """
        if not self.watch_resources:
            return True
        suffix = f".{group}" if group else ""
        return any(
            example_with_suffix(pattern, suffix, stem_excludes=".") is not None
            for pattern in self.watch_resources
        )


# --------------------------------------------------------------------------- discovery data


@dataclass(frozen=True)
class DiscoveredResource:
    """One entry of a discovery resource list (``resource`` may be ``pods/status``)."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: frozenset[str] = field(default_factory=frozenset)
    #: kubectl's short names (``cm``, ``deploy``), for tools that take a kind from a user.
    short_names: frozenset[str] = field(default_factory=frozenset)

    @property
    def key(self) -> str:
        return resource_key(self.resource, self.group)

    @property
    def is_subresource(self) -> bool:
        return "/" in self.resource

    def watched(self) -> ResourceType:
        return ResourceType(self.group, self.version, self.resource, self.kind, self.namespaced)


@dataclass(frozen=True)
class DiscoveredVersion:
    """The resources one served, healthy group version lists."""

    version: str
    resources: tuple[DiscoveredResource, ...] = ()


@dataclass(frozen=True)
class DiscoveredGroup:
    """An API group as discovery lists it: healthy versions in order, and the preferred one."""

    name: str
    preferred_version: str
    versions: tuple[DiscoveredVersion, ...] = ()


def preferred_resources(groups: Iterable[DiscoveredGroup]) -> tuple[DiscoveredResource, ...]:
    """client-go's ``ServerPreferredResources`` selection, one version per group-resource.

    A resource is taken from its group's preferred version when that version lists it,
    otherwise from the first version that does. Subresources are dropped (as client-go
    does). The order is the groups' order, then each version's resource order.
    """
    chosen: dict[tuple[str, str], DiscoveredResource] = {}
    for group in groups:
        for version in group.versions:
            for resource in version.resources:
                if resource.is_subresource:
                    continue
                slot = (group.name, resource.resource)
                if slot in chosen and version.version != group.preferred_version:
                    continue
                chosen[slot] = resource
    return tuple(chosen.values())


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class ResourcePlan:
    """What discovery planning decided (docs/behaviour.md#eligibility).

    ``watched`` is sorted by key. ``skipped`` holds (key, reason) pairs. ``missing`` are
    watch patterns that matched nothing (and are not literally ignored), ``unwatchable``
    explicitly requested keys that cannot be watched, ``conflicts`` explicitly requested
    cluster-scoped keys that clash with namespace filters; all sorted. ``counts`` feed
    ``lifecycle_controller_discovery_resources{result,reason}``.
    """

    watched: tuple[ResourceType, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    missing: tuple[str, ...] = ()
    unwatchable: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)
    #: The unwatchable keys that only a glob selected (none was named literally).
    glob_unwatchable: tuple[str, ...] = ()

    @property
    def error(self) -> str | None:
        """The reference's planning error text, or None when the plan is usable as is."""
        if self.conflicts:
            return (
                f"cluster-scoped resource {self.conflicts[0]} requires an empty namespace "
                "watch list; only an exact namespaces resource selection can be combined "
                "with namespace filters"
            )
        if self.missing or self.unwatchable:
            return (
                "explicit resource coverage incomplete: "
                f"missing patterns={go_string_list(self.missing)}, "
                f"unwatchable resources={go_string_list(self.unwatchable)}" + self._glob_advice()
            )
        return None

    def _glob_advice(self) -> str:
        """What to do when globs selected resources that cannot be listed and watched."""
        if not self.glob_unwatchable:
            return ""
        flags = " ".join(f"--ignore-resource={key}" for key in self.glob_unwatchable)
        return (
            " (a glob also selects resources that cannot be listed and watched; to start, "
            f"add {flags}, or name the resources to watch exactly)"
        )

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(resource.key for resource in self.watched)


def plan_resources(resources: Iterable[DiscoveredResource], scope: ScopeConfig) -> ResourcePlan:
    """Apply the eligibility rules (docs/behaviour.md#eligibility) to discovered resources.

    Resources are considered in key order, so the first conflict named by
    :attr:`ResourcePlan.error` is deterministic. Planning never raises: callers decide
    whether :attr:`ResourcePlan.error` is fatal (at startup in explicit mode) or logged.
    """
    counts: Counter[tuple[str, str]] = Counter()
    resolved: set[str] = set()
    watched: list[ResourceType] = []
    skipped: list[tuple[str, str]] = []
    unwatchable: list[str] = []
    conflicts: list[str] = []
    literal_watches = set(scope.watch_resources)

    def skip(key: str, reason: str) -> None:
        skipped.append((key, reason))
        counts[(RESULT_SKIPPED, reason)] += 1

    for resource in sorted(resources, key=lambda r: (r.key, r.version)):
        key = resource.key
        requested = matching_patterns(scope.watch_resources, key)
        if matches_any(scope.ignore_resources, key):
            resolved.update(requested)  # ignore wins; an empty result is valid
            skip(key, REASON_CONFIGURED)
            continue
        if scope.watch_resources and not requested:
            skip(key, REASON_CONFIGURED)
            continue
        resolved.update(requested)
        namespace_objects = (
            resource.group == ""
            and resource.resource == "namespaces"
            and scope.watches_namespace_objects
        )
        if scope.watch_namespaces and not resource.namespaced and not namespace_objects:
            if requested:
                conflicts.append(key)
                counts[(RESULT_FAILED, REASON_REQUEST_UNWATCHABLE)] += 1
            else:
                skip(key, REASON_CONFIGURED)
            continue
        if resource.is_subresource or not resource.verbs.issuperset(REQUIRED_VERBS):
            skip(key, REASON_SUBRESOURCE if resource.is_subresource else REASON_UNSUPPORTED_VERBS)
            if requested:
                unwatchable.append(key)
            continue
        watched.append(resource.watched())
        counts[(RESULT_DISCOVERED, REASON_WATCHABLE)] += 1

    literal_ignores = set(scope.ignore_resources)
    missing = sorted(
        p for p in scope.watch_resources if p not in resolved and p not in literal_ignores
    )
    if missing:
        counts[(RESULT_FAILED, REASON_REQUEST_MISSING)] += len(missing)
    if unwatchable:
        counts[(RESULT_FAILED, REASON_REQUEST_UNWATCHABLE)] += len(unwatchable)
    return ResourcePlan(
        watched=tuple(sorted(watched, key=lambda r: r.key)),
        skipped=tuple(skipped),
        missing=tuple(missing),
        unwatchable=tuple(sorted(unwatchable)),
        conflicts=tuple(sorted(conflicts)),
        counts=dict(counts),
        glob_unwatchable=tuple(sorted(key for key in unwatchable if key not in literal_watches)),
    )


def carry_over(
    previous: Collection[ResourceType],
    current: Sequence[ResourceType],
    failed_groups: Collection[str],
) -> frozenset[ResourceType]:
    """The watch set after a rediscovery in which ``failed_groups`` could not be read.

    What discovery could not see is treated as unchanged: every previously watched type of
    a failed group stays as it was (same version); the rest comes from ``current``.
    """
    kept = {resource for resource in previous if resource.group in failed_groups}
    kept_slots = {(resource.group, resource.resource) for resource in kept}
    fresh = {r for r in current if (r.group, r.resource) not in kept_slots}
    return frozenset(kept | fresh)
