"""The chart's lifecycle policy CRDs (``crds/``) on the real API server (docs/policies.md).

What they must do: accept every policy the docs show, keep every ``status`` field the
controller writes (a structural schema prunes what it does not declare), and refuse what is
malformed with a message that says what is wrong, before the controller ever sees it. The
two files must describe one schema, apart from the rules only a ``LifecyclePolicy`` has.

Every ClusterLifecyclePolicy created for real here is a dry run that matches a name no object
has, and is deleted at once: the controllers of other tests of the session see it too.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle_controller.core.policy.condition import MAX_CONDITION_LENGTH
from lifecycle_controller.core.policy.in_force import policy_from_manifest
from lifecycle_controller.core.policy.model import (
    LIFECYCLE_KEYS,
    MAX_GLOB_LENGTH,
    MAX_GLOBS,
    Policy,
    PolicyInvalid,
)
from lifecycle_controller.core.text.label_selector import (
    MAX_MATCH_EXPRESSIONS,
    MAX_MATCH_LABELS,
    MAX_SELECTOR_VALUES,
)
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.devcluster import ApiResponse, ControlPlane
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES, POLICY_VERSION
from tests.chart.support import REPO_ROOT, Helm, kubectl
from tests.integration.policy_crds import install_policy_crds, policy_crd_manifests

API_VERSION = f"lifecycle.cezary.dev/{POLICY_VERSION}"
KINDS = {"ClusterLifecyclePolicy": CLUSTER_POLICIES, "LifecyclePolicy": POLICIES}
NEVER = "lifecycle-test-matches-nothing"
ACTIONS = ("delete-after", "delete-at", "restart-at", "restart-every", "restart-cron")
#: A valid value of every lifecycle key (cron-timezone goes with restart-cron).
VALID_VALUES = {
    "delete-after": "48h",
    "delete-at": "2031-01-01T00:00:00Z",
    "restart-at": "2031-01-01T00:00:00+01:00",
    "restart-every": "24h",
    "restart-cron": "0 3 * * MON-FRI",
    "cron-timezone": "Europe/Warsaw",
    "catch-up": "1h",
    "dry-run": "true",
    "warn-before": "15m",
    "maintenance-window": "Mon-Fri 01:00-05:00 Europe/Warsaw",
}


def schema_of(kind: str) -> dict[str, Any]:
    version = policy_crd_manifests()[kind]["spec"]["versions"][0]
    return dict(version["schema"]["openAPIV3Schema"])


def without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [without_descriptions(item) for item in node]
    return node


# --- the files, without a cluster -------------------------------------------------------------


def test_both_files_define_one_schema_apart_from_the_namespaced_rules() -> None:
    manifests = policy_crd_manifests()
    assert sorted(manifests) == sorted(KINDS)
    for kind, resource in KINDS.items():
        spec = manifests[kind]["spec"]
        assert manifests[kind]["metadata"]["name"] == f"{resource.resource}.{resource.group}"
        assert spec["group"] == resource.group
        assert spec["scope"] == ("Namespaced" if resource.namespaced else "Cluster")
        assert spec["names"]["plural"] == resource.resource
        assert [v["name"] for v in spec["versions"]] == [resource.version]
        assert spec["versions"][0]["subresources"] == {"status": {}}
    assert manifests["ClusterLifecyclePolicy"]["spec"]["names"]["shortNames"] == ["clp"]
    assert manifests["LifecyclePolicy"]["spec"]["names"]["shortNames"] == ["lp"]

    namespaced = without_descriptions(schema_of("LifecyclePolicy"))
    spec = namespaced["properties"]["spec"]
    assert [rule["fieldPath"] for rule in spec.pop("x-kubernetes-validations")] == [".namespaces"]
    assert len(spec["properties"]["resources"]["items"].pop("x-kubernetes-validations")) == 1
    cluster = without_descriptions(schema_of("ClusterLifecyclePolicy"))
    # Only an administrator's cluster policy may enforce (docs/policies.md#safety-rules).
    assert cluster["properties"]["spec"]["properties"].pop("enforce") == {"type": "boolean"}
    # Only a cluster policy selects namespaces by label (docs/policies.md#namespaceselector).
    namespace_selector = cluster["properties"]["spec"]["properties"].pop("namespaceSelector")
    items = namespace_selector["properties"]["matchExpressions"]["items"]
    assert len(items.pop("x-kubernetes-validations")) == 1
    assert namespace_selector == spec["properties"]["selector"]
    assert namespaced == cluster
    columns = [manifests[kind]["spec"]["versions"][0]["additionalPrinterColumns"] for kind in KINDS]
    assert columns[0] == columns[1]


def test_the_spec_fields_are_the_ones_the_controller_reads() -> None:
    """Every field the schema declares is one the controller knows (an unknown field would
    make the controller call the policy invalid), and the key lists of the rules are the
    controller's."""
    spec = schema_of("ClusterLifecyclePolicy")["properties"]["spec"]
    for field in spec["properties"]:
        parsed = policy_from_manifest(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterLifecyclePolicy",
                "metadata": {"name": "probe"},
                "spec": {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
                | {field: spec["properties"][field].get("default", [])},
            }
        )
        assert not any("unknown field" in p for p in getattr(parsed, "problems", ())), field
    rules = spec["properties"]["lifecycle"]["x-kubernetes-validations"]
    listed = [re.findall(r"'([a-z-]+)'", rule["rule"]) for rule in rules]
    known = next(keys for keys in listed if "maintenance-window" in keys)
    assert sorted(known) == sorted([*LIFECYCLE_KEYS, "restart-after", "reference-point"])
    action_rules = [set(keys) for keys in listed if "delete-at" in keys and "catch-up" not in keys]
    assert action_rules == [set(ACTIONS), set(ACTIONS)]  # at least one, at most one
    assert set(ACTIONS) <= set(LIFECYCLE_KEYS)


def test_the_size_bounds_are_the_controllers() -> None:
    """A selector, ``names`` and ``namespaces`` are matched against every object: the API
    server refuses what the controller would refuse for its size, and the controller refuses
    it too (a manifest given to the tools, a CRD of an older release)."""
    for kind in KINDS:
        spec = schema_of(kind)["properties"]["spec"]["properties"]
        assert spec["condition"]["maxLength"] == MAX_CONDITION_LENGTH
        for field in ("names", "namespaces"):
            assert spec[field]["maxItems"] == MAX_GLOBS, (kind, field)
            assert spec[field]["items"]["maxLength"] == MAX_GLOB_LENGTH, (kind, field)
        selectors = [spec["selector"], spec.get("namespaceSelector", spec["selector"])]
        for selector in selectors:
            labels = selector["properties"]["matchLabels"]
            assert labels["maxProperties"] == MAX_MATCH_LABELS
            assert labels["additionalProperties"]["maxLength"] == 63  # a label value's
            expressions = selector["properties"]["matchExpressions"]
            assert expressions["maxItems"] == MAX_MATCH_EXPRESSIONS
            entry = expressions["items"]["properties"]
            assert entry["key"]["maxLength"] == 253 + 1 + 63  # prefix / name
            assert entry["values"]["maxItems"] == MAX_SELECTOR_VALUES
            assert entry["values"]["items"]["maxLength"] == 63
    over = {
        "names": ["n"] * (MAX_GLOBS + 1),
        "selector": {"matchExpressions": [{"key": "k", "operator": "Exists"}] * 65},
    }
    parsed = policy_from_manifest(
        {
            "apiVersion": API_VERSION,
            "kind": "ClusterLifecyclePolicy",
            "metadata": {"name": "probe"},
            "spec": VALID_SPEC | over,
        }
    )
    assert isinstance(parsed, PolicyInvalid)
    assert parsed.problems == (
        f"spec.selector.matchExpressions: has 65 entries; at most {MAX_MATCH_EXPRESSIONS} "
        "are allowed",
        f"spec.names: has {MAX_GLOBS + 1} entries; at most {MAX_GLOBS} are allowed",
    )


# --- on the API server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> ControlPlane:
    install_policy_crds(control_plane)
    return control_plane


def manifest(
    kind: str, spec: dict[str, Any], *, namespace: str | None = None, name: str = ""
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name or f"p-{uuid.uuid4().hex[:8]}"}
    if kind == "LifecyclePolicy":
        metadata["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def create(
    plane: ControlPlane, body: dict[str, Any], *, dry_run: bool = True, strict: bool = True
) -> ApiResponse:
    resource = KINDS[body["kind"]]
    query = [*(["dryRun=All"] if dry_run else []), *(["fieldValidation=Strict"] if strict else [])]
    path = resource.collection_path(body["metadata"].get("namespace"))
    return plane.request("POST", f"{path}?{'&'.join(query)}", body)


def docs_examples() -> list[dict[str, Any]]:
    text = (REPO_ROOT / "docs" / "policies.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    found = []
    for block in blocks:
        for doc in yaml.safe_load_all(block):
            if isinstance(doc, dict) and doc.get("kind") in KINDS:
                found.append(doc)
    return found


@pytest.mark.integration
def test_every_example_in_the_docs_is_accepted(crds: ControlPlane, namespace: str) -> None:
    examples = docs_examples()
    assert {doc["kind"] for doc in examples} == set(KINDS)
    for example in examples:
        body = copy.deepcopy(example)
        if body["kind"] == "LifecyclePolicy":
            body["metadata"]["namespace"] = namespace
        assert isinstance(policy_from_manifest(body), Policy), body
        response = create(crds, body)
        assert response.status == 201, response.body


@pytest.mark.integration
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("action", ["delete-after", "delete-at", "restart-at", "restart-every"])
def test_every_lifecycle_key_is_accepted(
    crds: ControlPlane, namespace: str, kind: str, action: str
) -> None:
    modifiers = {k: VALID_VALUES[k] for k in ("catch-up", "dry-run", "warn-before")}
    modifiers["maintenance-window"] = VALID_VALUES["maintenance-window"]
    resources = ["configmaps"] if action.startswith("delete") else ["deployments.apps"]
    lifecycle = {action: VALID_VALUES[action], **modifiers}
    response = create(
        crds, manifest(kind, {"resources": resources, "lifecycle": lifecycle}, namespace=namespace)
    )
    assert response.status == 201, response.body
    cron = {"restart-cron": VALID_VALUES["restart-cron"], "cron-timezone": "Europe/Warsaw"}
    response = create(
        crds,
        manifest(kind, {"resources": ["deployments.apps"], "lifecycle": cron}, namespace=namespace),
    )
    assert response.status == 201, response.body


@pytest.mark.integration
def test_defaults_are_filled_in(crds: ControlPlane, namespace: str) -> None:
    body = manifest(
        "LifecyclePolicy",
        {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}},
        namespace=namespace,
    )
    spec = create(crds, body).body["spec"]
    assert (spec["includeOwned"], spec["priority"]) == (False, 0)


def full_status(generation: int) -> dict[str, Any]:
    """Every field the controller's status writer sets (docs/policies.md#status), in its
    formats: RFC 3339 with nanoseconds, conditions with observedGeneration."""
    now = 1_796_000_000_123_456_789
    condition = {
        "observedGeneration": generation,
        "lastTransitionTime": format_rfc3339_nano(now).split(".")[0] + "Z",
    }
    return {
        "observedGeneration": generation,
        "scheduleSince": format_rfc3339_nano(now),
        "matched": 3,
        "overlapped": 1,
        "nextAction": {
            "at": format_rfc3339_nano(now + 3_600 * 10**9),
            "kind": "ConfigMap",
            "namespace": "team-a",
            "name": "cache-1",
            "action": "delete",
        },
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Active"}
            | {"message": "the policy is in force"}
            | condition,
            {"type": "Invalid", "status": "False", "reason": "Valid", "message": ""} | condition,
            {"type": "Unwatched", "status": "True", "reason": "ResourcesNotWatched"}
            | {"message": "the controller watches no resource type these select: secrets"}
            | condition,
        ],
    }


@pytest.fixture
def stored(crds: ControlPlane, namespace: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Create a policy of the parametrized kind for real; delete it afterwards."""
    kind = request.param
    spec = {
        "resources": ["configmaps", "secrets"],
        "names": [NEVER],
        "lifecycle": {"delete-after": "1h", "dry-run": "true"},
    }
    body = manifest(kind, spec, namespace=namespace)
    response = create(crds, body, dry_run=False)
    assert response.status == 201, response.body
    yield response.body
    crds.request("DELETE", KINDS[kind].object_path(namespace, body["metadata"]["name"]))


@pytest.mark.integration
@pytest.mark.parametrize("stored", sorted(KINDS), indirect=True)
def test_a_status_with_every_field_survives(
    crds: ControlPlane, namespace: str, stored: dict[str, Any], tmp_path: Path
) -> None:
    kind, name = stored["kind"], stored["metadata"]["name"]
    path = KINDS[kind].object_path(namespace, name)
    status = full_status(stored["metadata"]["generation"])
    patched = crds.request(
        "PATCH", f"{path}/status", {"status": status}, content_type="application/merge-patch+json"
    )
    assert patched.status == 200, patched.body
    assert crds.request("GET", path).body["status"] == status

    # The printer columns read those fields.
    scope = ["-n", namespace] if kind == "LifecyclePolicy" else []
    short = "lp" if kind == "LifecyclePolicy" else "clp"
    header, row = kubectl(
        "get", f"{short}/{name}", *scope, "-o", "wide", kubeconfig=crds.admin_kubeconfig
    ).stdout.splitlines()
    columns = dict(zip(header.split(), row.split(), strict=True))
    assert columns == {
        "NAME": name,
        "RESOURCES": '["configmaps","secrets"]',
        "MATCHED": "3",
        "OVERLAPPED": "1",
        "NEXT": status["nextAction"]["at"],
        "ACTION": "delete",
        "TARGET": "cache-1",
        "READY": "True",
        "AGE": columns["AGE"],
    }
    listed = kubectl("get", "lifecycle", "-A", "-o", "name", kubeconfig=crds.admin_kubeconfig)
    assert name in listed.stdout  # the "lifecycle" category lists both kinds

    # A merge patch of null removes the next action, as the writer does when none is pending.
    crds.request(
        "PATCH",
        f"{path}/status",
        {"status": {"nextAction": None}},
        content_type="application/merge-patch+json",
    )
    assert "nextAction" not in crds.request("GET", path).body["status"]


VALID_SPEC: dict[str, Any] = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}


def changed(**fields: Any) -> dict[str, Any]:
    spec = copy.deepcopy(VALID_SPEC)
    for field, value in fields.items():
        if value is None:
            spec.pop(field)
        else:
            spec[field] = value
    return spec


def lifecycle(**keys: Any) -> dict[str, Any]:
    return changed(lifecycle={k.replace("_", "-"): v for k, v in keys.items()})


BOTH = ("ClusterLifecyclePolicy", "LifecyclePolicy")
REFUSED: list[tuple[str, tuple[str, ...], dict[str, Any], str]] = [
    ("misspelt-field", BOTH, changed(selektor={}), 'unknown field "spec.selektor"'),
    (
        "misspelt-key",
        BOTH,
        changed(lifecycle={"delete_after": "1h", "delete-after": "1h"}),
        "unknown key delete_after (is it a typo?); the keys are delete-after, delete-at,",
    ),
    (
        "prefixed-key",
        BOTH,
        changed(lifecycle={"lifecycle.cezary.dev/delete-after": "1h"}),
        "write the keys without the lifecycle.cezary.dev/ prefix: delete-after, not "
        "lifecycle.cezary.dev/delete-after",
    ),
    ("priority-type", BOTH, changed(priority="high"), "spec.priority in body must be of type"),
    ("include-owned-type", BOTH, changed(includeOwned="yes"), "must be of type boolean"),
    ("resources-type", BOTH, changed(resources="configmaps"), "must be of type array"),
    ("resources-empty", BOTH, changed(resources=[]), "should have at least 1 items"),
    ("resources-missing", BOTH, changed(resources=None), "spec.resources: Required value"),
    ("lifecycle-missing", BOTH, changed(lifecycle=None), "spec.lifecycle: Required value"),
    ("value-type", BOTH, lifecycle(delete_after=48), "spec.lifecycle.delete-after in body must"),
    ("dry-run-bool", BOTH, lifecycle(delete_after="1h", dry_run=False), "must be of type string"),
    (
        "match-labels-type",
        BOTH,
        changed(selector={"matchLabels": {"tier": 1}}),
        "spec.selector.matchLabels.tier in body must be of type string",
    ),
    (
        "match-expressions-count",
        BOTH,
        changed(selector={"matchExpressions": [{"key": "k", "operator": "Exists"}] * 65}),
        "spec.selector.matchExpressions: Too many: 65: must have at most 64 items",
    ),
    (
        "match-labels-count",
        BOTH,
        changed(selector={"matchLabels": {f"k{i}": "v" for i in range(65)}}),
        "spec.selector.matchLabels: Too many: 65: must have at most 64 items",
    ),
    (
        "selector-values-count",
        BOTH,
        changed(
            selector={
                "matchExpressions": [
                    {"key": "k", "operator": "In", "values": [f"v{i}" for i in range(257)]}
                ]
            }
        ),
        "spec.selector.matchExpressions[0].values: Too many: 257: must have at most 256 items",
    ),
    (
        "names-count",
        BOTH,
        changed(names=[f"n{i}" for i in range(257)]),
        "spec.names: Too many: 257: must have at most 256 items",
    ),
    (
        "operator",
        BOTH,
        changed(selector={"matchExpressions": [{"key": "tier", "operator": "Like"}]}),
        'Unsupported value: "Like"',
    ),
    ("no-action", BOTH, lifecycle(catch_up="1h"), "sets no action; a policy sets exactly one of"),
    (
        "two-actions",
        BOTH,
        lifecycle(delete_after="1h", restart_every="1h"),
        "sets more than one action; a policy sets exactly one of",
    ),
    (
        "restart-after",
        BOTH,
        lifecycle(restart_after="1h"),
        "restart-after is not allowed in a policy: it counts from when an annotation was applied",
    ),
    (
        "reference-point",
        BOTH,
        lifecycle(delete_after="1h", reference_point="creationTimestamp"),
        "reference-point is not allowed in a policy: a policy's delete-after counts from the "
        "object's creationTimestamp, or from what spec.since yields",
    ),
    (
        "timezone-alone",
        BOTH,
        lifecycle(delete_after="1h", cron_timezone="UTC"),
        "cron-timezone is only meaningful with restart-cron",
    ),
    (
        "namespace-selector-values",
        ("ClusterLifecyclePolicy",),
        changed(namespaceSelector={"matchExpressions": [{"key": "env", "operator": "In"}]}),
        "values must be non-empty for operator In",
    ),
    (
        "namespace-selector-exists-values",
        ("ClusterLifecyclePolicy",),
        changed(
            namespaceSelector={
                "matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]
            }
        ),
        "values must be empty for operator Exists",
    ),
    (
        "namespace-selector-namespaced",
        ("LifecyclePolicy",),
        changed(namespaceSelector={"matchLabels": {"env": "preview"}}),
        'unknown field "spec.namespaceSelector"',
    ),
    (
        "namespaces",
        ("LifecyclePolicy",),
        changed(namespaces=["other"]),
        "spec.namespaces: Forbidden: only a ClusterLifecyclePolicy may set namespaces",
    ),
    *[
        (
            f"glob-{index}",
            ("LifecyclePolicy",),
            changed(resources=["configmaps", glob]),
            f"spec.resources[1]: Invalid value: {json.dumps(glob)}: a LifecyclePolicy names "
            "its resources exactly, without glob characters",
        )
        for index, glob in enumerate(["*.apps", "config?aps", "[c]onfigmaps", "x]", "a\\b"])
    ],
]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("kinds", "spec", "message"),
    [pytest.param(kinds, spec, message, id=case) for case, kinds, spec, message in REFUSED],
)
def test_malformed_policies_are_refused_with_a_clear_message(
    crds: ControlPlane, namespace: str, kinds: tuple[str, ...], spec: dict[str, Any], message: str
) -> None:
    for kind in kinds:
        response = create(crds, manifest(kind, spec, namespace=namespace))
        assert response.status in (400, 422), (kind, response.body)
        assert message in str(response.body.get("message")), (kind, response.body)


@pytest.mark.integration
def test_a_cluster_policy_may_use_globs_and_namespaces(crds: ControlPlane) -> None:
    spec = changed(resources=["*.apps", "config?aps"], namespaces=["team-*"])
    spec["lifecycle"] = {"restart-every": "24h"}
    response = create(crds, manifest("ClusterLifecyclePolicy", spec))
    assert response.status == 201, response.body


@pytest.mark.integration
def test_an_unknown_field_is_dropped_with_a_warning_without_strict_validation(
    crds: ControlPlane, namespace: str
) -> None:
    """Clients that do not ask for strict field validation (kubectl and Helm do) get the
    field pruned, never stored; a misspelt lifecycle key is refused either way."""
    body = manifest("LifecyclePolicy", changed(selektor={}), namespace=namespace)
    response = create(crds, body, strict=False)
    assert response.status == 201, response.body
    assert "selektor" not in response.body["spec"]
    body = manifest(
        "LifecyclePolicy", lifecycle(delete_after="1h", dryrun="x"), namespace=namespace
    )
    response = create(crds, body, strict=False)
    assert response.status == 422, response.body


@pytest.mark.integration
def test_policies_rendered_with_the_release_are_accepted(
    crds: ControlPlane, helm: Helm, namespace: str
) -> None:
    """The chart's ``policies`` value renders objects the CRDs accept as they are: the docs'
    own values example, and every policy example of the docs as an item."""
    examples = {doc["kind"]: doc for doc in docs_examples()}
    items = [
        {"kind": kind, "name": f"from-values-{index}", "spec": examples[kind]["spec"]}
        for index, kind in enumerate(sorted(KINDS))
    ]
    text = (REPO_ROOT / "docs" / "policies.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(policies:.*?)```", text, re.S)]
    assert len(blocks) == 1
    items += blocks[0]["policies"]
    for item in items:
        item.pop("namespace", None)  # into the test's namespace
    docs = helm.render({"policies": items}, namespace=namespace)
    rendered = [doc for doc in docs if doc["kind"] in KINDS]
    assert len(rendered) == len(items) == 4
    for doc in rendered:
        response = create(crds, doc)
        assert response.status == 201, response.body
        assert response.body["spec"] == doc["spec"] | {"includeOwned": False, "priority": 0} | {
            k: v for k, v in doc["spec"].items() if k in ("includeOwned", "priority")
        }
