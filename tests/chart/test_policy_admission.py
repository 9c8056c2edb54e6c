"""The chart's admission check of lifecycle policies, installed on the real API server.

What it must do: docs/operator-guide.md#admission-checks-of-lifecycle-policies. A policy makes
the controller delete or patch what it matches with the controller's rights, so its author
must hold that right on every resource it names, where it acts; and its lifecycle values must
follow the annotations' grammar (the verdicts are compared with the controller's own parser).

The check is bound by an object label of this module only (cluster policies have no namespace
to select them by), so the rest of the session is never affected. Requests come from users
with client certificates and RBAC of their own:

* dana may write LifecyclePolicies in her namespace (and ClusterLifecyclePolicies), delete
  ConfigMaps and patch (not delete) Deployments there, read Secrets but not delete them;
* erin may write ClusterLifecyclePolicies and delete ConfigMaps and patch Deployments in every
  namespace;
* frank may write ClusterLifecyclePolicies and delete or patch everything cluster-wide.

Nothing is stored: every create is a server-side dry run (admission runs all the same), except
the one policy the update checks need.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from lifecycle_controller.core.policy.in_force import policy_from_manifest
from lifecycle_controller.core.policy.model import Policy
from lifecycle_controller.devcluster import ApiResponse, ControlPlane
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from tests.chart.support import Helm, Identity, kubectl, select_objects, to_yaml_stream
from tests.chart.test_admission_policy import CRONS, DURATIONS, TIMESTAMPS
from tests.integration.policy_crds import install_policy_crds, policy_crd_manifests

pytestmark = pytest.mark.integration

LABEL = "lifecycle-test/policy-admission"
VAP_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
MERGE = "application/merge-patch+json"


def rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


WRITE_POLICIES = ["get", "list", "create", "update", "patch"]
NAMESPACED_POLICIES = rule(["lifecycle.cezary.dev"], ["lifecyclepolicies"], WRITE_POLICIES)
CLUSTER_POLICIES_RULE = rule(["lifecycle.cezary.dev"], ["clusterlifecyclepolicies"], WRITE_POLICIES)


@dataclass
class Env:
    plane: ControlPlane
    tag: str
    team: str  # dana's namespace
    dana: Identity
    erin: Identity
    frank: Identity
    names: dict[str, str]  # user → user name


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, helm: Helm) -> Iterator[Env]:
    tag = uuid.uuid4().hex[:8]
    install_policy_crds(control_plane)
    release = f"pa-{tag}"
    docs = select_objects(
        helm.render({}, release=release, namespace=release), {"matchLabels": {LABEL: tag}}
    )
    vap = [
        d for d in docs if d["kind"] in VAP_KINDS and d["metadata"]["name"].endswith("-policies")
    ]
    assert len(vap) == 2
    team = f"team-{tag}"
    control_plane.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team}},
        path=f"/api/v1/namespaces/{team}",
    )
    names = {user: f"{user}-{tag}" for user in ("dana", "erin", "frank")}
    dana = Identity(
        control_plane.user_kubeconfig(
            names["dana"],
            cluster_rules=[CLUSTER_POLICIES_RULE],
            namespaced_rules={
                team: [
                    NAMESPACED_POLICIES,
                    rule([""], ["configmaps"], ["get", "list", "delete"]),
                    rule([""], ["secrets"], ["get", "list"]),
                    rule(["apps"], ["deployments"], ["get", "list", "patch"]),
                ]
            },
        )
    )
    erin = Identity(
        control_plane.user_kubeconfig(
            names["erin"],
            cluster_rules=[
                CLUSTER_POLICIES_RULE,
                rule([""], ["configmaps"], ["get", "list", "delete"]),
                rule(["apps"], ["deployments"], ["get", "list", "patch"]),
            ],
        )
    )
    frank = Identity(
        control_plane.user_kubeconfig(
            names["frank"],
            cluster_rules=[CLUSTER_POLICIES_RULE, rule(["*"], ["*"], ["delete", "patch"])],
        )
    )
    admin = control_plane.admin_kubeconfig
    kubectl("apply", "-f", "-", kubeconfig=admin, stdin=to_yaml_stream(vap))
    env = Env(control_plane, tag, team, dana, erin, frank, names)
    deadline = time.monotonic() + 30
    while create(env, dana, "LifecyclePolicy", deletes("secrets")).status != 403:
        assert time.monotonic() < deadline, "the policy check was not enforced within 30s"
        time.sleep(0.2)
    yield env
    kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", kubeconfig=admin,
            stdin=to_yaml_stream(vap))  # fmt: skip
    control_plane.request("DELETE", f"/api/v1/namespaces/{team}")


def deletes(*resources: str, **lifecycle: str) -> dict[str, Any]:
    return {"resources": list(resources), "lifecycle": {"delete-after": "1h", **lifecycle}}


def restarts(*resources: str) -> dict[str, Any]:
    return {"resources": list(resources), "lifecycle": {"restart-every": "24h"}}


def manifest(env: Env, kind: str, spec: dict[str, Any], *, name: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name or f"p-{uuid.uuid4().hex[:8]}",
        "labels": {LABEL: env.tag},
    }
    if kind == "LifecyclePolicy":
        metadata["namespace"] = env.team
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    }


def create(
    env: Env, who: Identity | None, kind: str, spec: dict[str, Any], *, dry_run: bool = True
) -> ApiResponse:
    """Create as ``who`` (the control plane's admin when None)."""
    body = manifest(env, kind, spec)
    resource = POLICIES if kind == "LifecyclePolicy" else CLUSTER_POLICIES
    path = resource.collection_path(env.team) + ("?dryRun=All" if dry_run else "")
    if who is None:
        return env.plane.request("POST", path, body)
    return who.request("POST", path, body)


def denial(response: ApiResponse) -> str:
    message = str(response.body.get("message", ""))
    assert "denied request: " in message, response.body
    return message.split("denied request: ", 1)[1]


# --- no confused deputy ----------------------------------------------------------------------


def test_a_policy_deleting_what_its_author_may_not_delete_is_refused(env: Env) -> None:
    response = create(env, env.dana, "LifecyclePolicy", deletes("configmaps", "secrets"))
    assert response.status == 403, response.body
    assert denial(response) == (
        f"{env.names['dana']} may not delete secrets in namespace {env.team}: a LifecyclePolicy "
        "makes the controller delete what it matches, so its author must be allowed to delete "
        "that resource too"
    )


def test_a_policy_deleting_what_its_author_may_delete_is_accepted(env: Env) -> None:
    response = create(env, env.dana, "LifecyclePolicy", deletes("configmaps"))
    assert response.status == 201, response.body


def test_a_restart_needs_patch_and_a_deletion_needs_delete(env: Env) -> None:
    """dana may patch Deployments but not delete them."""
    assert create(env, env.dana, "LifecyclePolicy", restarts("deployments.apps")).status == 201
    response = create(env, env.dana, "LifecyclePolicy", deletes("deployments.apps"))
    assert response.status == 403, response.body
    assert denial(response).startswith(
        f"{env.names['dana']} may not delete deployments.apps in namespace {env.team}"
    )
    # No rights on StatefulSets at all: a restart of them is refused as a patch.
    response = create(env, env.dana, "LifecyclePolicy", restarts("statefulsets.apps"))
    assert denial(response).startswith(f"{env.names['dana']} may not patch statefulsets.apps")


def test_the_first_resource_refused_is_named(env: Env) -> None:
    spec = deletes("configmaps", "configmaps", "pods", "secrets")
    response = create(env, env.dana, "LifecyclePolicy", spec)
    assert denial(response).startswith(f"{env.names['dana']} may not delete pods in namespace")


def test_rights_in_a_namespace_do_not_cover_a_cluster_policy(env: Env) -> None:
    response = create(env, env.dana, "ClusterLifecyclePolicy", deletes("configmaps"))
    assert response.status == 403, response.body
    assert denial(response).startswith(
        f"{env.names['dana']} may not delete configmaps cluster-wide: a ClusterLifecyclePolicy "
        "makes the controller delete what it matches"
    )


def test_a_cluster_policy_needs_cluster_wide_rights(env: Env) -> None:
    assert create(env, env.erin, "ClusterLifecyclePolicy", deletes("configmaps")).status == 201
    assert (
        create(env, env.erin, "ClusterLifecyclePolicy", restarts("deployments.apps")).status == 201
    )
    response = create(env, env.erin, "ClusterLifecyclePolicy", deletes("configmaps", "secrets"))
    assert denial(response).startswith(f"{env.names['erin']} may not delete secrets cluster-wide")


@pytest.mark.parametrize("glob", ["*.apps", "deploy*.apps", "*"])
def test_globs_in_a_cluster_policy_need_rights_on_every_resource(env: Env, glob: str) -> None:
    response = create(env, env.erin, "ClusterLifecyclePolicy", restarts("deployments.apps", glob))
    assert response.status == 403, response.body
    assert denial(response) == (
        f"spec.resources {glob}: a glob can select resource types of any API group, so only who "
        "may patch every resource cluster-wide may use one; name the resources exactly, such "
        "as deployments.apps"
    )
    assert create(env, env.frank, "ClusterLifecyclePolicy", restarts(glob)).status == 201
    assert create(env, env.frank, "ClusterLifecyclePolicy", deletes(glob)).status == 201


def test_cluster_administrators_pass(env: Env) -> None:
    assert create(env, None, "ClusterLifecyclePolicy", deletes("secrets", "*")).status == 201
    assert create(env, None, "LifecyclePolicy", deletes("secrets")).status == 201


def test_only_spec_changes_are_checked(env: Env) -> None:
    """A policy an administrator wrote may be relabelled by dana, not changed to act on
    what she may not delete; her own policy may not be widened to it either."""
    stored = create(env, None, "LifecyclePolicy", deletes("secrets"), dry_run=False)
    assert stored.status == 201, stored.body
    path = POLICIES.object_path(env.team, stored.body["metadata"]["name"])
    relabel = {"metadata": {"labels": {"example.com/owner": "dana"}}}
    assert env.dana.request("PATCH", path, relabel, content_type=MERGE).status == 200
    edit = {"spec": {"lifecycle": {"delete-after": "2h"}}}
    response = env.dana.request("PATCH", path, edit, content_type=MERGE)
    assert response.status == 403, response.body
    assert "may not delete secrets" in denial(response)
    # The status subresource (what the controller writes) is not checked.
    status = {"status": {"matched": 0}}
    assert env.plane.request("PATCH", f"{path}/status", status, content_type=MERGE).status == 200

    own = create(env, env.dana, "LifecyclePolicy", deletes("configmaps"), dry_run=False)
    assert own.status == 201, own.body
    own_path = POLICIES.object_path(env.team, own.body["metadata"]["name"])
    widen = {"spec": {"resources": ["configmaps", "secrets"]}}
    response = env.dana.request("PATCH", own_path, widen, content_type=MERGE)
    assert response.status == 403, response.body
    for done in (path, own_path):
        env.plane.request("DELETE", done)


def test_the_checks_cover_every_entry_the_crds_allow(env: Env) -> None:
    """One authorization rule per entry: as many as spec.resources may hold."""
    for kind in ("LifecyclePolicy", "ClusterLifecyclePolicy"):
        schema = policy_crd_manifests()[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        most = schema["properties"]["spec"]["properties"]["resources"]["maxItems"]
        spec = deletes(*["configmaps"] * (most - 1), "secrets")
        response = create(env, env.dana if kind == "LifecyclePolicy" else env.erin, kind, spec)
        assert response.status == 403, (kind, response.body)
        assert "may not delete secrets" in denial(response)


# --- the lifecycle values, as the controller reads them -----------------------------------------


def controller_accepts(kind: str, spec: dict[str, Any]) -> bool:
    doc = {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "probe", "namespace": "team"},
        "spec": spec,
    }
    return isinstance(policy_from_manifest(doc), Policy)


def for_key(key: str, value: str) -> dict[str, Any]:
    """A policy that is valid but for ``key``'s value."""
    if key in ("delete-after", "delete-at"):
        return {"resources": ["configmaps"], "lifecycle": {key: value}}
    if key in ("restart-at", "restart-every", "restart-cron"):
        return {"resources": ["deployments.apps"], "lifecycle": {key: value}}
    if key == "cron-timezone":
        lifecycle = {"restart-cron": "0 3 * * *", key: value}
        return {"resources": ["deployments.apps"], "lifecycle": lifecycle}
    return {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h", key: value}}


def _cron_fields_have_values(value: str) -> bool:
    """A cron field of only commas has no value: the controller finds no occurrence, the check
    refuses it as syntax."""
    fields = value.split()
    return len(fields) != 5 or all(field.strip(",") for field in fields)


#: Values the check lets through and the controller refuses: whether a zone exists in the tz
#: database is the controller's to say.
CONTROLLER_ONLY = {
    ("cron-timezone", "Mars/Olympus"),
    ("maintenance-window", "Mon-Fri 01:00-05:00 Mars/Olympus"),
}
WINDOWS = [
    "Mon-Fri 01:00-05:00 Europe/Warsaw", "Sat-Sun 00:00-24:00 UTC, Mon-Fri 22:00-23:00 UTC",
    "Mon-Fri 1:00-05:00 UTC", "Mon-Fri 01:00-05:00", "mon-fri 01:00-05:00 UTC", "",
    "Mon-Fri 01:00-25:00 UTC", "Mon-Fri 01:00-05:00 Mars/Olympus",
]  # fmt: skip
VECTORS: list[tuple[str, str]] = (
    [("delete-after", v) for v in DURATIONS if len(v) < 200]
    + [("restart-every", v) for v in ("59s", "60s", "1m", "0m", "+1m", "1m0s", "", "2562047h")]
    + [("delete-at", v) for v in TIMESTAMPS]
    + [("restart-at", v) for v in [*TIMESTAMPS[:8], ""]]
    + [("restart-cron", v) for v in CRONS]
    + [("cron-timezone", v) for v in ("UTC", "Europe/Warsaw", "../etc/passwd", "", "Mars/Olympus")]
    + [("catch-up", v) for v in ("always", "never", "15m", "Always", "", "0s", "-15m", "1w")]
    + [("dry-run", v) for v in ("1", "t", "TRUE", "False", "", "yes", "tRUE", " true")]
    + [("warn-before", v) for v in ("15m", "0s", "000m", "", "1w", "-1m", "0")]
    + [("maintenance-window", v) for v in WINDOWS]
)  # fmt: skip


def test_lifecycle_values_get_the_controllers_verdict(env: Env) -> None:
    disagreements = []
    for key, value in VECTORS:
        spec = for_key(key, value)
        expected = controller_accepts("LifecyclePolicy", spec)
        if key == "restart-cron":
            expected = expected and _cron_fields_have_values(value)
        if (key, value) in CONTROLLER_ONLY:
            assert not expected, (key, value)
            expected = True
        response = create(env, None, "LifecyclePolicy", spec)
        assert response.status in (201, 422), (key, value, response.body)
        if (response.status == 201) != expected:
            disagreements.append((key, value, response.body.get("message")))
    assert not disagreements


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "delete-after",
            "1w",
            'spec.lifecycle.delete-after: invalid duration format "1w": expected a whole number '
            "and one unit out of s, m, h, d, for example 30m or 7d",
        ),
        ("restart-every", "59s", "spec.lifecycle.restart-every: duration must be at least 1m0s"),
        ("delete-at", "2026-10-10", 'spec.lifecycle.delete-at: invalid RFC 3339 timestamp "20'),
        ("restart-cron", "@daily", "spec.lifecycle.restart-cron: descriptors such as @daily"),
        (
            "restart-cron",
            "TZ=UTC 0 9 * * *",
            "spec.lifecycle.restart-cron: expected exactly 5 fields (minute hour day-of-month "
            "month day-of-week), found 6; set the zone with cron-timezone, not a TZ= prefix",
        ),
        ("catch-up", "sometimes", 'spec.lifecycle.catch-up: invalid catch-up policy "sometimes"'),
        ("dry-run", "yes", 'spec.lifecycle.dry-run: invalid value "yes": expected a boolean'),
        ("warn-before", "soon", 'spec.lifecycle.warn-before: invalid value "soon"'),
        ("maintenance-window", "nights", "spec.lifecycle.maintenance-window: invalid value"),
        ("cron-timezone", "../x", 'spec.lifecycle.cron-timezone: invalid time zone name "../x"'),
    ],
)
def test_invalid_values_are_refused_with_the_annotations_messages(
    env: Env, key: str, value: str, message: str
) -> None:
    response = create(env, env.dana, "LifecyclePolicy", for_key(key, value))
    assert response.status == 422, response.body
    assert denial(response).startswith(message)


def test_the_authorization_is_checked_before_the_values(env: Env) -> None:
    response = create(env, env.dana, "LifecyclePolicy", deletes("secrets", **{"catch-up": "x"}))
    assert response.status == 403
    assert "may not delete secrets" in denial(response)


def test_policies_outside_the_binding_are_not_checked(env: Env) -> None:
    body = manifest(env, "LifecyclePolicy", deletes("secrets"))
    body["metadata"]["labels"] = {}
    path = POLICIES.collection_path(env.team) + "?dryRun=All"
    assert env.dana.request("POST", path, body).status == 201


# --- enforce ---------------------------------------------------------------------------------


def test_an_enforced_policy_needs_the_enforce_verb(env: Env) -> None:
    """Caught: nothing stopped a ClusterLifecyclePolicy author from enforcing it, which wins
    over every namespace's own policies, the objects' own annotations and exempt."""
    enforced = {**deletes("configmaps"), "enforce": True}
    response = create(env, env.frank, "ClusterLifecyclePolicy", enforced)
    assert response.status == 403, response.body
    assert denial(response).startswith(
        f"{env.names['frank']} may not enforce ClusterLifecyclePolicy "
    )
    assert create(env, env.frank, "ClusterLifecyclePolicy", deletes("configmaps")).status == 201
    name = f"gail-{env.tag}"
    gail = Identity(
        env.plane.user_kubeconfig(
            name,
            cluster_rules=[
                CLUSTER_POLICIES_RULE,
                rule(["lifecycle.cezary.dev"], ["clusterlifecyclepolicies"], ["enforce"]),
                rule([""], ["configmaps"], ["delete"]),
            ],
        )
    )
    deadline = time.monotonic() + 30
    while (response := create(env, gail, "ClusterLifecyclePolicy", enforced)).status != 201:
        assert time.monotonic() < deadline, response.body  # RBAC reaches the authorizer
        time.sleep(0.2)


@pytest.mark.parametrize("window", ["1h", "20s", "7d", "0s", "1.5h", "1w", "-1h", "999999999d"])
def test_a_limit_window_gets_the_controllers_verdict(env: Env, window: str) -> None:
    """The CRD schema and the admission check refuse exactly the windows the controller
    would call invalid (docs/policies.md#limit)."""
    spec = {**deletes("configmaps"), "limit": {"actions": 5, "window": window}}
    expected = controller_accepts("LifecyclePolicy", spec)
    response = create(env, env.dana, "LifecyclePolicy", spec)
    assert response.status == (201 if expected else 422), (window, response.body)


def test_a_limit_needs_at_least_one_action(env: Env) -> None:
    spec = {**deletes("configmaps"), "limit": {"actions": 0, "window": "1h"}}
    assert not controller_accepts("LifecyclePolicy", spec)
    response = create(env, env.dana, "LifecyclePolicy", spec)
    assert response.status == 422, response.body
