"""helm lint / helm template of the chart: arguments, RBAC, validation failures, features.

Covers every reference chart test (numbers 85-125 and 164, see
docs/acceptance-scenarios.md#reference-test-numbers) as the documented superset AS-70 allows: our
RBAC has no ``update`` verb (we only patch, docs/behaviour.md#guarded-writes), our log
flag is ``--log-level`` (the reference's ``--zap-log-level``), and the Deployment carries our
own flags (leader-election timings, workers, budgets, rediscovery) after the reference's.
No cluster is needed.
"""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
import yaml

from lifecycle_controller import __version__, config
from lifecycle_controller.cli import RUN_FLAGS
from lifecycle_controller.core.objects import keys
from tests.chart.support import (
    FULL_VALUES,
    FULLNAME,
    NAMESPACED_VALUES,
    RELEASE_NAMESPACE,
    Doc,
    Helm,
    args_of,
    manager_container,
    of_kind,
    one,
    parse_run_args,
    rules,
)

DEFAULT_RESOURCES = [
    "pods",
    "deployments.apps",
    "statefulsets.apps",
    "daemonsets.apps",
    "jobs.batch",
    "cronjobs.batch",
    "configmaps",
    "services",
    "ingresses.networking.k8s.io",
    "networkpolicies.networking.k8s.io",
    "persistentvolumeclaims",
    "horizontalpodautoscalers.autoscaling",
    "poddisruptionbudgets.policy",
]
# The reference chart's default list also watches these; ours leaves them to be added knowingly
# (docs/operator-guide.md#upgrading).
REFERENCE_ONLY_RESOURCES = ["namespaces", "persistentvolumes"]
SYSTEM_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease"]
VERBS = ["delete", "get", "list", "patch", "watch"]
EVENT_RULES = [
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]


def scope(**lists: Any) -> dict[str, Any]:
    return {"controllerManager": {"scope": lists}}


def by_template(helm: Helm, values: dict[str, Any] | None = None) -> dict[str, list[Doc]]:
    """Rendered documents grouped by the template file that produced them."""
    grouped: dict[str, list[Doc]] = {}
    text = helm.template_text(values)
    for chunk in text.split("\n---\n"):
        source = next(
            (line.split("templates/")[-1] for line in chunk.splitlines() if "# Source:" in line),
            None,
        )
        doc = yaml.safe_load(chunk)
        if source and doc:
            grouped.setdefault(source, []).append(doc)
    return grouped


def manager_role(docs: list[Doc]) -> Doc:
    return one(docs, "ClusterRole", f"{FULLNAME}-manager-role")


# --- lint ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {},
        NAMESPACED_VALUES,
        FULL_VALUES,
        {"rbac": {"create": False}},
        {"metrics": {"secure": False}},
    ],
    ids=["default", "namespaced", "full", "no-rbac", "insecure-metrics"],
)
def test_helm_lint_is_clean(helm: Helm, values: dict[str, Any]) -> None:
    result = helm.run("lint", "--strict", str(helm.chart), values=values)
    assert "0 chart(s) failed" in result.stdout, result.stdout


# --- arguments ----------------------------------------------------------------------------


def test_default_arguments_are_exact(helm: Helm) -> None:
    assert args_of(helm.render()) == [
        "--health-probe-bind-address=:8081",
        "--leader-elect",
        f"--leader-election-id={FULLNAME}",
        "--leader-election-lease-duration=15s",
        "--leader-election-renew-deadline=10s",
        "--leader-election-retry-period=2s",
        "--leader-election-release-on-cancel=true",
        "--metrics-bind-address=:8443",
        "--metrics-secure=true",
        "--dry-run=false",
        "--restart-catch-up=always",
        "--delete-catch-up=always",
        "--log-level=info",
        "--log-format=json",
        "--workers=4",
        "--rediscovery-interval=60s",
        "--max-deletes-per-minute=0",
        "--max-restarts-per-minute=0",
        *[f"--watch-resource={resource}" for resource in DEFAULT_RESOURCES],
        *[f"--ignore-namespace={namespace}" for namespace in SYSTEM_NAMESPACES],
        "--policy-default-limit=100/1h",
    ]


def test_reference_default_arguments_are_a_subsequence(helm: Helm) -> None:
    """Reference test 93, with --zap-log-level renamed to our --log-level, and without the two
    resources our defaults leave out (namespaces, persistentvolumes)."""
    reference = [
        "--health-probe-bind-address=:8081",
        "--leader-elect",
        f"--leader-election-id={FULLNAME}",
        "--metrics-bind-address=:8443",
        "--metrics-secure=true",
        "--dry-run=false",
        "--restart-catch-up=always",
        "--delete-catch-up=always",
        "--log-level=info",
        *[f"--watch-resource={resource}" for resource in DEFAULT_RESOURCES],
    ]
    remaining = iter(args_of(helm.render()))
    assert all(any(arg == wanted for arg in remaining) for wanted in reference)


def test_act_on_annotation_copies_is_passed_only_when_set(helm: Helm) -> None:
    flag = "--act-on-annotation-copies=true"
    assert flag not in args_of(helm.render())
    on = args_of(helm.render({"controllerManager": {"actOnAnnotationCopies": True}}))
    assert flag in on
    assert config.build_settings(parse_run_args(on)).actions.act_on_annotation_copies


@pytest.mark.parametrize(
    "values", [{}, NAMESPACED_VALUES, FULL_VALUES], ids=["default", "namespaced", "full"]
)
def test_rendered_arguments_are_flags_of_the_run_command(
    helm: Helm, values: dict[str, Any]
) -> None:
    args = args_of(helm.render(values))
    known = {f"--{flag.name}" for flag in RUN_FLAGS}
    assert {arg.split("=", 1)[0] for arg in args} <= known
    params = parse_run_args(args)
    assert params["leader_elect"] == "true"
    assert list(params["watch_resource"]) == [
        a.split("=", 1)[1] for a in args if a.startswith("--watch-resource=")
    ]


@pytest.mark.parametrize(
    "values", [{}, NAMESPACED_VALUES, FULL_VALUES], ids=["default", "namespaced", "full"]
)
def test_rendered_arguments_are_valid_settings(helm: Helm, values: dict[str, Any]) -> None:
    params = parse_run_args(args_of(helm.render(values)))
    settings = config.build_settings(params)
    manager = values.get("controllerManager", {})
    assert settings.leader_election.enabled
    assert settings.actions.dry_run is manager.get("dryRun", False)
    assert settings.workers == manager.get("workers", 4)
    assert settings.log_level == manager.get("logLevel", "info")


def test_unknown_flag_is_refused_by_the_run_command() -> None:
    with pytest.raises(click.exceptions.NoSuchOption):
        parse_run_args(["--zap-log-level=info"])


# Reference tests 85-91: catch-up arguments.
@pytest.mark.parametrize(
    ("timing", "restart", "delete"),
    [
        (None, "always", "always"),
        ({"restart": {"catchUp": "never"}, "delete": {"catchUp": "15m"}}, "never", "15m"),
        ({"restart": {"catchUp": "1d"}, "delete": {"catchUp": "always"}}, "1d", "always"),
        ("null", "always", "always"),
        ({"restart": None, "delete": None}, "always", "always"),
        ({"restart": {"catchUp": None}, "delete": {"catchUp": None}}, "always", "always"),
        ({"restart": {"catchUp": ""}}, "", "always"),
    ],
    ids=[
        "default",
        "override",
        "pass-through",
        "timing-null",
        "actions-null",
        "keys-null",
        "empty",
    ],
)
def test_catch_up_arguments(helm: Helm, timing: Any, restart: str, delete: str) -> None:
    values: dict[str, Any] = {}
    if timing == "null":
        values = {"controllerManager": {"actionTiming": None}}
    elif timing is not None:
        values = {"controllerManager": {"actionTiming": timing}}
    args = args_of(helm.render(values))
    assert f"--restart-catch-up={restart}" in args
    assert f"--delete-catch-up={delete}" in args


def test_own_flags_follow_their_values(helm: Helm) -> None:
    args = args_of(helm.render(FULL_VALUES))
    for expected in (
        "--dry-run=true",
        "--max-delete-ttl=30d",
        "--max-deletes-per-minute=30",
        "--max-restarts-per-minute=10",
        "--workers=8",
        "--log-level=debug",
        "--restart-catch-up=15m",
        "--delete-catch-up=never",
        "--ignore-resource=secrets",
        "--ignore-namespace=kube-system",
    ):
        assert expected in args
    assert args[-1] == "--rediscovery-interval=5m"  # extraArgs come last


def test_app_version_matches_the_package(helm: Helm) -> None:
    chart = yaml.safe_load((helm.chart / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__


def test_max_delete_ttl_absent_by_default(helm: Helm) -> None:
    """Reference test 164."""
    assert not [a for a in args_of(helm.render()) if a.startswith("--max-delete-ttl")]


def test_leader_election_settings(helm: Helm) -> None:
    values = {
        "controllerManager": {
            "leaderElection": {
                "resourceName": "my-lease",
                "namespace": "leases",
                "leaseDuration": "30s",
                "releaseOnCancel": False,
            }
        }
    }
    grouped = by_template(helm, values)
    args = args_of(grouped["deployment.yaml"])
    assert "--leader-election-id=my-lease" in args
    assert "--leader-election-namespace=leases" in args
    assert "--leader-election-lease-duration=30s" in args
    assert "--leader-election-release-on-cancel=false" in args
    role = one(grouped["leader-election-rbac.yaml"], "Role")
    assert role["metadata"]["namespace"] == "leases"


def test_leader_election_disabled_drops_its_flags(helm: Helm) -> None:
    args = args_of(helm.render({"controllerManager": {"leaderElection": {"enabled": False}}}))
    assert not [a for a in args if a.startswith("--leader-elect")]


def test_metrics_disabled_renders_address_zero(helm: Helm) -> None:
    docs = helm.render({"metrics": {"enabled": False}})
    args = args_of(docs)
    assert "--metrics-bind-address=0" in args
    assert not [a for a in args if a.startswith("--metrics-secure")]
    assert [p["name"] for p in manager_container(docs)["ports"]] == ["healthz"]
    assert not of_kind(docs, "Service")


def test_enable_http2_only_when_true(helm: Helm) -> None:
    assert "--enable-http2" not in args_of(helm.render())
    assert "--enable-http2" in args_of(helm.render({"controllerManager": {"enableHTTP2": True}}))


# --- RBAC (reference tests 92-125) ----------------------------------------------------------


def resource_rule(entry: str) -> dict[str, Any]:
    resource, _, group = entry.partition(".")
    return {"apiGroups": [group], "resources": [resource], "verbs": VERBS}


def test_default_cluster_role_rules_are_exact(helm: Helm) -> None:
    """Reference test 92, without the update verb."""
    assert rules(manager_role(helm.render())) == [
        *[resource_rule(entry) for entry in DEFAULT_RESOURCES],
        *EVENT_RULES,
    ]


def test_no_rule_grants_update_except_the_lease(helm: Helm) -> None:
    for values in ({}, NAMESPACED_VALUES, FULL_VALUES, scope(watchResources=["*"])):
        for doc in helm.render(values):
            if doc["kind"] not in ("ClusterRole", "Role"):
                continue
            for rule in doc.get("rules", []):
                if "update" in rule["verbs"]:
                    assert rule["resources"] == ["leases"], (doc["metadata"]["name"], rule)


def test_custom_watch_list_replaces_defaults(helm: Helm) -> None:
    """Reference test 94."""
    watch = ["configmaps", "deployments.apps", "ingresses.networking.k8s.io"]
    docs = helm.render(scope(watchResources=watch))
    assert rules(manager_role(docs)) == [*[resource_rule(e) for e in watch], *EVENT_RULES]


def test_wildcard_rule(helm: Helm) -> None:
    """Reference test 113 (test 95's empty list is refused: see the render failures)."""
    first = rules(manager_role(helm.render(scope(watchResources=["*"]))))[0]
    assert first == {"apiGroups": ["*"], "resources": ["*"], "verbs": VERBS}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (scope(watchResources="pods"), "controllerManager.scope.watchResources must be a list"),
        # It once rendered a wildcard rule (every resource): the wildcard must be asked for.
        (scope(watchResources=[]), "controllerManager.scope.watchResources is empty"),
        # It once bound the chart's rights to the namespace's "default" ServiceAccount.
        (
            {"serviceAccount": {"create": False}},
            "serviceAccount.name is required when serviceAccount.create is false",
        ),
        (
            scope(ignoreNamespaces="team-a"),
            "controllerManager.scope.ignoreNamespaces must be a list",
        ),
        (
            scope(watchResources=["persistentvolumes"], watchNamespaces=["team-a"]),
            "namespace filters exclude PersistentVolumes, leaving no resources to watch",
        ),
        (
            scope(watchResources=[".apps"]),
            'invalid controllerManager.scope.watchResources entry ".apps": '
            "resource segment cannot be empty",
        ),
        (
            scope(watchResources=["deployments..apps"]),
            'invalid controllerManager.scope.watchResources entry "deployments..apps": '
            "apiGroup segments cannot be empty",
        ),
        (
            scope(watchNamespaces=["team-a"], ignoreNamespaces=["team-a"]),
            "namespaced RBAC requires at least one namespace after ignore rules",
        ),
        (
            scope(watchNamespaces=["team-a"], ignoreNamespaces=["dev-*"]),
            'generated namespaced RBAC requires exact namespace names, got "dev-*"; '
            "use rbac.create: false for supplied RBAC",
        ),
        (
            scope(watchResources=["deployment?.apps"]),
            'invalid controllerManager.scope.watchResources entry "deployment?.apps": '
            "chart-generated RBAC requires exact names or a lone *",
        ),
        (
            scope(ignoreResources=["secr*"]),
            "chart-generated RBAC requires exact ignoreResources entries or *; "
            "use rbac.create: false for supplied RBAC",
        ),
        (
            scope(watchResources=["*.k8s.io"]),
            'invalid controllerManager.scope.watchResources entry "*.k8s.io": '
            "chart-generated RBAC requires exact names or a lone *",
        ),
        (
            {"controllerManager": {"healthProbeBindAddress": "8081"}},
            "controllerManager.healthProbeBindAddress must use :port, host:port, or [IPv6]:port "
            "with a numeric port",
        ),
        (
            {"metrics": {"bindAddress": ":70000"}},
            "metrics.bindAddress port must be between 1 and 65535",
        ),
        (
            {"metrics": {"bindAddress": ":0000"}},
            "metrics.bindAddress port must be between 1 and 65535",
        ),
        (
            {"replicaCount": 2, "controllerManager": {"leaderElection": {"enabled": False}}},
            "replicaCount > 1 needs controllerManager.leaderElection.enabled: true",
        ),
        (
            {"metrics": {"serviceMonitor": {"enabled": True, "createScraperToken": False}}},
            "metrics.serviceMonitor needs createScraperToken: true or authorizationSecret",
        ),
        (
            {"podDisruptionBudget": {"enabled": True, "maxUnavailable": None}},
            "podDisruptionBudget needs minAvailable or maxUnavailable",
        ),
    ],
    ids=[
        "watch-not-a-list",
        "watch-empty",
        "existing-service-account-unnamed",
        "ignore-ns-not-a-list",
        "only-pv-namespaced",
        "empty-resource",
        "empty-group-segment",
        "no-namespace-left",
        "glob-ignore-namespace",
        "glob-resource",
        "glob-ignore-resource",
        "glob-group",
        "probe-address",
        "port-range",
        "port-zero",
        "replicas-without-election",
        "monitor-without-auth",
        "pdb-without-bound",
    ],
)
def test_validation_failure_messages(helm: Helm, values: dict[str, Any], message: str) -> None:
    """Reference tests 96-99, 105, 106, 109-111, plus the bind-address and our own checks."""
    assert message in helm.render_failure(values)


def test_namespaced_roles_per_namespace(helm: Helm) -> None:
    """Reference test 100."""
    docs = by_template(helm, scope(watchNamespaces=["team-a", "team-b"]))["rbac.yaml"]
    # helm sorts the output by kind (Roles before RoleBindings), keeping template order within.
    assert [(d["kind"], d["metadata"]["namespace"]) for d in docs] == [
        ("Role", "team-a"),
        ("Role", "team-b"),
        ("RoleBinding", "team-a"),
        ("RoleBinding", "team-b"),
    ]
    role_rules = rules(docs[0])
    assert len(role_rules) == 15
    assert role_rules[1]["resources"] == ["deployments"]
    assert role_rules[13]["resources"] == ["events"]
    assert all(r["resources"] not in (["namespaces"], ["persistentvolumes"]) for r in role_rules)
    binding = docs[2]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": f"{FULLNAME}-manager-role",
    }
    assert binding["subjects"][0]["namespace"] == RELEASE_NAMESPACE


def test_namespaced_roles_dedupe_and_ignore(helm: Helm) -> None:
    """Reference test 101."""
    values = scope(watchNamespaces=["team-a", "team-b", "team-a"], ignoreNamespaces=["team-b"])
    docs = by_template(helm, values)["rbac.yaml"]
    assert [d["metadata"]["namespace"] for d in docs] == ["team-a", "team-a"]


def test_ignored_resources_are_left_out(helm: Helm) -> None:
    """Reference tests 102 and 103."""
    values = scope(
        watchResources=["configmaps", "secrets", "configmaps"], ignoreResources=["secrets"]
    )
    role_rules = rules(manager_role(helm.render(values)))
    assert len(role_rules) == 3
    assert role_rules[0]["resources"] == ["configmaps"]
    values = scope(watchResources=["configmaps"], ignoreResources=["configmaps"])
    assert rules(manager_role(helm.render(values))) == EVENT_RULES


def test_ignoring_everything_leaves_only_event_rules(helm: Helm) -> None:
    for watch in (["*"], ["pods", "configmaps"]):
        docs = helm.render(scope(watchResources=watch, ignoreResources=["*"]))
        assert rules(manager_role(docs)) == EVENT_RULES


def test_glob_watch_namespace_keeps_cluster_role(helm: Helm) -> None:
    """Reference test 104."""
    docs = helm.render(scope(watchNamespaces=["dev-*"]))
    manager_role(docs)
    assert not of_kind(docs, "Role") or all(
        d["metadata"]["name"].endswith("leader-election-role") for d in of_kind(docs, "Role")
    )


def test_supplied_rbac_passes_globs_verbatim(helm: Helm) -> None:
    """Reference tests 107 and 112; no RBAC object at all."""
    docs = helm.render(
        {
            "rbac": {"create": False},
            **scope(
                watchResources=["deployment?.apps"],
                watchNamespaces=["team-a"],
                ignoreNamespaces=["dev-*"],
            ),
        }
    )
    args = args_of(docs)
    assert "--ignore-namespace=dev-*" in args
    assert "--watch-resource=deployment?.apps" in args
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "Role", "RoleBinding")]
    assert not [d for d in docs if d["kind"] == "ClusterRoleBinding"]


def test_namespace_filters_drop_persistent_volumes_from_args(helm: Helm) -> None:
    """Reference test 108."""
    watch = DEFAULT_RESOURCES + REFERENCE_ONLY_RESOURCES
    args = args_of(helm.render(scope(watchNamespaces=["team-a"], watchResources=watch)))
    assert "--watch-namespace=team-a" in args
    assert "--watch-resource=pods" in args
    assert "--watch-resource=namespaces" in args
    assert "--watch-resource=persistentvolumes" not in args


def test_leader_election_rbac(helm: Helm) -> None:
    """Reference tests 114, 115, 119."""
    docs = by_template(helm)["leader-election-rbac.yaml"]
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]
    assert all(d["metadata"]["namespace"] == RELEASE_NAMESPACE for d in docs)
    assert rules(docs[0])[0] == {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    }
    disabled = {"controllerManager": {"leaderElection": {"enabled": False}}}
    assert "leader-election-rbac.yaml" not in by_template(helm, disabled)
    assert "leader-election-rbac.yaml" not in by_template(helm, {"rbac": {"create": False}})


def test_metrics_auth_rbac(helm: Helm) -> None:
    """Reference tests 116-118, 120."""
    docs = by_template(helm)["metrics-rbac.yaml"]
    assert [d["kind"] for d in docs] == ["ClusterRole", "ClusterRoleBinding"]
    assert rules(docs[0]) == [
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
    ]
    for values in (
        {"metrics": {"enabled": False}},
        {"metrics": {"secure": False}},
        {"rbac": {"create": False}},
    ):
        assert "metrics-rbac.yaml" not in by_template(helm, values)


def test_metrics_reader_cluster_role(helm: Helm) -> None:
    reader = one(by_template(helm)["metrics-reader-rbac.yaml"], "ClusterRole")
    assert reader["metadata"]["name"] == f"{FULLNAME}-metrics-reader"
    assert rules(reader) == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert "metrics-reader-rbac.yaml" not in by_template(helm, {"metrics": {"secure": False}})


def test_namespace_object_rbac(helm: Helm) -> None:
    """Reference tests 121-123, 125."""
    watch = scope(watchNamespaces=["team-a"], watchResources=["pods", "namespaces"])
    assert len(by_template(helm, watch)["namespace-rbac.yaml"]) == 4
    assert "namespace-rbac.yaml" not in by_template(helm, scope(watchNamespaces=["team-a"]))
    ignored = scope(
        watchNamespaces=["team-a"], watchResources=["namespaces"], ignoreResources=["namespaces"]
    )
    assert "namespace-rbac.yaml" not in by_template(helm, ignored)
    no_rbac = {"rbac": {"create": False}, **scope(watchNamespaces=["team-a"])}
    assert "namespace-rbac.yaml" not in by_template(helm, no_rbac)
    values = scope(
        watchNamespaces=["team-a", "team-b", "team-a"],
        ignoreNamespaces=["team-b"],
        watchResources=["namespaces"],
    )
    docs = by_template(helm, values)["namespace-rbac.yaml"]
    assert [d["kind"] for d in docs] == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    assert rules(docs[0]) == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": ["team-a"],
            "verbs": ["delete", "patch"],
        },
    ]
    assert docs[1]["subjects"][0]["namespace"] == RELEASE_NAMESPACE
    assert docs[2]["metadata"]["namespace"] == "default"
    assert rules(docs[2]) == EVENT_RULES
    assert docs[3]["metadata"]["namespace"] == "default"


def test_namespaced_role_excludes_namespaces(helm: Helm) -> None:
    """Reference test 124."""
    values = scope(watchNamespaces=["team-a"], watchResources=["namespaces", "deployments.apps"])
    role = one(by_template(helm, values)["rbac.yaml"], "Role")
    assert len(rules(role)) == 3
    assert rules(role)[0]["resources"] == ["deployments"]


def test_crd_watch_only_with_cluster_rbac(helm: Helm) -> None:
    role = one(by_template(helm)["discovery-rbac.yaml"], "ClusterRole")
    assert rules(role) == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        }
    ]
    assert "discovery-rbac.yaml" not in by_template(helm, scope(watchNamespaces=["team-a"]))
    assert "discovery-rbac.yaml" not in by_template(helm, {"rbac": {"watchCRDs": False}})


# --- Deployment, Service, monitoring, policies ------------------------------------------------


def test_deployment_security_and_probes(helm: Helm) -> None:
    docs = helm.render()
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    container = manager_container(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "healthz"},
        "initialDelaySeconds": 15,
        "periodSeconds": 20,
    }
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/readyz", "port": "healthz"},
        "initialDelaySeconds": 5,
        "periodSeconds": 10,
    }
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "healthz": 8081,
        "metrics": 8443,
    }
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["image"] == "ghcr.io/lifecycle-controller/lifecycle-controller:0.1.0"
    template_annotations = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert template_annotations["kubectl.kubernetes.io/default-container"] == "manager"


def test_ports_follow_bind_addresses(helm: Helm) -> None:
    values = {
        "controllerManager": {"healthProbeBindAddress": "0.0.0.0:09090"},
        "metrics": {"bindAddress": "[::]:9443"},
    }
    ports = manager_container(helm.render(values))["ports"]
    assert {p["name"]: p["containerPort"] for p in ports} == {"healthz": 9090, "metrics": 9443}


def test_image_digest_wins_over_tag(helm: Helm) -> None:
    digest = "sha256:" + "a" * 64
    container = manager_container(helm.render({"image": {"digest": digest}}))
    assert container["image"] == f"ghcr.io/lifecycle-controller/lifecycle-controller@{digest}"


def test_scheduling_and_extras(helm: Helm) -> None:
    docs = helm.render(FULL_VALUES)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "lifecycle-test-priority"
    spread = pod["topologySpreadConstraints"][0]
    assert spread["labelSelector"] == {"matchLabels": {"app.kubernetes.io/instance": "rel"}}
    env = {e["name"]: e for e in manager_container(docs)["env"]}
    assert env["TZ"] == {"name": "TZ", "value": "UTC"}
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert labels["example.com/tier"] == "ops"


@pytest.mark.parametrize(("secure", "name"), [(True, "https"), (False, "http")])
def test_metrics_service_port_name_follows_scheme(helm: Helm, secure: bool, name: str) -> None:
    service = one(helm.render({"metrics": {"secure": secure}}), "Service")
    assert service["metadata"]["name"] == f"{FULLNAME}-metrics-service"
    assert service["spec"]["ports"] == [
        {"name": name, "port": 8443, "targetPort": "metrics", "protocol": "TCP"}
    ]


def test_service_monitor_uses_current_auth_fields(helm: Helm) -> None:
    docs = helm.render(FULL_VALUES)
    monitor = one(docs, "ServiceMonitor")
    endpoint = monitor["spec"]["endpoints"][0]
    assert "bearerTokenFile" not in endpoint
    assert "bearerTokenSecret" not in endpoint
    assert endpoint["scheme"] == "https"
    assert endpoint["port"] == "https"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": f"{FULLNAME}-metrics-scraper-token", "key": "token"},
    }
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [RELEASE_NAMESPACE]}
    secret = one(docs, "Secret", f"{FULLNAME}-metrics-scraper-token")
    assert secret["type"] == "kubernetes.io/service-account-token"
    binding = one(docs, "ClusterRoleBinding", f"{FULLNAME}-metrics-scraper")
    assert binding["roleRef"]["name"] == f"{FULLNAME}-metrics-reader"


def test_service_monitor_verifies_the_serving_certificate(helm: Helm) -> None:
    """Caught: the ServiceMonitor skipped TLS verification by default, so the scraper's token
    went to whoever answered at the Service's address. Skipping is now asked for; with a
    certificate Secret the scraper verifies against its ca.crt."""
    monitor: dict[str, Any] = {"enabled": True}
    failure = helm.render_failure({"metrics": {"serviceMonitor": monitor}})
    assert "the self-signed one cannot be verified" in failure, failure
    with_cert = {"metrics": {"certSecretName": "metrics-tls", "serviceMonitor": monitor}}
    endpoint = one(helm.render(with_cert), "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "metrics-tls", "key": "ca.crt"}},
        "serverName": f"{FULLNAME}-metrics-service.{RELEASE_NAMESPACE}.svc",
    }
    ca = {"configMap": {"name": "cluster-ca", "key": "ca.pem"}}
    given = {"metrics": {"serviceMonitor": {**monitor, "ca": ca, "serverName": "m.example"}}}
    endpoint = one(helm.render(given), "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["tlsConfig"] == {"ca": ca, "serverName": "m.example"}
    # In another namespace the certificate's Secret is out of the scraper's reach.
    elsewhere = {**with_cert["metrics"], "serviceMonitor": {**monitor, "namespace": "monitoring"}}
    assert "cannot be verified" in helm.render_failure({"metrics": elsewhere})


def test_service_monitor_plain_http(helm: Helm) -> None:
    values = {"metrics": {"secure": False, "serviceMonitor": {"enabled": True}}}
    docs = helm.render(values)
    endpoint = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "http"
    assert endpoint["port"] == "http"
    assert "authorization" not in endpoint
    assert not of_kind(docs, "Secret")


def test_network_policy_and_pdb(helm: Helm) -> None:
    docs = helm.render(FULL_VALUES)
    policy = one(docs, "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {
            "ports": [{"port": "metrics", "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"metrics": "enabled"}}}],
        }
    ]
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    minimum = {"podDisruptionBudget": {"enabled": True, "maxUnavailable": None, "minAvailable": 1}}
    assert one(helm.render(minimum), "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert not of_kind(helm.render(), "NetworkPolicy")
    assert not of_kind(helm.render(), "PodDisruptionBudget")


# The check of lifecycle policies (on by default) is tested in test_chart_policies.py.
POLICY_CHECK = f"{FULLNAME}-policies"


def annotation_policies(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in of_kind(docs, kind) if d["metadata"]["name"] != POLICY_CHECK]


def test_the_known_keys_are_the_controllers(helm: Helm) -> None:
    """One key table: the validation policy's known keys are KNOWN_KEYS of core/objects/keys.py, and
    its message lists the ones users write."""
    policy = one(
        helm.render({"admissionPolicy": {"enabled": True}}),
        "ValidatingAdmissionPolicy",
        f"{FULLNAME}-annotations",
    )
    unknown = policy["spec"]["validations"][0]
    listed = unknown["expression"].split(" in ", 1)[1].rstrip(")")
    assert json.loads(listed) == list(keys.KNOWN_KEYS)
    written = keys.KNOWN_KEYS[: keys.KNOWN_KEYS.index(keys.LAST_RESTART_TIMESTAMP)]
    assert ", ".join(k.removeprefix(keys.PREFIX) for k in written) in unknown["messageExpression"]


def test_security_checks_on_and_validation_off_by_default(helm: Helm) -> None:
    """The guards are on by default (docs/operator-guide.md#threat-model); the validation of
    values is opt-in."""
    docs = helm.render()
    names = [p["metadata"]["name"] for p in annotation_policies(docs, "ValidatingAdmissionPolicy")]
    assert names == [f"{FULLNAME}-annotation-guard", f"{FULLNAME}-controller-guard"]
    bindings = annotation_policies(docs, "ValidatingAdmissionPolicyBinding")
    assert [b["spec"]["validationActions"] for b in bindings] == [["Deny"], ["Deny"]]
    assert all("matchResources" not in b["spec"] for b in bindings)
    # The delegable writer role belongs to requireWriterRight, off by default.
    assert not [
        d for d in of_kind(docs, "ClusterRole") if d["metadata"]["name"].endswith("-writer")
    ]
    off = {"annotationGuard": {"enabled": False}, "controllerGuard": {"enabled": False}}
    assert not annotation_policies(helm.render(off), "ValidatingAdmissionPolicy")


def test_the_controller_guard_fences_subresources_and_the_protected_namespaces(
    helm: Helm,
) -> None:
    """Every resource and subresource is matched (but the policies' status, which the
    controller writes); the namespaces it never decides in, and those where only the objects'
    own annotations act, are the controller's own (docs/operator-guide.md#the-controller-guard)."""
    values = {
        "policyProtectedNamespaces": ["payments"],
        "controllerManager": {"scope": {"ignoreNamespaces": ["kube-system", "team-*"]}},
    }
    guard = one(helm.render(values), "ValidatingAdmissionPolicy", f"{FULLNAME}-controller-guard")
    spec = guard["spec"]
    assert spec["matchConstraints"]["resourceRules"][0]["resources"] == ["*/*"]
    excluded = [r["resources"] for r in spec["matchConstraints"]["excludeResourceRules"]]
    assert ["lifecyclepolicies/status", "clusterlifecyclepolicies/status"] in excluded
    expressions = [v["expression"] for v in spec["validations"]]
    # A glob is the controller's to match, not CEL's: only exact names are refused outright.
    assert '!(variables.actsIn in ["kube-system"])' in expressions
    protected = '["kube-system","kube-public","kube-node-lease","lc","payments"]'
    assert sum(protected in e for e in expressions) == 2  # deletes and restarts


def test_the_label_guard_is_opt_in_and_names_its_labels(helm: Helm) -> None:
    """docs/operator-guide.md#labels-are-requests: off by default; on, it needs the label keys
    and checks each one on every update of every resource and subresource."""
    names = [p["metadata"]["name"] for p in of_kind(helm.render(), "ValidatingAdmissionPolicy")]
    assert f"{FULLNAME}-label-guard" not in names
    failure = helm.render_failure({"labelGuard": {"enabled": True}})
    assert "labelGuard.labels is empty" in failure, failure
    docs = helm.render({"labelGuard": {"enabled": True, "labels": ["preview", "example.com/tier"]}})
    guard = one(docs, "ValidatingAdmissionPolicy", f"{FULLNAME}-label-guard")
    assert guard["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["UPDATE"],
         "resources": ["*/*"], "scope": "*"}
    ]  # fmt: skip
    changed = next(v for v in guard["spec"]["variables"] if v["name"] == "changed")
    assert changed["expression"].startswith('["preview","example.com/tier"].filter(')
    assert guard["spec"]["matchConditions"][0]["name"] == "not-exempt"
    binding = one(docs, "ValidatingAdmissionPolicyBinding", f"{FULLNAME}-label-guard")
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_notes_warn_that_a_wildcard_watch_list_reaches_the_guards_binding(helm: Helm) -> None:
    """Admission policies never apply to admission configuration objects: with wildcard RBAC a
    stolen token could delete the controller guard's binding."""
    wildcard = {"controllerManager": {"scope": {"watchResources": ["*"]}}}
    assert 'watchResources has "*"' in helm.notes(wildcard)
    assert 'watchResources has "*"' not in helm.notes()


@pytest.mark.parametrize("values", [{}, FULL_VALUES, NAMESPACED_VALUES])
def test_only_the_controller_may_write_the_policies_status(
    helm: Helm, values: dict[str, Any]
) -> None:
    """A policy's status holds its limit's window and its audit: whoever writes it resets
    both (docs/operator-guide.md#who-may-write-lifecycle-policies). The chart grants the
    status subresources to one role, bound to the controller's ServiceAccount alone."""
    docs = helm.render(values)
    status = {"lifecyclepolicies/status", "clusterlifecyclepolicies/status"}
    granting = [
        role["metadata"]["name"]
        for role in of_kind(docs, "ClusterRole") + of_kind(docs, "Role")
        for grant in role.get("rules") or ()
        if {"lifecycle.cezary.dev", "*"} & set(grant.get("apiGroups", ()))
        and (status | {"*", "*/status"}) & set(grant.get("resources", ()))
    ]
    assert granting == [f"{FULLNAME}-policy-role"]
    (binding,) = [
        b for b in of_kind(docs, "ClusterRoleBinding") if b["roleRef"]["name"] == granting[0]
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": FULLNAME, "namespace": RELEASE_NAMESPACE}
    ]


def test_admission_policies_exempt_the_controller(helm: Helm) -> None:
    values = {**FULL_VALUES, "annotationGuard": {"requireWriterRight": True}}
    docs = helm.render(values)
    policies = annotation_policies(docs, "ValidatingAdmissionPolicy")[:2]
    assert [p["metadata"]["name"] for p in policies] == [
        f"{FULLNAME}-annotations",
        f"{FULLNAME}-annotation-guard",
    ]
    username = f"system:serviceaccount:{RELEASE_NAMESPACE}:{FULLNAME}"
    for policy in policies:
        exempt = policy["spec"]["matchConditions"][0]
        assert exempt["name"] == "not-exempt"
        assert f'"{username}"' in exempt["expression"]
    bindings = annotation_policies(docs, "ValidatingAdmissionPolicyBinding")
    assert [b["spec"]["validationActions"] for b in bindings] == [["Deny"], ["Deny"], ["Deny"]]
    writer = one(docs, "ClusterRole", f"{FULLNAME}-annotation-writer")
    assert rules(writer) == [
        {"apiGroups": ["lifecycle.cezary.dev"], "resources": ["annotations"], "verbs": ["set"]}
    ]


def test_label_values_that_look_like_numbers_stay_strings(helm: Helm) -> None:
    """A selector value such as ``36686e12`` (random hex once made a test flaky) reaches
    the binding as a string: the API server refuses a number in ``matchLabels``."""
    selector = {"matchLabels": {"team/id": "36686e12", "shard": "0123"}}
    values = {
        "admissionPolicy": {"enabled": True, "namespaceSelector": selector},
        "annotationGuard": {"enabled": False},
        "controllerGuard": {"enabled": False},
    }
    docs = helm.render(values)
    (binding,) = annotation_policies(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["matchResources"]["namespaceSelector"] == selector


def test_notes_are_rendered(helm: Helm) -> None:
    notes = helm.notes()
    assert 'installed as release "rel" in namespace "lc"' in notes
    assert "lifecycle.cezary.dev/delete-after=10m" in notes
    namespaced = helm.notes(scope(watchNamespaces=["team-a"]))
    assert "kubectl create configmap lifecycle-demo -n team-a" in namespaced


def test_notes_in_dry_run_do_not_promise_a_deletion(helm: Helm) -> None:
    acting = helm.notes()
    assert "this ConfigMap is deleted about ten minutes after it is applied" in acting
    assert "DRY RUN" not in acting
    dry = helm.notes({"controllerManager": {"dryRun": True}})
    assert "DRY RUN" in dry
    assert "is deleted" not in dry
    assert "this ConfigMap is kept" in dry
    assert "DryRunDelete" in dry


@pytest.mark.parametrize(
    ("values", "namespace", "lease"),
    [
        ({}, RELEASE_NAMESPACE, FULLNAME),
        ({"leaderElection": {"namespace": "ops", "resourceName": "my-lease"}}, "ops", "my-lease"),
        # Without leader election the chart still passes the lease flags, for the breaker.
        ({"leaderElection": {"enabled": False}}, RELEASE_NAMESPACE, FULLNAME),
    ],
)
def test_notes_tell_how_to_read_and_reset_the_circuit_breaker(
    helm: Helm, values: dict[str, Any], namespace: str, lease: str
) -> None:
    breaker = {"breaker": {"maxActions": 40, "window": "30m"}}
    manager = {"controllerManager": {**values, **breaker}}
    notes = helm.notes(manager)
    flags = f"--leader-election-namespace {namespace} --leader-election-id {lease}"
    assert f"lifecycle-controller breaker status {flags}\n" in notes
    assert f"lifecycle-controller breaker reset {flags}\n" in notes
    assert f"ConfigMap {namespace}/{lease}-breaker" in notes
    assert "more than 40 deletions plus restarts fall within\n30m" in notes
    # The commands find the ConfigMap the controller is told to use.
    args = args_of(helm.render(manager))
    assert f"--leader-election-id={lease}" in args
    if namespace != RELEASE_NAMESPACE:
        assert f"--leader-election-namespace={namespace}" in args
    assert "breaker" not in helm.notes({"controllerManager": values})


# --- values.schema.json -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"replicaCount": "1"}, "/replicaCount"),
        ({"controllerManager": {"workers": "many"}}, "/controllerManager/workers"),
        ({"controllerManager": {"dryRun": "yes"}}, "/controllerManager/dryRun"),
        ({"controllerManager": {"logLevel": "verbose"}}, "/controllerManager/logLevel"),
        ({"controllerManager": {"maxDeleteTTL": "1w"}}, "/controllerManager/maxDeleteTTL"),
        (
            {"controllerManager": {"actionTiming": {"delete": {"catchUp": "later"}}}},
            "/controllerManager/actionTiming/delete/catchUp",
        ),
        ({"controllerManager": {"scope": {"watchResources": [1]}}}, "/controllerManager/scope"),
        ({"metrics": {"secure": "true"}}, "/metrics/secure"),
        ({"metrics": {"service": {"port": 70000}}}, "/metrics/service/port"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"extraArgs": "--workers=2"}, "/extraArgs"),
        ({"podAnnotations": {"a": 1}}, "/podAnnotations"),
        ({"admissionPolicy": {"validationActions": ["Block"]}}, "/admissionPolicy"),
        ({"unknownKey": True}, "unknownKey"),
    ],
)
def test_schema_rejects_wrong_types(helm: Helm, values: dict[str, Any], path: str) -> None:
    error = helm.render_failure(values)
    assert "lifecycle-controller:" in error
    assert path in error


# --- the operator guide documents every value ---------------------------------------------

# Values whose defaults are free-form objects, documented as one row.
OPAQUE = {
    "podSecurityContext",
    "containerSecurityContext",
    "resources",
    "networkPolicy.metricsFrom",
}


def value_paths(tree: dict[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in OPAQUE:
            paths += value_paths(value, f"{path}.")
        else:
            paths.append(path)
    return paths


def test_operator_guide_documents_every_value(helm: Helm) -> None:
    guide = (helm.chart.parents[2] / "docs" / "operator-guide.md").read_text()
    defaults = yaml.safe_load((helm.chart / "values.yaml").read_text())
    rows = [line for line in guide.splitlines() if line.startswith("| `")]
    missing = []
    for path in value_paths(defaults):
        parent, _, leaf = path.rpartition(".")
        documented = any(
            f"`{path}`" in row
            or (parent and f"`{parent}." in row and f"`.{leaf}`" in row)
            or (parent and f"`{parent}.{leaf}`" in row)
            for row in rows
        )
        if not documented:
            missing.append(path)
    assert not missing, f"values missing from docs/operator-guide.md: {missing}"


# --- namespace defaults (docs/annotations.md#namespace-defaults) ------------------------------


def test_namespace_defaults_read_every_namespace_with_cluster_rbac(helm: Helm) -> None:
    docs = by_template(helm)["namespace-defaults-rbac.yaml"]
    role = one(docs, "ClusterRole", f"{FULLNAME}-namespace-defaults-role")
    assert rules(role) == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}
    ]
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == f"{FULLNAME}-namespace-defaults-role"
    assert binding["subjects"][0]["namespace"] == RELEASE_NAMESPACE


def test_namespace_defaults_read_only_the_watched_namespaces_with_namespaced_rbac(
    helm: Helm,
) -> None:
    values = scope(watchNamespaces=["team-a", "team-b"], ignoreNamespaces=["team-b"])
    role = one(by_template(helm, values)["namespace-defaults-rbac.yaml"], "ClusterRole")
    assert rules(role) == [
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": ["team-a"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert "namespace-defaults-rbac.yaml" not in by_template(helm, {"rbac": {"create": False}})


def test_the_policy_default_limit_is_a_value_and_can_be_turned_off(helm: Helm) -> None:
    assert "--policy-default-limit=25/30m" in args_of(helm.render({"policyDefaultLimit": "25/30m"}))
    off = args_of(helm.render({"policyDefaultLimit": ""}))
    assert not any(arg.startswith("--policy-default-limit") for arg in off)
    assert "policyDefaultLimit" in helm.render_failure({"policyDefaultLimit": "lots"})
