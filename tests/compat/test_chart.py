"""What the chart installs into the API server, on the release under test: its CRDs (their
schemas and CEL rules are compiled by that release's CEL library) and its
ValidatingAdmissionPolicies (one refusal, one acceptance), skipped with the reason where the
release does not serve ``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicies."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from lifecycle_controller.devcluster import ControlPlane
from tests.chart.support import Helm, kubectl, to_yaml_stream
from tests.integration.keys import DELETE_AFTER
from tests.integration.policy_crds import install_policy_crds, policy_crd_manifests
from tests.integration.support import configmap

POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
VAPS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"


def test_the_chart_crds_are_accepted_and_served(control_plane: ControlPlane) -> None:
    install_policy_crds(control_plane)
    for manifest in policy_crd_manifests().values():
        name = manifest["metadata"]["name"]
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        crd = control_plane.request("GET", path).body
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", crd["status"]
        assert conditions.get("NonStructuralSchema", "False") == "False", crd["status"]


def _serves_admission_policies(plane: ControlPlane) -> bool:
    response = plane.request("GET", "/apis/admissionregistration.k8s.io/v1")
    resources = response.body.get("resources", []) if response.status == 200 else []
    return any(r["name"] == "validatingadmissionpolicies" for r in resources)


def _until(check: Callable[[], bool], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_the_chart_admission_policy_refuses_and_accepts(
    control_plane: ControlPlane, helm: Helm
) -> None:
    if not _serves_admission_policies(control_plane):
        pytest.skip("admissionregistration.k8s.io/v1 serves no validatingadmissionpolicies")
    tag = uuid.uuid4().hex[:8]
    selector = {"matchLabels": {"lifecycle-compat/validate": tag}}
    # Every policy the chart can install, so the release compiles all of the chart's CEL; the
    # ones that are not exercised here match no object in the session.
    nothing = {"matchLabels": {"lifecycle-compat/none": tag}}
    values = {
        "admissionPolicy": {"enabled": True, "namespaceSelector": selector},
        "annotationGuard": {"enabled": True, "namespaceSelector": nothing},
        "policyAdmission": {"enabled": True, "namespaceSelector": nothing},
        "controllerGuard": {"enabled": True},
        "labelGuard": {"enabled": True, "labels": ["lifecycle-compat/none"]},
    }
    docs = helm.render(values, release=f"compat-{tag}", namespace=f"compat-{tag}")
    policies = [d for d in docs if d["kind"] in POLICY_KINDS]
    # The chart has no object selectors: the bindings get one here, so the cluster policies'
    # check matches nothing else in the session.
    for binding in (d for d in policies if d["kind"] == POLICY_KINDS[1]):
        if binding["spec"]["policyName"] != f"compat-{tag}-lifecycle-controller-annotations":
            binding["spec"].setdefault("matchResources", {})["objectSelector"] = nothing
    assert len([d for d in policies if d["kind"] == POLICY_KINDS[0]]) == 5
    namespace = f"validated-{tag}"
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"lifecycle-compat/validate": tag}},
        },
        path=f"/api/v1/namespaces/{namespace}",
    )
    stream = to_yaml_stream(policies)
    kubectl("apply", "-f", "-", kubeconfig=control_plane.admin_kubeconfig, stdin=stream)
    try:
        for policy in policies:
            if policy["kind"] == POLICY_KINDS[0]:
                name = policy["metadata"]["name"]
                assert control_plane.request("GET", f"{VAPS}/{name}").status == 200, name
        path = f"/api/v1/namespaces/{namespace}/configmaps?dryRun=All"
        bad = configmap("probe", **{DELETE_AFTER: "soon"})
        good = configmap("probe", **{DELETE_AFTER: "90m"})
        _until(lambda: control_plane.request("POST", path, bad).status == 422, "the refusal")
        refused = control_plane.request("POST", path, bad)
        assert "denied request" in str(refused.body.get("message")), refused.body
        accepted = control_plane.request("POST", path, good)
        assert accepted.status == 201, accepted.body
    finally:
        kubectl(
            "delete", "-f", "-", "--ignore-not-found", "--wait=false",
            kubeconfig=control_plane.admin_kubeconfig, stdin=stream,
        )  # fmt: skip
        control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")
