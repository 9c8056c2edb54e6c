"""Scope rules (docs/behaviour.md#discovery-and-scope): resource/namespace filters, read
scoping, the namespace predicate, preferred-version selection and the eligibility planner,
with the reference's test cases (their numbers are in the test names, see
docs/acceptance-scenarios.md#reference-test-numbers) and acceptance scenarios AS-57..AS-66."""

from __future__ import annotations

import pytest

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.objects.scope import (
    REQUIRED_VERBS,
    DiscoveredGroup,
    DiscoveredResource,
    DiscoveredVersion,
    ScopeConfig,
    ScopeError,
    carry_over,
    go_string_list,
    plan_resources,
    preferred_resources,
)

VERBS = REQUIRED_VERBS
ALL_VERBS = frozenset({*REQUIRED_VERBS, "create", "update", "deletecollection"})


def res(
    key: str,
    kind: str,
    *,
    namespaced: bool = True,
    verbs: frozenset[str] = VERBS,
    version: str = "v1",
) -> DiscoveredResource:
    plural, _, group = key.partition(".")
    if "/" in group:  # "deployments/scale.apps" style keys are not used here
        raise AssertionError(key)
    return DiscoveredResource(group, version, plural, kind, namespaced, verbs)


PODS = res("pods", "Pod")
CONFIGMAPS = res("configmaps", "ConfigMap", verbs=ALL_VERBS)
NODES = res("nodes", "Node", namespaced=False)
NAMESPACES = res("namespaces", "Namespace", namespaced=False)
DEPLOYMENTS = res("deployments.apps", "Deployment")
STATEFULSETS = res("statefulsets.apps", "StatefulSet")
INGRESSES = res("ingresses.networking.k8s.io", "Ingress")
CLUSTERROLES = res("clusterroles.rbac.authorization.k8s.io", "ClusterRole", namespaced=False)
POD_STATUS = DiscoveredResource("", "v1", "pods/status", "Pod", True, frozenset({"get", "patch"}))
BINDINGS = res("bindings", "Binding", verbs=frozenset({"create"}))
CLUSTER = (PODS, CONFIGMAPS, NODES, NAMESPACES, DEPLOYMENTS, STATEFULSETS, INGRESSES, CLUSTERROLES)


def scope(
    watch: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    namespaces: tuple[str, ...] = (),
    ignore_namespaces: tuple[str, ...] = (),
) -> ScopeConfig:
    return ScopeConfig(watch, ignore, namespaces, ignore_namespaces)


# --------------------------------------------------------------------------- filters (60, 61)


@pytest.mark.parametrize(
    ("config", "key", "allowed"),
    [
        (scope(), "pods", True),
        (scope(watch=("deployments.apps",)), "deployments.apps", True),
        (scope(watch=("deployments.apps",)), "pods", False),
        (scope(watch=("*.apps",)), "statefulsets.apps", True),
        (scope(ignore=("secrets",)), "secrets", False),
        (scope(watch=("*",), ignore=("secrets",)), "secrets", False),
        (scope(watch=("cron-*",)), "cron-jobs", True),
    ],
)
def test_ref_060_is_resource_allowed(config: ScopeConfig, key: str, allowed: bool) -> None:
    assert config.is_resource_allowed(key) is allowed


@pytest.mark.parametrize(
    ("config", "namespace", "allowed"),
    [
        (scope(), "default", True),
        (scope(namespaces=("dev-*",)), "dev-team-1", True),
        (scope(namespaces=("dev-*",)), "prod", False),
        (scope(ignore_namespaces=("kube-*",)), "kube-system", False),
        (scope(ignore_namespaces=("default",)), "default", False),
        (scope(namespaces=("team-a", "dev-b"), ignore_namespaces=("dev-*",)), "dev-b", False),
    ],
)
def test_ref_061_is_namespace_allowed(config: ScopeConfig, namespace: str, allowed: bool) -> None:
    assert config.is_namespace_allowed(namespace) is allowed


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (scope(), None),
        (
            scope(namespaces=("team-a", "team-b", "team-a"), ignore_namespaces=("team-b",)),
            ("team-a",),
        ),
        (scope(namespaces=("team-b", "team-a")), ("team-a", "team-b")),
        (scope(namespaces=("team-a", "dev-?")), None),
        (scope(namespaces=("team-a", "dev-b"), ignore_namespaces=("dev-*",)), ("team-a",)),
        # Any glob character means cluster-wide reads, and then names are not validated.
        (scope(namespaces=("INVALID", "dev-[ab]")), None),
        (scope(namespaces=("a\\b",)), None),
        (scope(namespaces=("x]",)), None),
        # Ignore lists alone keep cluster-wide reads.
        (scope(ignore_namespaces=("kube-system",)), None),
    ],
)
def test_ref_061_cache_namespaces(config: ScopeConfig, expected: tuple[str, ...] | None) -> None:
    assert config.informer_namespaces() == expected
    config.validate()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (scope(namespaces=("team-a",), ignore_namespaces=("team-a",)), "at least one namespace"),
        (scope(namespaces=("team-a",), ignore_namespaces=("team-*",)), "at least one namespace"),
        (scope(namespaces=("INVALID",)), 'invalid namespace name "INVALID"'),
        (scope(namespaces=("",)), 'invalid namespace name ""'),
        (scope(namespaces=("ok", "-bad")), 'invalid namespace name "-bad"'),
        (scope(namespaces=("a" * 64,)), "invalid namespace name"),
        (scope(namespaces=("team.a",)), 'invalid namespace name "team.a"'),
    ],
)
def test_ref_061_invalid_namespace_lists(config: ScopeConfig, message: str) -> None:
    with pytest.raises(ScopeError, match=message):
        config.validate()
    with pytest.raises(ScopeError):
        config.informer_namespaces()


def test_ref_061_exact_error_texts() -> None:
    with pytest.raises(ScopeError) as error:
        scope(namespaces=("team-a",), ignore_namespaces=("team-a",)).validate()
    assert str(error.value) == "watch list requires at least one namespace after ignore rules"
    with pytest.raises(ScopeError) as error:
        scope(namespaces=("Bad",)).validate()
    assert str(error.value) == 'invalid namespace name "Bad"'


def test_scope_config_accepts_lists_and_is_hashable() -> None:
    config = ScopeConfig(["pods"], ["secrets"], ["a"], ["b"])  # type: ignore[arg-type]
    assert config.watch_resources == ("pods",)
    assert hash(config) == hash(scope(("pods",), ("secrets",), ("a",), ("b",)))
    assert config.explicit
    assert not scope().explicit


# --------------------------------------------------------------------------- predicate (62)


@pytest.mark.parametrize(
    ("config", "group", "kind", "namespace", "name", "allowed"),
    [
        (scope(namespaces=("foo",)), "", "Pod", "foo", "p1", True),
        (scope(namespaces=("foo",)), "", "Pod", "bar", "p1", False),
        (scope(watch=("namespaces",), namespaces=("foo",)), "", "Namespace", "", "foo", True),
        (scope(watch=("namespaces",), namespaces=("foo",)), "", "Namespace", "", "bar", False),
        (scope(namespaces=("foo",)), "", "Namespace", "", "foo", False),
        (scope(watch=("*",), namespaces=("foo",)), "", "Namespace", "", "foo", False),
        (
            scope(watch=("namespaces",), ignore=("namespace*",), namespaces=("foo",)),
            "",
            "Namespace",
            "",
            "foo",
            False,
        ),
        (scope(namespaces=("foo",)), "", "Node", "", "node-1", False),
        (scope(), "", "Node", "", "node-1", True),
        (scope(ignore_namespaces=("kube-system",)), "", "Node", "", "node-1", True),
        # Only metadata.namespace known: a namespaced object.
        (scope(namespaces=("foo",)), "example.com", "Widget", "foo", "w", True),
        # A typed Namespace (the core type, whatever its TypeMeta says), ignore list only.
        (scope(watch=("namespaces",)), "", "Namespace", "", "anything", True),
        # A custom kind named Namespace is an ordinary cluster-scoped object.
        (
            scope(watch=("namespaces",), namespaces=("foo",)),
            "example.com",
            "Namespace",
            "",
            "foo",
            False,
        ),
        (scope(), "example.com", "Namespace", "", "foo", True),
    ],
)
def test_ref_062_allow_logic(
    config: ScopeConfig, group: str, kind: str, namespace: str, name: str, allowed: bool
) -> None:
    assert config.allows(group=group, kind=kind, namespace=namespace, name=name) is allowed


def test_as_062_ignored_namespace_protects_its_namespace_object() -> None:
    config = scope(ignore_namespaces=("kube-*",))
    assert not config.allows(group="", kind="Pod", namespace="kube-system", name="p")
    assert not config.allows(group="", kind="Namespace", namespace="", name="kube-system")
    assert config.allows(group="", kind="Namespace", namespace="", name="default")


def test_watches_namespace_objects_needs_the_exact_string() -> None:
    assert scope(watch=("namespaces",)).watches_namespace_objects
    assert not scope(watch=("namespace*",)).watches_namespace_objects
    assert not scope(watch=("*",)).watches_namespace_objects
    assert not scope(watch=("namespaces",), ignore=("namespaces",)).watches_namespace_objects


# --------------------------------------------------------------------------- planner (26-31)


def test_ref_027_missing_pattern() -> None:
    plan = plan_resources([PODS], scope(watch=("deployments.apps",)))
    assert plan.missing == ("deployments.apps",)
    assert plan.error == (
        "explicit resource coverage incomplete: missing patterns=[deployments.apps], "
        "unwatchable resources=[]"
    )
    assert plan.counts[("failed", "request_missing")] == 1


def test_ref_027_unwatchable_verbs() -> None:
    pods = res("pods", "Pod", verbs=frozenset({"get", "list"}))
    plan = plan_resources([pods], scope(watch=("pods",)))
    assert plan.error == (
        "explicit resource coverage incomplete: missing patterns=[], unwatchable resources=[pods]"
    )
    assert plan.counts == {
        ("skipped", "unsupported_verbs"): 1,
        ("failed", "request_unwatchable"): 1,
    }


def test_as_059_both_lists_sorted_go_style() -> None:
    pods = res("pods", "Pod", verbs=frozenset({"get", "list"}))
    plan = plan_resources(
        [pods, BINDINGS, DEPLOYMENTS], scope(watch=("zz.example", "pods", "aa.example", "bindings"))
    )
    assert plan.error == (
        "explicit resource coverage incomplete: missing patterns=[aa.example zz.example], "
        "unwatchable resources=[bindings pods]"
    )


def test_a_glob_that_selects_unwatchable_resources_says_which_flags_make_it_start() -> None:
    pods = res("pods", "Pod", verbs=frozenset({"get", "list"}))
    plan = plan_resources([pods, BINDINGS, DEPLOYMENTS], scope(watch=("*", "bindings")))
    assert plan.glob_unwatchable == ("pods",)  # bindings was named: dropping it is the fix
    assert plan.error == (
        "explicit resource coverage incomplete: missing patterns=[], "
        "unwatchable resources=[bindings pods] (a glob also selects resources that cannot be "
        "listed and watched; to start, add --ignore-resource=pods, or name the resources to "
        "watch exactly)"
    )
    fixed = plan_resources([pods, DEPLOYMENTS], scope(watch=("*",), ignore=("pods",)))
    assert fixed.error is None


@pytest.mark.parametrize(
    ("config", "resources", "conflict"),
    [
        (scope(watch=("nodes",), namespaces=("team-a",)), [NODES], "nodes"),
        (scope(watch=("namespace*",), namespaces=("team-a",)), [NAMESPACES], "namespaces"),
        (scope(watch=("namespace*",), namespaces=("team-*",)), [NAMESPACES], "namespaces"),
        # AS-60: `*` selects every cluster-scoped resource.
        (
            scope(watch=("*",), namespaces=("team-a",)),
            list(CLUSTER),
            "clusterroles.rbac.authorization.k8s.io",
        ),
    ],
)
def test_ref_027_cluster_scoped_conflicts(
    config: ScopeConfig, resources: list[DiscoveredResource], conflict: str
) -> None:
    plan = plan_resources(resources, config)
    assert plan.error == (
        f"cluster-scoped resource {conflict} requires an empty namespace watch list; "
        "only an exact namespaces resource selection can be combined with namespace filters"
    )
    assert plan.counts[("failed", "request_unwatchable")] >= 1


@pytest.mark.parametrize(
    ("config", "keys"),
    [
        (scope(), ["namespaces", "nodes", "pods"]),
        (scope(namespaces=("team-a",)), ["pods"]),
        (scope(namespaces=("team-*",)), ["pods"]),
    ],
)
def test_ref_028_broad_plans(config: ScopeConfig, keys: list[str]) -> None:
    plan = plan_resources([NAMESPACES, NODES, PODS], config)
    assert plan.error is None
    assert list(plan.keys) == keys


@pytest.mark.parametrize(
    ("resources", "config"),
    [
        ([CONFIGMAPS], scope(watch=("configmaps",), ignore=("configmaps",))),
        ([PODS], scope(watch=("configmaps",), ignore=("configmaps",))),
        (
            [NAMESPACES],
            scope(watch=("namespaces",), ignore=("namespaces",), namespaces=("team-a",)),
        ),
    ],
)
def test_ref_031_ignore_precedence_can_produce_empty_plan(
    resources: list[DiscoveredResource], config: ScopeConfig
) -> None:
    plan = plan_resources(resources, config)
    assert plan.error is None
    assert plan.watched == ()


def test_ignored_glob_still_resolves_its_pattern() -> None:
    # `*.apps` matched deployments (then ignored): not missing. A literal ignore of a
    # pattern that matched nothing is not missing either; a glob ignore does not help.
    plan = plan_resources([DEPLOYMENTS], scope(watch=("*.apps", "x.y"), ignore=("deployments.*",)))
    assert plan.missing == ("x.y",)
    plan = plan_resources([PODS], scope(watch=("x.y",), ignore=("x.y",)))
    assert plan.missing == ()
    plan = plan_resources([PODS], scope(watch=("x.y",), ignore=("x.*",)))
    assert plan.missing == ("x.y",)


def test_as_057_explicit_watch_list_selects_only_matches() -> None:
    plan = plan_resources(CLUSTER, scope(watch=("deployments.apps",)))
    assert plan.error is None
    assert plan.watched == (ResourceType("apps", "v1", "deployments", "Deployment", True),)


def test_as_058_watch_and_ignore_same_resource() -> None:
    plan = plan_resources(CLUSTER, scope(watch=("deployments.apps",), ignore=("deployments.apps",)))
    assert plan.error is None
    assert plan.watched == ()


def test_as_060_exact_namespaces_with_namespace_filters() -> None:
    plan = plan_resources(CLUSTER, scope(watch=("namespaces", "*.apps"), namespaces=("team-a",)))
    assert plan.error is None
    assert plan.keys == ("deployments.apps", "namespaces", "statefulsets.apps")


def test_as_061_namespace_filters_drop_unselected_cluster_scoped_quietly() -> None:
    plan = plan_resources(CLUSTER, scope(namespaces=("team-a",)))
    assert plan.error is None
    assert plan.keys == (
        "configmaps",
        "deployments.apps",
        "ingresses.networking.k8s.io",
        "pods",
        "statefulsets.apps",
    )
    assert ("nodes", "configured") in plan.skipped


def test_as_066_star_star_excludes_core_and_star_selects_everything() -> None:
    plan = plan_resources(CLUSTER, scope(watch=("*.*",)))
    assert plan.keys == (
        "clusterroles.rbac.authorization.k8s.io",
        "deployments.apps",
        "ingresses.networking.k8s.io",
        "statefulsets.apps",
    )
    assert plan_resources(CLUSTER, scope(watch=("*",))).keys == tuple(
        sorted(r.key for r in CLUSTER)
    )


def test_default_mode_watches_every_eligible_resource_with_counts() -> None:
    plan = plan_resources([*CLUSTER, POD_STATUS, BINDINGS], scope(ignore=("clusterroles.*",)))
    assert plan.error is None
    assert plan.keys == tuple(sorted(r.key for r in CLUSTER if r is not CLUSTERROLES))
    assert dict(plan.skipped) == {
        "bindings": "unsupported_verbs",
        "clusterroles.rbac.authorization.k8s.io": "configured",
        "pods/status": "subresource",
    }
    assert plan.counts == {
        ("discovered", "watchable"): 7,
        ("skipped", "configured"): 1,
        ("skipped", "subresource"): 1,
        ("skipped", "unsupported_verbs"): 1,
    }


def test_update_verb_is_not_required_but_patch_is() -> None:
    no_update = res("widgets.example.com", "Widget", verbs=VERBS)
    no_patch = res("gadgets.example.com", "Gadget", verbs=VERBS - {"patch"})
    plan = plan_resources([no_update, no_patch], scope())
    assert plan.keys == ("widgets.example.com",)
    assert ("gadgets.example.com", "unsupported_verbs") in plan.skipped


def test_requested_subresource_is_unwatchable() -> None:
    plan = plan_resources([PODS, POD_STATUS], scope(watch=("pods/status",)))
    assert plan.unwatchable == ("pods/status",)
    assert plan.keys == ()


def test_plan_keeps_preferred_version_and_kind() -> None:
    hpa = res("horizontalpodautoscalers.autoscaling", "HorizontalPodAutoscaler", version="v2")
    plan = plan_resources([hpa], scope())
    assert plan.watched == (
        ResourceType(
            "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True
        ),
    )
    assert plan.watched[0].key == "horizontalpodautoscalers.autoscaling"


def test_duplicate_missing_patterns_are_listed_like_go() -> None:
    plan = plan_resources([PODS], scope(watch=("x", "x")))
    assert plan.missing == ("x", "x")
    assert plan.counts[("failed", "request_missing")] == 2


def test_go_string_list() -> None:
    assert go_string_list([]) == "[]"
    assert go_string_list(["a", "b"]) == "[a b]"


# --------------------------------------------------------------------------- preferred versions


def _version(version: str, *resources: DiscoveredResource) -> DiscoveredVersion:
    return DiscoveredVersion(version, tuple(resources))


def test_preferred_resources_follow_client_go() -> None:
    hpa_v2 = res("horizontalpodautoscalers.autoscaling", "HorizontalPodAutoscaler", version="v2")
    hpa_v1 = res("horizontalpodautoscalers.autoscaling", "HorizontalPodAutoscaler", version="v1")
    old_only = res("legacies.autoscaling", "Legacy", version="v1")
    status = DiscoveredResource("autoscaling", "v2", "horizontalpodautoscalers/status", "H", True)
    beta_first = res("widgets.example.com", "Widget", version="v1beta1")
    ga_second = res("widgets.example.com", "Widget", version="v1")
    groups = [
        DiscoveredGroup("", "v1", (_version("v1", PODS),)),
        DiscoveredGroup(
            "autoscaling", "v2", (_version("v2", hpa_v2, status), _version("v1", hpa_v1, old_only))
        ),
        # Preferred version listed second still wins over an earlier one.
        DiscoveredGroup(
            "example.com", "v1", (_version("v1beta1", beta_first), _version("v1", ga_second))
        ),
    ]
    assert preferred_resources(groups) == (PODS, hpa_v2, old_only, ga_second)


# -------------------------------- carry-over and rediscovery (docs/behaviour.md#rediscovery)


def _w(key: str, version: str = "v1") -> ResourceType:
    plural, _, group = key.partition(".")
    return ResourceType(group, version, plural, plural.title(), True)


def test_carry_over_keeps_failed_groups_unchanged() -> None:
    previous = {_w("pods"), _w("widgets.example.com"), _w("gizmos.example.com", "v1beta1")}
    # example.com could not be read this time; pods vanished from a healthy group.
    current = [_w("configmaps"), _w("gizmos.example.com", "v1")]
    assert carry_over(previous, current, {"example.com"}) == {
        _w("configmaps"),
        _w("widgets.example.com"),
        _w("gizmos.example.com", "v1beta1"),
    }
    assert carry_over(previous, current, set()) == set(current)


@pytest.mark.parametrize(
    ("watch", "group", "selectable"),
    [
        ((), "metrics.k8s.io", True),
        (("*",), "metrics.k8s.io", True),
        (("deployments.apps",), "metrics.k8s.io", False),
        (("deployments.apps",), "apps", True),
        (("*.apps", "pods"), "metrics.k8s.io", False),
        (("*.apps", "pods"), "", True),
        (("*.k8s.io",), "metrics.k8s.io", True),
        (("*.*",), "", False),
        (("deployments.apps",), "", False),
    ],
)
def test_spec_2_5_may_select_group(watch: tuple[str, ...], group: str, selectable: bool) -> None:
    assert scope(watch=watch).may_select_group(group) is selectable


@pytest.mark.parametrize(
    ("namespace", "name"), [("team-a", "x"), ("team-b", "x"), (None, "team-a"), (None, "node-1")]
)
@pytest.mark.parametrize(
    "resource",
    [
        ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True),
        ResourceType("", "v1", "namespaces", "Namespace", namespaced=False),
        ResourceType("", "v1", "nodes", "Node", namespaced=False),
    ],
)
def test_allows_object_is_allows_for_the_objects_type(
    resource: ResourceType, namespace: str | None, name: str
) -> None:
    scope = ScopeConfig(watch_namespaces=("team-a",))
    assert scope.allows_object(resource, namespace, name) == scope.allows(
        group=resource.group, kind=resource.kind, namespace=namespace or "", name=name
    )
