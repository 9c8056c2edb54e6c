"""The chart against the real API server: server-side dry-run, ``helm install``, and the RBAC
the chart generates, checked from the chart's own ServiceAccount.

There is no kubelet or scheduler in the local control plane, so the controller never runs
here: the image cannot start and its Pods stay Pending. That is enough to show that every
object is accepted by the API server and that the install is complete. The admission
policies are bound to a label no namespace carries, so they cannot affect other tests.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from tests.chart.support import (
    FULL_VALUES,
    NAMESPACED_VALUES,
    Doc,
    Helm,
    apply_chart_rbac,
    can_i,
    ensure_namespaces,
    kubectl,
    one,
    to_yaml_stream,
)

pytestmark = pytest.mark.integration

SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
            "plural": "servicemonitors",
            "singular": "servicemonitor",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "lifecycle-test-priority"},
    "value": 1000,
}


def unbound_full_values() -> dict[str, Any]:
    """FULL_VALUES with the admission policies bound to a label nothing carries (the check of
    lifecycle policies by an object label: cluster policies have no namespace)."""
    values = copy.deepcopy(FULL_VALUES)
    selector = {"matchLabels": {"lifecycle-test/never": "matches"}}
    values["admissionPolicy"]["namespaceSelector"] = selector
    values["annotationGuard"]["namespaceSelector"] = selector
    # No object selector in the chart: the checks that a namespace cannot bind (cluster
    # policies, cluster-scoped objects, the controller's own writes) only audit here.
    values["policyAdmission"] = {"validationActions": ["Audit"]}
    values["controllerGuard"] = {"validationActions": ["Audit"]}
    # A namespace selector does not limit cluster-scoped objects other than Namespaces.
    values["annotationGuard"]["validationActions"] = ["Audit"]
    return values


@pytest.fixture(scope="module")
def cluster_prerequisites(control_plane: ControlPlane) -> None:
    """The ServiceMonitor CRD (Prometheus Operator) and the PriorityClass FULL_VALUES name."""
    control_plane.apply(
        SERVICE_MONITOR_CRD,
        path="/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
        "servicemonitors.monitoring.coreos.com",
    )
    control_plane.apply(
        PRIORITY_CLASS, path="/apis/scheduling.k8s.io/v1/priorityclasses/lifecycle-test-priority"
    )
    kubectl(
        "wait", "--for=condition=Established", "--timeout=30s",
        "crd/servicemonitors.monitoring.coreos.com",
        kubeconfig=control_plane.admin_kubeconfig,
    )  # fmt: skip


def namespaces_of(docs: list[Doc]) -> set[str]:
    return {doc["metadata"]["namespace"] for doc in docs if "namespace" in doc["metadata"]}


@pytest.mark.usefixtures("cluster_prerequisites")
@pytest.mark.parametrize(
    "values",
    [{}, NAMESPACED_VALUES, "full"],
    ids=["default", "namespaced", "full"],
)
def test_server_side_dry_run(control_plane: ControlPlane, helm: Helm, values: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    release, namespace = f"dry-{tag}", f"dry-{tag}"
    if values == "full":
        values = unbound_full_values()
    docs = helm.render(values, release=release, namespace=namespace)
    ensure_namespaces(control_plane, sorted(namespaces_of(docs) | {namespace}))
    result = kubectl(
        "apply", "--dry-run=server", "-f", "-",
        kubeconfig=control_plane.admin_kubeconfig, stdin=to_yaml_stream(docs),
    )  # fmt: skip
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(docs), result.stdout
    assert all(line.endswith("(server dry run)") for line in lines), result.stdout


@pytest.mark.usefixtures("cluster_prerequisites")
def test_helm_install_creates_every_object(control_plane: ControlPlane, helm: Helm) -> None:
    tag = uuid.uuid4().hex[:8]
    release, namespace = f"inst-{tag}", f"inst-{tag}"
    values = unbound_full_values()
    docs = helm.render(values, release=release, namespace=namespace)
    admin = control_plane.admin_kubeconfig
    helm.run(
        "install", release, str(helm.chart), "--namespace", namespace, "--create-namespace",
        values=values, kubeconfig=admin,
    )  # fmt: skip
    try:
        for doc in docs:
            kind, name = doc["kind"], doc["metadata"]["name"]
            scope = ["-n", doc["metadata"]["namespace"]] if "namespace" in doc["metadata"] else []
            got = kubectl("get", f"{kind}/{name}", *scope, "-o", "name", kubeconfig=admin)
            assert got.stdout.strip(), (kind, name)
        deployment = one(docs, "Deployment")
        assert deployment["spec"]["replicas"] == 2
        status = helm.run("status", release, "--namespace", namespace, kubeconfig=admin)
        assert "STATUS: deployed" in status.stdout
        assert "lifecycle.cezary.dev/delete-after=10m" in status.stdout  # NOTES are shown
        pods = kubectl(
            "wait", "pods", "-n", namespace, f"-l=app.kubernetes.io/instance={release}",
            "--for=jsonpath={.status.phase}=Pending", "--timeout=30s", kubeconfig=admin,
        )  # fmt: skip
        assert pods.stdout.count("condition met") == 2, pods.stdout
    finally:
        helm.run("uninstall", release, "--namespace", namespace, kubeconfig=admin)
        control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")


def test_chart_rbac_default_values(control_plane: ControlPlane, helm: Helm) -> None:
    """What the default RBAC lets the controller's ServiceAccount do, and what not."""
    tag = uuid.uuid4().hex[:8]
    release, namespace = f"rbac-{tag}", f"rbac-{tag}"
    sa = apply_chart_rbac(control_plane, helm, release=release, namespace=namespace)
    for verb in ("get", "list", "watch", "patch", "delete"):
        assert can_i(sa, verb, "deployments.apps")
        assert can_i(sa, verb, "configmaps", namespace="default")
    # Not in the default watch list (docs/operator-guide.md#upgrading): added knowingly.
    assert not can_i(sa, "delete", "namespaces")
    assert not can_i(sa, "delete", "persistentvolumes")
    assert not can_i(sa, "update", "deployments.apps")  # we only patch
    assert not can_i(sa, "create", "deployments.apps")
    assert not can_i(sa, "get", "secrets")
    assert not can_i(sa, "get", "nodes")
    assert not can_i(sa, "get", "clusterroles.rbac.authorization.k8s.io")
    for group in ("", "events.k8s.io"):
        resource = "events" if not group else f"events.{group}"
        assert can_i(sa, "create", resource, namespace="default")
        assert can_i(sa, "patch", resource, namespace="default")
    for verb in ("get", "create", "update"):
        assert can_i(sa, verb, "leases.coordination.k8s.io", namespace=namespace)
    assert not can_i(sa, "get", "leases.coordination.k8s.io", namespace="default")
    assert can_i(sa, "watch", "customresourcedefinitions.apiextensions.k8s.io")
    assert not can_i(sa, "delete", "customresourcedefinitions.apiextensions.k8s.io")
    assert can_i(sa, "create", "tokenreviews.authentication.k8s.io")
    assert can_i(sa, "create", "subjectaccessreviews.authorization.k8s.io")


def test_chart_rbac_namespaced_values(control_plane: ControlPlane, helm: Helm) -> None:
    """Reference test 147 from the ServiceAccount's side: Roles per namespace, Namespace objects
    limited by name, Events about them in default, nothing outside the allowed namespaces."""
    tag = uuid.uuid4().hex[:8]
    release, namespace = f"nsr-{tag}", f"nsr-{tag}"
    allowed, other, ignored = f"a-{tag}", f"b-{tag}", f"i-{tag}"
    values = {
        "controllerManager": {
            "scope": {
                "watchResources": ["configmaps", "secrets", "namespaces"],
                "ignoreResources": ["secrets"],
                "watchNamespaces": [allowed, other, ignored],
                "ignoreNamespaces": [ignored],
            }
        }
    }
    ensure_namespaces(control_plane, [allowed, other, ignored])
    sa = apply_chart_rbac(control_plane, helm, values, release=release, namespace=namespace)
    for ns in (allowed, other):
        assert can_i(sa, "delete", "configmaps", namespace=ns)
        assert can_i(sa, "watch", "configmaps", namespace=ns)
        assert can_i(sa, "create", "events.events.k8s.io", namespace=ns)
        assert not can_i(sa, "get", "secrets", namespace=ns)
        assert can_i(sa, "delete", f"namespaces/{ns}")
    assert not can_i(sa, "delete", "configmaps", namespace=ignored)
    assert not can_i(sa, "list", "configmaps", namespace=namespace)
    assert not can_i(sa, "list", "configmaps")  # not cluster-wide
    assert not can_i(sa, "delete", f"namespaces/{ignored}")
    assert not can_i(sa, "delete", "namespaces/default")
    assert can_i(sa, "watch", "namespaces")
    assert can_i(sa, "create", "events.events.k8s.io", namespace="default")
    assert not can_i(sa, "watch", "customresourcedefinitions.apiextensions.k8s.io")
    forbidden = kubectl("get", "configmaps", "-n", ignored, kubeconfig=sa, check=False)
    assert forbidden.returncode != 0
    assert "Forbidden" in forbidden.stderr
