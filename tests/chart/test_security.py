"""Nobody gets more through the controller than they already have.

What the checks must do: docs/operator-guide.md#threat-model.

The controller deletes and patches with its own rights, on behalf of whoever wrote an
annotation or a policy: a deputy. Each test here closes one path to a confused deputy, on the
real API server, with the chart's admission policies as it renders them by default (plus the
opt-in validation policy and label guard) and users with client certificates and RBAC of their own:

* pat may read and patch ConfigMaps in the team namespace and Namespaces cluster-wide, and
  delete nothing;
* dee may also delete ConfigMaps in the team namespace;
* nina holds a Role in her own namespace that grants delete and patch on Namespaces (RBAC
  lets that Role act on the Namespace object of the same name);
* sam may only update the status subresource of Namespaces and of Deployments in the team
  namespace;
* a ServiceAccount of kube-system that is not one of the built-in controllers may patch
  ConfigMaps in the team namespace.

The policies' bindings get an object selector on a label of this module (the chart has none:
see test_the_checked_user_cannot_switch_the_check_off), so the rest of the session is never
affected. Every docstring says what the test caught on the chart before these checks.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from lifecycle_controller.core.decision.patches import next_restart_marker, restart_patch
from lifecycle_controller.core.objects import keys
from lifecycle_controller.devcluster import ApiResponse, ControlPlane
from lifecycle_controller.kube.resources import POLICIES
from tests.chart.support import (
    FULLNAME,
    RELEASE,
    RELEASE_NAMESPACE,
    Helm,
    Identity,
    apply_chart_rbac,
    can_i,
    kubectl,
    one,
    select_objects,
    to_yaml_stream,
)
from tests.integration.policy_crds import install_policy_crds
from tests.integration.processes import ProcessLauncher, launcher
from tests.integration.support import eventually

__all__ = ["launcher"]

pytestmark = pytest.mark.integration

LABEL = "lifecycle-test/security"
VAP_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
MERGE = "application/merge-patch+json"
PAST = "2020-01-01T00:00:00Z"
CONFIGMAPS = "/api/v1/namespaces/{}/configmaps"


def rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


@dataclass
class Env:
    plane: ControlPlane
    tag: str
    team: str
    release: str
    pat: Identity
    dee: Identity
    nina: Identity
    nina_namespace: str
    sam: Identity
    intruder: Identity  # a kube-system ServiceAccount that copies nothing
    controller: Identity  # the chart's ServiceAccount, with the chart's RBAC
    policies: list[dict[str, Any]]


def namespace_manifest(name: str, tag: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {LABEL: tag}},
    }


def configmap(name: str, tag: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {LABEL: tag}, "annotations": annotations},
    }


def deployment(name: str, tag: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {LABEL: tag}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


#: The label a deletion policy of the threat model selects on (the label guard's list).
SELECTED = "preview"


def rendered_policies(helm: Helm, release: str, tag: str) -> list[dict[str, Any]]:
    """Every admission policy the chart ships by default, plus the opt-in validation and the
    opt-in label guard."""
    values = {
        "admissionPolicy": {"enabled": True},
        "labelGuard": {"enabled": True, "labels": [SELECTED]},
    }
    docs = helm.render(values, release=release, namespace=release)
    policies = [d for d in docs if d["kind"] in VAP_KINDS]
    return select_objects(policies, {"matchLabels": {LABEL: tag}})


def _until(check: Callable[[], bool], what: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, helm: Helm) -> Iterator[Env]:
    tag = uuid.uuid4().hex[:8]
    team, nina_namespace, release = f"sec-{tag}", f"nina-{tag}", f"secrel-{tag}"
    for name in (team, nina_namespace):
        control_plane.apply(namespace_manifest(name, tag), path=f"/api/v1/namespaces/{name}")
    read_patch = ["get", "list", "patch"]
    pat = Identity(
        control_plane.user_kubeconfig(
            f"pat-{tag}",
            cluster_rules=[rule([""], ["namespaces"], read_patch)],
            namespaced_rules={team: [rule([""], ["configmaps"], ["create", *read_patch])]},
        )
    )
    dee = Identity(
        control_plane.user_kubeconfig(
            f"dee-{tag}",
            namespaced_rules={
                team: [rule([""], ["configmaps"], ["create", "delete", *read_patch])]
            },
        )
    )
    nina = Identity(
        control_plane.user_kubeconfig(
            f"nina-{tag}",
            namespaced_rules={
                nina_namespace: [rule([""], ["namespaces"], ["delete", *read_patch])]
            },
        )
    )
    sam = Identity(
        control_plane.user_kubeconfig(
            f"sam-{tag}",
            cluster_rules=[
                rule([""], ["namespaces"], ["get"]),
                rule([""], ["namespaces/status"], ["update"]),
            ],
            namespaced_rules={
                team: [
                    rule(["apps"], ["deployments"], ["get"]),
                    rule(["apps"], ["deployments/status"], ["update"]),
                ]
            },
        )
    )
    intruder_name = f"intruder-{tag}"
    intruder_kubeconfig = control_plane.service_account_kubeconfig("kube-system", intruder_name)
    control_plane.grant(
        {"kind": "ServiceAccount", "name": intruder_name, "namespace": "kube-system"},
        name=f"devcluster:{intruder_name}",
        namespaced_rules={team: [rule([""], ["configmaps"], read_patch)]},
    )
    intruder = Identity(intruder_kubeconfig)
    values = {
        "controllerManager": {"scope": {"watchResources": ["configmaps", "deployments.apps"]}}
    }
    controller = Identity(
        apply_chart_rbac(control_plane, helm, values, release=release, namespace=release)
    )
    policies = rendered_policies(helm, release, tag)
    admin = control_plane.admin_kubeconfig
    kubectl("apply", "-f", "-", kubeconfig=admin, stdin=to_yaml_stream(policies))
    env = Env(
        control_plane, tag, team, release, pat, dee, nina, nina_namespace, sam, intruder,
        controller, policies,
    )  # fmt: skip
    # Each policy is enforced once its probe is refused (a policy takes effect a moment after
    # it is stored).
    probe = configmap(f"probe-{tag}", tag, **{keys.DELETE_AFTER: "1h"})
    _until(
        lambda: pat.request("POST", CONFIGMAPS.format(team) + "?dryRun=All", probe).status == 403,
        "the annotation guard to be enforced",
    )
    invalid = configmap(f"probe-{tag}", tag, **{keys.DELETE_AFTER: "soon"})
    _until(
        lambda: dee.request("POST", CONFIGMAPS.format(team) + "?dryRun=All", invalid).status == 422,
        "the validation policy to be enforced",
    )
    target = env.plane.request("POST", CONFIGMAPS.format(team), configmap(f"probe-{tag}", tag))
    assert target.status == 201, target.body

    def controller_refused() -> bool:
        # A new value each time: a patch that changes nothing is no change to refuse.
        label = {"metadata": {"labels": {"probe": uuid.uuid4().hex}}}
        path = f"{CONFIGMAPS.format(team)}/probe-{tag}"
        return controller.request("PATCH", path, label, content_type=MERGE).status == 403

    _until(controller_refused, "the controller guard to be enforced")
    yield env
    kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", kubeconfig=admin,
            stdin=to_yaml_stream(policies))  # fmt: skip
    for name in (team, nina_namespace, release):
        control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


def stored_configmap(env: Env, name: str, **annotations: str) -> str:
    """Create a ConfigMap as the admin; return its path."""
    response = env.plane.request(
        "POST", CONFIGMAPS.format(env.team), configmap(name, env.tag, **annotations)
    )
    assert response.status == 201, response.body
    return f"{CONFIGMAPS.format(env.team)}/{name}"


def annotate(who: Identity, path: str, **annotations: str | None) -> ApiResponse:
    return who.request(
        "PATCH", path, {"metadata": {"annotations": annotations}}, content_type=MERGE
    )


def put_status(plane: ControlPlane, who: Identity, path: str, key: str, value: str) -> ApiResponse:
    """PUT ``path``/status as ``who`` with one annotation added, again after a conflict (the
    built-in controllers write these objects' status too)."""
    deadline = time.monotonic() + 60
    while True:
        body = plane.request("GET", path).body
        body["metadata"].setdefault("annotations", {})[key] = value
        response = who.request("PUT", f"{path}/status", body)
        if response.status != 409 or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def denial(response: ApiResponse) -> str:
    message = str(response.body.get("message", ""))
    assert "denied request: " in message, response.body
    return message.split("denied request: ", 1)[1]


# --- 1. setting a deletion is deleting ------------------------------------------------------


def test_setting_a_deletion_needs_the_right_to_delete_the_object(env: Env) -> None:
    """Caught: with the chart's defaults (no guard) pat, who may patch but not delete, had
    the controller delete a ConfigMap, and a whole Namespace, by annotating it."""
    path = stored_configmap(env, f"victim-{env.tag}")
    response = annotate(env.pat, path, **{keys.DELETE_AFTER: "1m"})
    assert response.status == 403, response.body
    assert denial(response) == (
        f"pat-{env.tag} may not set, change or remove {keys.DELETE_AFTER} on configmaps "
        f"victim-{env.tag}: that asks the controller to delete it, so the requester must be "
        f"allowed to delete it in namespace {env.team}"
    )
    assert annotate(env.pat, path, **{keys.DELETE_AT: "2030-01-01T00:00:00Z"}).status == 403
    # What he may do is still allowed: other annotations, and cancelling nothing.
    assert annotate(env.pat, path, **{"example.com/note": "x"}).status == 200
    # dee may delete it, so she may schedule it.
    assert annotate(env.dee, path, **{keys.DELETE_AFTER: "1h"}).status == 200
    # Tuning a scheduled deletion is deciding about it; cancelling it asks for nothing.
    assert annotate(env.pat, path, **{keys.DRY_RUN: "false"}).status == 403
    assert annotate(env.pat, path, **{keys.DELETE_AFTER: None}).status == 200

    namespace_path = f"/api/v1/namespaces/{env.team}"
    response = annotate(env.pat, namespace_path, **{keys.DELETE_AFTER: "1m"})
    assert response.status == 403, response.body
    assert "asks the controller to delete it" in denial(response)
    assert keys.DELETE_AFTER not in (
        env.plane.request("GET", namespace_path).body["metadata"].get("annotations") or {}
    )


def test_a_restart_needs_the_right_to_patch_the_workload(env: Env) -> None:
    """Caught: restart-* keys were not tied to any right on the object. sam may read the
    Deployment and write its status, not patch it."""
    name = f"web-{env.tag}"
    created = env.plane.request(
        "POST", f"/apis/apps/v1/namespaces/{env.team}/deployments", deployment(name, env.tag)
    )
    assert created.status == 201, created.body
    path = f"/apis/apps/v1/namespaces/{env.team}/deployments/{name}"
    response = put_status(env.plane, env.sam, path, keys.RESTART_EVERY, "24h")
    assert response.status == 403, response.body
    assert "asks the controller to patch it" in denial(response)


def test_opting_out_of_a_cleanup_needs_the_right_to_delete(env: Env) -> None:
    """Caught: exempt was neither guarded nor known to the validation policy, which refused
    it as a typo even for a user allowed to delete the object (sibling issue #31)."""
    path = stored_configmap(env, f"keep-{env.tag}")
    response = annotate(env.pat, path, **{keys.EXEMPT: "true"})
    assert response.status == 403, response.body
    assert denial(response).startswith(f"pat-{env.tag} may not set, change or remove {keys.EXEMPT}")
    accepted = annotate(env.dee, path, **{keys.EXEMPT: "true"})
    assert accepted.status == 200, accepted.body
    # Removing the opt-out is a decision about deletion too.
    assert annotate(env.pat, path, **{keys.EXEMPT: None}).status == 403
    assert annotate(env.dee, path, **{keys.EXEMPT: None}).status == 200


def test_a_namespace_is_checked_with_cluster_wide_rights(env: Env) -> None:
    """Caught (once the guard checked the object): a Namespace's request namespace is its own
    name, so a Role inside a namespace granting delete on namespaces would have let nina have
    the controller delete the Namespace and everything in it."""
    path = f"/api/v1/namespaces/{env.nina_namespace}"
    assert annotate(env.nina, path, **{"example.com/note": "x"}).status == 200
    response = annotate(env.nina, path, **{keys.DELETE_AFTER: "1m"})
    assert response.status == 403, response.body
    assert denial(response).endswith("allowed to delete it")


def test_a_restart_key_does_not_lower_the_right_another_key_needs(env: Env) -> None:
    """Caught: when a change carried a restart-* key the guard checked "patch" for every key
    of it, so rex, who may patch Deployments but not delete them, set restart-every and
    removed the dry-run an administrator had put on a Deployment under a deletion policy in
    one merge patch (the policy would then delete it). Each key now needs its own right."""
    rex = Identity(
        env.plane.user_kubeconfig(
            f"rex-{env.tag}",
            namespaced_rules={
                env.team: [rule(["apps"], ["deployments"], ["get", "list", "patch"])]
            },
        )
    )
    name = f"held-{env.tag}"
    manifest = deployment(name, env.tag)
    manifest["metadata"]["annotations"] = {keys.DRY_RUN: "true"}
    created = env.plane.request(
        "POST", f"/apis/apps/v1/namespaces/{env.team}/deployments", manifest
    )
    assert created.status == 201, created.body
    path = f"/apis/apps/v1/namespaces/{env.team}/deployments/{name}"
    lowered = annotate(rex, path, **{keys.RESTART_EVERY: "106751d", keys.DRY_RUN: None})
    assert lowered.status == 403, lowered.body
    assert denial(lowered) == (
        f"rex-{env.tag} may not set, change or remove {keys.DRY_RUN} on deployments {name}: "
        f"that asks the controller to delete it, so the requester must be allowed to delete "
        f"it in namespace {env.team}"
    )
    stored = env.plane.request("GET", path).body["metadata"]["annotations"]
    assert stored.get(keys.DRY_RUN) == "true"
    # Every key that steers a deletion needs delete, next to a restart or not.
    for key, value in (
        (keys.CATCH_UP, "always"),
        (keys.MAINTENANCE_WINDOW, "Mon-Sun 00:00-24:00 UTC"),
        (keys.WARN_BEFORE, "0s"),
        (keys.EXEMPT, "true"),
    ):
        response = annotate(rex, path, **{keys.RESTART_EVERY: "24h", key: value})
        assert response.status == 403, (key, response.body)
    # A restart alone, with the keys that only shape it, is his to ask for.
    restart = {keys.RESTART_CRON: "0 3 * * *", keys.CRON_TIMEZONE: "Europe/Warsaw"}
    accepted = annotate(rex, path, **restart)
    assert accepted.status == 200, accepted.body
    # Next to a deletion, even a restart's key is a decision about it: reference-point
    # moves the object's own delete-after.
    doomed = deployment(f"doomed-{env.tag}", env.tag)
    doomed["metadata"]["annotations"] = {keys.DELETE_AFTER: "30d"}
    created = env.plane.request("POST", f"/apis/apps/v1/namespaces/{env.team}/deployments", doomed)
    assert created.status == 201, created.body
    doomed_path = f"/apis/apps/v1/namespaces/{env.team}/deployments/doomed-{env.tag}"
    moved = annotate(rex, doomed_path, **{keys.REFERENCE_POINT: "creationTimestamp"})
    assert moved.status == 403, moved.body
    assert "asks the controller to delete it" in denial(moved)


def label(who: Identity, path: str, **labels: str | None) -> ApiResponse:
    return who.request("PATCH", path, {"metadata": {"labels": labels}}, content_type=MERGE)


def test_a_selected_label_needs_the_right_to_delete_with_the_label_guard(env: Env) -> None:
    """Caught: a label was an ordinary patch, so pat, who may patch ConfigMaps but not delete
    them, labelled an old ConfigMap preview=true under a delete-after policy selecting it
    (deleted at once), or took the label off to keep one from a cleanup, although exempt
    needs delete. With the opt-in label guard the labels a deletion policy selects on need
    delete, as a deletion annotation does."""
    path = stored_configmap(env, f"old-{env.tag}")
    response = label(env.pat, path, **{SELECTED: "true"})
    assert response.status == 403, response.body
    assert denial(response) == (
        f"pat-{env.tag} may not set, change or remove the label {SELECTED} on configmaps "
        f"old-{env.tag}: a deletion policy selects on it, so the requester must be allowed "
        f"to delete it in namespace {env.team}"
    )
    assert label(env.pat, path, **{"example.com/note": "x"}).status == 200
    assert label(env.dee, path, **{SELECTED: "true"}).status == 200
    # Taking it off (opting out of the cleanup) and changing it are decisions too.
    assert label(env.pat, path, **{SELECTED: None}).status == 403
    assert label(env.pat, path, **{SELECTED: "false"}).status == 403
    # Creating an object with the label is what a pipeline does for a policy to clean up.
    created = env.pat.request(
        "POST",
        CONFIGMAPS.format(env.team) + "?dryRun=All",
        {**configmap(f"new-{env.tag}", env.tag), "metadata": {
            "name": f"new-{env.tag}", "labels": {LABEL: env.tag, SELECTED: "true"}}},
    )  # fmt: skip
    assert created.status == 201, created.body
    # A Namespace's label brings everything in it under a namespaceSelector: cluster-wide
    # delete on the Namespace, which pat's patch on Namespaces is not.
    namespace = label(env.pat, f"/api/v1/namespaces/{env.team}", **{SELECTED: "true"})
    assert namespace.status == 403, namespace.body
    assert denial(namespace).endswith("must be allowed to delete it")


# --- 3. subresources are doors too ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["namespaces/status", "deployments/status"])
def test_a_status_update_cannot_set_a_deletion(env: Env, kind: str) -> None:
    """Caught: both annotation policies matched resources "*", which excludes subresources,
    and a status update stores metadata: sam scheduled deletions he may not do, and values
    the validation refuses elsewhere."""
    if kind == "namespaces/status":
        path = f"/api/v1/namespaces/{env.team}"
    else:
        name = f"status-{env.tag}"
        created = env.plane.request(
            "POST", f"/apis/apps/v1/namespaces/{env.team}/deployments", deployment(name, env.tag)
        )
        assert created.status == 201, created.body
        path = f"/apis/apps/v1/namespaces/{env.team}/deployments/{name}"
    for value in ("1m", "soon"):
        response = put_status(env.plane, env.sam, path, keys.DELETE_AFTER, value)
        assert response.status in (403, 422), response.body
        assert "denied request" in str(response.body.get("message")), response.body
    stored = env.plane.request("GET", path).body["metadata"].get("annotations") or {}
    assert keys.DELETE_AFTER not in stored


# --- 4. a compromised controller is not a compromised cluster -----------------------------


def test_the_controller_may_change_nothing_but_lifecycle_annotations(env: Env) -> None:
    """Caught: the controller's ServiceAccount may patch every watched kind cluster-wide, so a
    stolen token could relabel objects or swap a workload's image; here it can write what
    the controller writes (lifecycle annotations, the restart marker) and nothing else."""
    name = f"app-{env.tag}"
    created = env.plane.request(
        "POST", f"/apis/apps/v1/namespaces/{env.team}/deployments", deployment(name, env.tag)
    )
    assert created.status == 201, created.body
    path = f"/apis/apps/v1/namespaces/{env.team}/deployments/{name}"

    def patch(body: dict[str, Any]) -> ApiResponse:
        return env.controller.request("PATCH", path, body, content_type=MERGE)

    image = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/evil:1"}]}
            }
        }
    }
    refused = patch(image)
    assert refused.status == 403, refused.body
    assert "may not change the spec" in denial(refused)
    label = patch({"metadata": {"labels": {"example.com/owned": "yes"}}})
    assert label.status == 403, label.body
    other = patch({"metadata": {"annotations": {"example.com/note": "x"}}})
    assert other.status == 403, other.body
    replicas = patch({"spec": {"replicas": 3}})
    assert replicas.status == 403, replicas.body
    template_label = patch({"spec": {"template": {"metadata": {"labels": {"x": "y"}}}}})
    assert template_label.status == 403, template_label.body

    # What the controller writes: the restart (guarded like its own patches) and a plain
    # annotation patch.
    current = env.plane.request("GET", path).body
    restart = restart_patch(
        {keys.LAST_RESTART_TIMESTAMP: "2030-01-01T00:00:00Z"},
        next_restart_marker(time.time_ns(), None),
    )
    restart["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    accepted = patch(restart)
    assert accepted.status == 200, accepted.body
    template = accepted.body["spec"]["template"]["metadata"]["annotations"]
    assert keys.RESTARTED_AT in template
    assert patch({"metadata": {"annotations": {keys.OBSERVED: None}}}).status == 200


def test_the_controller_deletes_only_with_preconditions(env: Env) -> None:
    """Caught: a stolen token could delete anything watched outright; the controller's own
    deletes always carry UID and resourceVersion preconditions."""
    path = stored_configmap(env, f"gone-{env.tag}")
    bare = env.controller.request("DELETE", path)
    assert bare.status == 403, bare.body
    current = env.plane.request("GET", path).body["metadata"]
    options = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": current["uid"], "resourceVersion": current["resourceVersion"]},
    }
    deleted = env.controller.request("DELETE", path, options)
    assert deleted.status == 200, deleted.body


def preconditions(plane: ControlPlane, path: str) -> dict[str, Any]:
    """The DeleteOptions a stolen token builds from a GET: the object's UID and version."""
    current = plane.request("GET", path).body["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": current["uid"], "resourceVersion": current["resourceVersion"]},
    }


def test_the_controller_deletes_in_protected_namespaces_only_what_asks_for_it(env: Env) -> None:
    """Caught: a delete needed only preconditions, which a GET gives, so a stolen controller
    token deleted whatever it may list: a ConfigMap in kube-system or in the controller's own
    namespace. And it could first write a deletion onto the object itself, or remove the
    dry-run holding one, since every lifecycle annotation was its to change."""
    system = env.plane.request(
        "POST", CONFIGMAPS.format("kube-system"), configmap(f"system-{env.tag}", env.tag)
    )
    assert system.status == 201, system.body
    system_path = f"{CONFIGMAPS.format('kube-system')}/system-{env.tag}"
    try:
        refused = env.controller.request(
            "DELETE", system_path, preconditions(env.plane, system_path)
        )
        assert refused.status == 403, refused.body
        assert "never acts in namespace kube-system (ignoreNamespaces)" in denial(refused)
    finally:
        env.plane.request("DELETE", system_path)

    # The release namespace is protected, not ignored: the objects' own annotations still
    # work there, and nothing else.
    own = CONFIGMAPS.format(env.release)
    plain = env.plane.request("POST", own, configmap(f"plain-{env.tag}", env.tag))
    assert plain.status == 201, plain.body
    plain_path = f"{own}/plain-{env.tag}"
    refused = env.controller.request("DELETE", plain_path, preconditions(env.plane, plain_path))
    assert refused.status == 403, refused.body
    assert denial(refused) == (
        f"system:serviceaccount:{env.release}:{env.release}-lifecycle-controller deletes in "
        f"protected namespace {env.release} only an object that carries its own "
        f"{keys.PREFIX}delete-after or delete-at, not configmaps plain-{env.tag}"
    )
    # Nor can it write the deletion first: it sets no delete-at but by converting a
    # delete-after, and never touches dry-run.
    forged = annotate(env.controller, plain_path, **{keys.DELETE_AT: PAST})
    assert forged.status == 403, forged.body
    assert f"may not set or change {keys.DELETE_AT} on configmaps" in denial(forged)
    held = env.plane.request(
        "POST",
        own,
        configmap(f"held-{env.tag}", env.tag, **{keys.DELETE_AT: PAST, keys.DRY_RUN: "1"}),
    )
    assert held.status == 201, held.body
    held_path = f"{own}/held-{env.tag}"
    assert annotate(env.controller, held_path, **{keys.DRY_RUN: None}).status == 403
    assert annotate(env.controller, held_path, **{keys.EXEMPT: "true"}).status == 403
    # What it does write there: the conversion of a delete-after, then the deletion.
    asked = env.plane.request(
        "POST", own, configmap(f"asked-{env.tag}", env.tag, **{keys.DELETE_AFTER: "1h"})
    )
    assert asked.status == 201, asked.body
    asked_path = f"{own}/asked-{env.tag}"
    conversion = {keys.DELETE_AT: PAST, keys.DELETE_AFTER: None}
    conversion[keys.MANAGED_BY] = keys.MANAGED_BY_VALUE
    converted = annotate(env.controller, asked_path, **conversion)
    assert converted.status == 200, converted.body
    deleted = env.controller.request("DELETE", asked_path, preconditions(env.plane, asked_path))
    assert deleted.status == 200, deleted.body


def test_the_controller_writes_no_subresource(env: Env) -> None:
    """Caught: the controller guard matched resources "*", which leaves subresources out, so a
    stolen token with a broad watch list (a wildcard grants every subresource) scaled any
    Deployment, rewrote any status and added an ephemeral container to any Pod, running code
    of its choosing there."""
    env.plane.grant(
        {
            "kind": "ServiceAccount",
            "name": f"{env.release}-lifecycle-controller",
            "namespace": env.release,
        },
        name=f"broad-{env.tag}",
        namespaced_rules={
            env.team: [
                rule(["apps"], ["deployments/scale", "deployments/status"], ["get", "patch"]),
                rule([""], ["pods/ephemeralcontainers"], ["get", "patch"]),
            ]
        },
    )
    name = f"scaled-{env.tag}"
    created = env.plane.request(
        "POST", f"/apis/apps/v1/namespaces/{env.team}/deployments", deployment(name, env.tag)
    )
    assert created.status == 201, created.body
    path = f"/apis/apps/v1/namespaces/{env.team}/deployments/{name}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{env.tag}", "labels": {LABEL: env.tag}},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
    }
    pods = f"/api/v1/namespaces/{env.team}/pods"
    assert env.plane.request("POST", pods, pod).status == 201
    shell = {"name": "debug", "image": "registry.invalid/shell:1", "targetContainerName": "app"}
    debug = {"spec": {"ephemeralContainers": [shell]}}
    attempts: dict[str, dict[str, Any]] = {
        f"{path}/scale": {"spec": {"replicas": 3}},
        f"{path}/status": {"metadata": {"labels": {"example.com/owned": "yes"}}},
        f"{pods}/pod-{env.tag}/ephemeralcontainers": debug,
    }

    def refused(subresource: str, body: dict[str, Any], *, dry_run: bool = True) -> bool:
        # Rehearsed until the grant and the binding are in effect (each takes a moment).
        query = "?dryRun=All" if dry_run else ""
        response = env.controller.request("PATCH", subresource + query, body, content_type=MERGE)
        return response.status == 403 and "writes no subresource" in str(response.body)

    # A Scale carries no labels, so the module's binding (an object selector) never sees it:
    # one more binding of the same guard, by the team namespace's label.
    guard = f"{env.release}-lifecycle-controller-controller-guard"
    binding = one(env.policies, "ValidatingAdmissionPolicyBinding", guard)
    by_namespace = {
        **binding,
        "metadata": {"name": f"{guard}-ns"},
        "spec": {
            **binding["spec"],
            "matchResources": {"namespaceSelector": {"matchLabels": {LABEL: env.tag}}},
        },
    }
    bindings = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    assert env.plane.request("POST", bindings, by_namespace).status == 201
    try:
        for subresource, body in attempts.items():
            _until(functools.partial(refused, subresource, body), f"{subresource} to be refused")
            assert refused(subresource, body, dry_run=False), subresource
    finally:
        env.plane.request("DELETE", f"{bindings}/{guard}-ns")
    assert env.plane.request("GET", path).body["spec"]["replicas"] == 0
    stored = env.plane.request("GET", f"{pods}/pod-{env.tag}").body["spec"]
    assert not stored.get("ephemeralContainers")


# --- 5. selectors the checked user controls cannot switch the check off ------------------


def test_the_checked_user_cannot_switch_the_check_off(env: Env, helm: Helm) -> None:
    """Caught: object selectors on the guard and the policy check matched labels the
    requester sets, and every ServiceAccount of kube-system was exempt."""
    selector = {"matchLabels": {"example.com/unchecked": "yes"}}
    for key in ("annotationGuard", "policyAdmission"):
        failure = helm.render_failure({key: {"objectSelector": selector}})
        assert "additional properties 'objectSelector' not allowed" in failure, failure
    path = stored_configmap(env, f"kube-{env.tag}")
    response = annotate(env.intruder, path, **{keys.DELETE_AFTER: "1m"})
    assert response.status == 403, response.body
    guard = one(
        env.policies,
        "ValidatingAdmissionPolicy",
        f"{env.release}-lifecycle-controller-annotation-guard",
    )
    exempt = guard["spec"]["matchConditions"][0]["expression"]
    assert "system:serviceaccount:kube-system:deployment-controller" in exempt
    assert "startsWith" not in exempt


def test_notes_warn_when_a_check_cannot_refuse(helm: Helm) -> None:
    """Caught: failurePolicy Ignore or validationActions without Deny were silent."""
    notes = helm.notes(
        {
            "annotationGuard": {"failurePolicy": "Ignore"},
            "policyAdmission": {"validationActions": ["Warn"]},
        }
    )
    assert "WARNING: annotationGuard.failurePolicy is Ignore" in notes
    assert "WARNING: policyAdmission.validationActions has no Deny" in notes
    assert "WARNING" not in helm.notes()
    off = helm.notes({"annotationGuard": {"enabled": False}})
    assert "WARNING: the annotation guard is off" in off


# --- 6. safe defaults ------------------------------------------------------------------------


def test_the_defaults_leave_namespaces_volumes_and_system_namespaces_alone(
    control_plane: ControlPlane, helm: Helm
) -> None:
    """Caught: the default watch list granted delete on every Namespace and PersistentVolume,
    the system namespaces were acted in, an empty watch list rendered wildcard RBAC, and an
    existing ServiceAccount without a name bound the rights to "default"."""
    tag = uuid.uuid4().hex[:8]
    sa = apply_chart_rbac(control_plane, helm, release=f"def-{tag}", namespace=f"def-{tag}")
    try:
        assert can_i(sa, "delete", "configmaps", namespace="default")
        assert not can_i(sa, "delete", "namespaces")
        assert not can_i(sa, "delete", "persistentvolumes")
    finally:
        control_plane.request("DELETE", f"/api/v1/namespaces/def-{tag}")
    args = one(helm.render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    for namespace in ("kube-system", "kube-public", "kube-node-lease"):
        assert f"--ignore-namespace={namespace}" in args
    empty: dict[str, Any] = {"controllerManager": {"scope": {"watchResources": []}}}
    assert "watchResources is empty" in helm.render_failure(empty)
    unnamed = {"serviceAccount": {"create": False}}
    assert "serviceAccount.name is required" in helm.render_failure(unnamed)


# --- the key list is the controller's -------------------------------------------------------


def test_the_admission_policies_know_the_controllers_keys(env: Env, helm: Helm) -> None:
    """Caught: the validation policy's known keys predated exempt, so with rejectUnknownKeys
    (the default) it refused lifecycle.cezary.dev/exempt."""
    docs = helm.render(
        {"admissionPolicy": {"enabled": True}}, release=RELEASE, namespace=RELEASE_NAMESPACE
    )
    policy = one(docs, "ValidatingAdmissionPolicy", f"{FULLNAME}-annotations")
    rule = policy["spec"]["validations"][0]["expression"]
    listed = rule.split(" in ", 1)[1].rstrip(")")
    assert json.loads(listed) == list(keys.KNOWN_KEYS)
    # And on the API server: dee sets exempt on a new object (a create, checked by both).
    created = env.dee.request(
        "POST",
        CONFIGMAPS.format(env.team) + "?dryRun=All",
        configmap(f"new-{env.tag}", env.tag, **{keys.EXEMPT: "true", keys.DELETE_AFTER: "1h"}),
    )
    assert created.status == 201, created.body
    typo = env.dee.request(
        "POST",
        CONFIGMAPS.format(env.team) + "?dryRun=All",
        configmap(f"typo-{env.tag}", env.tag, **{keys.PREFIX + "exmept": "true"}),
    )
    assert typo.status == 422, typo.body


# --- 2. a condition cannot stall the controller ---------------------------------------------


def hostile_condition(levels: int) -> str:
    """Nested comprehensions, each behind a comment between the dot and the macro name."""
    source = "true"
    for level in reversed(range(levels)):
        source = f"object.metadata.labels. // hidden\n all(v{level}, {source})"
    return source


async def test_a_condition_cannot_stall_the_controller(
    control_plane: ControlPlane, launcher: ProcessLauncher, tmp_path: Path
) -> None:
    """Caught: the text scan of the cost bound missed macros behind a comment; six levels over
    an object with 20 labels held the event loop (no /healthz answer within 3 s) and every
    other action waited."""
    install_policy_crds(control_plane)
    tag = uuid.uuid4().hex[:8]
    namespace = f"stall-{tag}"
    control_plane.apply(namespace_manifest(namespace, tag), path=f"/api/v1/namespaces/{namespace}")
    try:
        controller = await launcher.start(
            "stall", f"--watch-namespace={namespace}", "--watch-resource=configmaps"
        )
        await controller.wait_ready(within=60)
        hostile = {
            "apiVersion": "lifecycle.cezary.dev/v1alpha1",
            "kind": "LifecyclePolicy",
            "metadata": {"name": "hostile", "namespace": namespace},
            "spec": {
                "resources": ["configmaps"],
                "condition": hostile_condition(6),
                "lifecycle": {"delete-after": "1h"},
            },
        }
        response = control_plane.request("POST", POLICIES.collection_path(namespace), hostile)
        assert response.status == 201, response.body
        many = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "many-labels", "labels": {f"l{i}": "x" for i in range(20)}}}  # fmt: skip
        assert control_plane.request("POST", CONFIGMAPS.format(namespace), many).status == 201
        due = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "due", "annotations": {keys.DELETE_AFTER: "3s"}}}  # fmt: skip
        created_at = time.monotonic()
        assert control_plane.request("POST", CONFIGMAPS.format(namespace), due).status == 201
        url = f"http://127.0.0.1:{controller.probe_port}/healthz"
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(url, timeout=aiohttp.ClientTimeout(total=1)) as answer:
                        assert answer.status == 200, await answer.text()
                except TimeoutError:
                    waited = time.monotonic() - created_at
                    message = f"/healthz did not answer within 1 s, {waited:.1f} s in"
                    raise AssertionError(message) from None
                gone = control_plane.request("GET", f"{CONFIGMAPS.format(namespace)}/due")
                if gone.status == 404:
                    break
                # Due 3 s after its creation; the rest is the loaded machine's slack.
                assert time.monotonic() - created_at < 33, "the due ConfigMap was not deleted"
                await asyncio.sleep(0.2)

        async def named() -> bool:
            path = f"{POLICIES.collection_path(namespace)}/hostile"
            return "macro inside another comprehension" in str(
                control_plane.request("GET", path).body
            )

        # The hostile policy is refused, not evaluated.
        await eventually(named, within=60, what="the hostile policy's status to name its problem")
    finally:
        control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")
