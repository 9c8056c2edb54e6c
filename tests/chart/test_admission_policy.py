"""The chart's ValidatingAdmissionPolicies, installed on the real API server.

What they must do: docs/operator-guide.md#admission-time-validation.

Both policies are bound to labelled namespaces of this module only, so the rest of the
session is never affected. Requests come from least-privilege users with client
certificates, from the controller's ServiceAccount (with the chart's own RBAC), and from
kube-controller-manager (which runs as the control plane's admin here and is listed in the
test's ``admissionExemptions``, as ``system:kube-controller-manager`` is by default).

The grammar checks are differential where possible: every vector is sent to the API server
and its verdict must equal the core parser's (the grammar of
docs/annotations.md#value-formats, ported from Go).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifecycle_controller.core.schedule.catchup import CatchUpError, parse_catch_up_rule
from lifecycle_controller.core.text.cron import CronError, parse_cron
from lifecycle_controller.core.text.durations import (
    DurationError,
    parse_duration,
    parse_restart_every,
)
from lifecycle_controller.core.text.gotext import go_parse_bool
from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339
from lifecycle_controller.devcluster import ApiResponse, ControlPlane
from tests.chart.support import Helm, Identity, apply_chart_rbac, kubectl
from tests.chart.support import to_yaml_stream as yaml_stream
from tests.core.duration_vectors import REJECTED as REJECTED_DURATIONS
from tests.integration.keys import P

pytestmark = pytest.mark.integration

DEVCLUSTER_ADMIN = "lifecycle-devcluster-admin"  # what kube-controller-manager runs as here
USER_RULES = [
    {
        "apiGroups": ["", "apps"],
        "resources": ["configmaps", "deployments", "replicasets"],
        "verbs": ["get", "list", "create", "update", "patch", "delete"],
    }
]
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@dataclass
class PolicyEnv:
    """Namespaces and identities of this module's admission checks."""

    plane: ControlPlane
    tag: str
    validated: str  # namespace bound to the validation policy
    guarded: str  # namespace bound to the annotation guard
    alice: Identity  # may edit objects, not allowed to write lifecycle annotations
    bob: Identity  # member of the allowed group
    carol: Identity  # bound to the <fullname>-annotation-writer ClusterRole in `guarded`
    controller: Identity  # the chart's ServiceAccount with the chart's RBAC


def _policy_values(tag: str) -> dict[str, Any]:
    def bound(label: str) -> dict[str, Any]:
        return {
            "enabled": True,
            "namespaceSelector": {"matchLabels": {f"lifecycle-test/{label}": tag}},
        }

    return {
        "admissionPolicy": bound("validate"),
        # The guard's delegable writer right (requireWriterRight); the right to delete or
        # patch the object itself is tested in tests/chart/test_security.py.
        "annotationGuard": {**bound("guard"), "requireWriterRight": True},
        "controllerGuard": {"enabled": False},
        "policyAdmission": {"enabled": False},  # tests/chart/test_policy_admission.py
        "admissionExemptions": {
            "usernames": ["system:kube-controller-manager", DEVCLUSTER_ADMIN],
            "usernamePrefixes": ["system:serviceaccount:kube-system:"],
        },
    }


def _labelled_namespace(plane: ControlPlane, name: str, label: str, tag: str) -> None:
    plane.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {f"lifecycle-test/{label}": tag}},
        },
        path=f"/api/v1/namespaces/{name}",
    )


def configmap(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": annotations or {}},
    }


def deployment(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


def replicaset(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    manifest = deployment(name, annotations)
    manifest["kind"] = "ReplicaSet"
    return manifest


def collection(manifest: dict[str, Any], namespace: str) -> str:
    plural = manifest["kind"].lower() + "s"
    if manifest["apiVersion"] == "v1":
        return f"/api/v1/namespaces/{namespace}/{plural}"
    return f"/apis/{manifest['apiVersion']}/namespaces/{namespace}/{plural}"


def create(
    who: Identity, manifest: dict[str, Any], namespace: str, *, dry_run: bool = True
) -> ApiResponse:
    query = "?dryRun=All" if dry_run else ""
    return who.request("POST", collection(manifest, namespace) + query, manifest)


def admin_create(env: PolicyEnv, manifest: dict[str, Any], namespace: str) -> ApiResponse:
    """Create as the control plane's admin, which this module exempts (it is what
    kube-controller-manager runs as here)."""
    return env.plane.request("POST", collection(manifest, namespace), manifest)


def merge_patch(
    who: Identity, manifest: dict[str, Any], namespace: str, patch: dict[str, Any]
) -> ApiResponse:
    path = f"{collection(manifest, namespace)}/{manifest['metadata']['name']}"
    return who.request("PATCH", path, patch, content_type="application/merge-patch+json")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wait_until_enforced(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, helm: Helm) -> Iterator[PolicyEnv]:
    tag = uuid.uuid4().hex[:8]
    release, release_ns = f"vap-{tag}", f"vap-{tag}"
    values = _policy_values(tag)
    docs = helm.render(values, release=release, namespace=release_ns)
    policies = [d for d in docs if d["kind"] in POLICY_KINDS]
    writer = f"{release}-lifecycle-controller-annotation-writer"
    validated, guarded = f"validated-{tag}", f"guarded-{tag}"
    _labelled_namespace(control_plane, validated, "validate", tag)
    _labelled_namespace(control_plane, guarded, "guard", tag)
    controller = Identity(
        apply_chart_rbac(control_plane, helm, values, release=release, namespace=release_ns)
    )
    rules = {validated: USER_RULES, guarded: USER_RULES}
    alice = Identity(control_plane.user_kubeconfig(f"alice-{tag}", namespaced_rules=rules))
    bob = Identity(
        control_plane.user_kubeconfig(
            f"bob-{tag}",
            groups=["lifecycle-controller-annotation-admins"],
            namespaced_rules=rules,
        )
    )
    carol_name = f"carol-{tag}"
    carol = Identity(control_plane.user_kubeconfig(carol_name, namespaced_rules=rules))
    kubectl(
        "apply", "-f", "-", kubeconfig=control_plane.admin_kubeconfig, stdin=yaml_stream(policies)
    )
    kubectl(
        "create", "rolebinding", "carol-writes-annotations", f"--clusterrole={writer}",
        f"--user={carol_name}", "-n", guarded, kubeconfig=control_plane.admin_kubeconfig,
    )  # fmt: skip
    env = PolicyEnv(control_plane, tag, validated, guarded, alice, bob, carol, controller)
    bad = configmap("probe", {P + "delete-after": "soon"})
    _wait_until_enforced(lambda: create(alice, bad, validated).status == 422, "the policy")
    _wait_until_enforced(lambda: create(alice, bad, guarded).status == 403, "the guard")
    yield env
    kubectl(
        "delete", "-f", "-", "--ignore-not-found", "--wait=false",
        kubeconfig=control_plane.admin_kubeconfig, stdin=yaml_stream(policies),
    )  # fmt: skip
    for namespace in (validated, guarded):
        control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")
    for identity in (alice, bob, carol, controller):
        identity.close()


def denial(response: ApiResponse) -> str:
    message = str(response.body.get("message", ""))
    assert "denied request: " in message, response.body
    return message.split("denied request: ", 1)[1]


# --- every invalid class is rejected with its message --------------------------------------

INVALID: list[tuple[str, Callable[[str], dict[str, Any]], dict[str, str], str]] = [
    (
        "duration-format",
        configmap,
        {P + "delete-after": "1w"},
        f'{P}delete-after: invalid duration format "1w": expected a whole number and one unit '
        "out of s, m, h, d, for example 30m or 7d",
    ),
    (
        "duration-signed",
        deployment,
        {P + "restart-after": "-1h"},
        f'{P}restart-after: duration must be positive and unsigned, got "-1h"',
    ),
    (
        "duration-zero",
        configmap,
        {P + "delete-after": "0d"},
        f'{P}delete-after: duration must be positive, got "0d"',
    ),
    (
        "duration-days-bound",
        configmap,
        {P + "delete-after": "106752d"},
        f'{P}delete-after: duration "106752d" is too large: at most 106751d, 2562047h, '
        "153722867m or 9223372036s",
    ),
    (
        "duration-seconds-bound",
        configmap,
        {P + "delete-after": "9223372037s"},
        f'{P}delete-after: duration "9223372037s" is too large',
    ),
    (
        "restart-every-minimum",
        deployment,
        {P + "restart-every": "59s"},
        f'{P}restart-every: duration must be at least 1m0s, got "59s"',
    ),
    (
        "timestamp-without-offset",
        configmap,
        {P + "delete-at": "2026-10-10T03:00:00"},
        f'{P}delete-at: invalid RFC 3339 timestamp "2026-10-10T03:00:00": expected a date, T, '
        "a time with seconds and an offset, for example 2026-10-05T03:00:00Z or "
        "2026-10-05T05:00:00+02:00",
    ),
    (
        "timestamp-calendar",
        deployment,
        {P + "restart-at": "2027-02-29T03:00:00Z"},
        f'{P}restart-at: invalid RFC 3339 timestamp "2027-02-29T03:00:00Z"',
    ),
    (
        "anchor",
        deployment,
        {P + "restart-every": "1h", P + "last-restart-timestamp": "yesterday"},
        f'{P}last-restart-timestamp: invalid RFC 3339 timestamp "yesterday"',
    ),
    (
        "catch-up",
        configmap,
        {P + "delete-after": "1h", P + "catch-up": "sometimes"},
        f'{P}catch-up: invalid catch-up policy "sometimes": expected always, never, or a '
        "positive duration such as 15m",
    ),
    (
        "catch-up-empty",
        configmap,
        {P + "delete-after": "1h", P + "catch-up": ""},
        f'{P}catch-up: invalid catch-up policy ""',
    ),
    (
        "reference-point",
        configmap,
        {P + "delete-after": "1h", P + "reference-point": "now"},
        f'{P}reference-point: invalid value "now": expected applyTimestamp or creationTimestamp',
    ),
    (
        "dry-run",
        configmap,
        {P + "delete-after": "1h", P + "dry-run": "yes"},
        f'{P}dry-run: invalid value "yes": expected a boolean: true, false, 1, 0, t, f, True, '
        "False, TRUE or FALSE",
    ),
    (
        "dry-run-empty",
        configmap,
        {P + "delete-after": "1h", P + "dry-run": ""},
        f'{P}dry-run: invalid value ""',
    ),
    (
        "cron-descriptor",
        deployment,
        {P + "restart-cron": "@daily"},
        f"{P}restart-cron: descriptors such as @daily or @every are not supported; use five "
        "fields: minute hour day-of-month month day-of-week",
    ),
    (
        "cron-field-count",
        deployment,
        {P + "restart-cron": "CRON_TZ=UTC 0 9 * * *"},
        f"{P}restart-cron: expected exactly 5 fields (minute hour day-of-month month "
        f"day-of-week), found 6; set the zone with {P}cron-timezone, not a TZ= prefix",
    ),
    (
        "cron-minute",
        deployment,
        {P + "restart-cron": "60 9 * * *"},
        f'{P}restart-cron: invalid minute field "60": values must be 0-59 and ranges must go '
        "from low to high",
    ),
    (
        "cron-hour",
        deployment,
        {P + "restart-cron": "0 24 * * *"},
        f'{P}restart-cron: invalid hour field "24": values must be 0-23',
    ),
    (
        "cron-day-of-month",
        deployment,
        {P + "restart-cron": "0 9 0 * *"},
        f'{P}restart-cron: invalid day-of-month field "0": values must be 1-31',
    ),
    (
        "cron-month",
        deployment,
        {P + "restart-cron": "0 9 * 13 *"},
        f'{P}restart-cron: invalid month field "13": values must be 1-12 or JAN-DEC',
    ),
    (
        "cron-day-of-week",
        deployment,
        {P + "restart-cron": "0 9 * * FRI-MON"},
        f'{P}restart-cron: invalid day-of-week field "FRI-MON": values must be 0-6 or SUN-SAT '
        "and ranges must go from low to high",
    ),
    (
        "cron-step",
        deployment,
        {P + "restart-cron": "*/0 * * * *"},
        f'{P}restart-cron: invalid minute field "*/0"',
    ),
    (
        "timezone",
        deployment,
        {P + "restart-cron": "0 9 * * *", P + "cron-timezone": "../etc/passwd"},
        f'{P}cron-timezone: invalid time zone name "../etc/passwd": expected an IANA name such '
        "as Europe/Warsaw, or UTC",
    ),
    (
        "mixed-families",
        deployment,
        {P + "delete-after": "1h", P + "restart-every": "1h"},
        f"lifecycle.cezary.dev: delete and restart annotations cannot be combined on one object "
        f"(found {P}delete-after, {P}restart-every)",
    ),
    (
        "unsupported-restart-kind",
        configmap,
        {P + "restart-after": "1h"},
        f"{P}restart-after: restarts apply only to apps Deployments, StatefulSets and "
        "DaemonSets, not ConfigMap",
    ),
    (
        "unknown-key",
        configmap,
        {P + "delete_after": "1h"},
        f"unknown annotation {P}delete_after (is it a typo?)",
    ),
]


@pytest.mark.parametrize(
    ("build", "annotations", "message"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
def test_rejects_every_invalid_class(
    env: PolicyEnv,
    build: Callable[[str, dict[str, str]], dict[str, Any]],
    annotations: dict[str, str],
    message: str,
) -> None:
    response = create(env.alice, build(unique("bad"), annotations), env.validated)
    assert response.status == 422, response.body
    assert denial(response).startswith(message)


VALID: list[tuple[Callable[[str, dict[str, str]], dict[str, Any]], dict[str, str]]] = [
    (configmap, {P + "delete-after": "10m"}),
    (configmap, {P + "delete-after": "7d", P + "reference-point": "creationTimestamp"}),
    (configmap, {P + "delete-at": "2026-10-05T05:00:00+02:00", P + "catch-up": "never"}),
    (configmap, {P + "delete-at": "2028-02-29T03:00:00.123456789Z", P + "dry-run": "True"}),
    (configmap, {P + "delete-after": "106751d", P + "catch-up": "15m"}),
    (configmap, {P + "delete-at": "", P + "restart-after": ""}),  # empty actions are absent
    (deployment, {P + "restart-after": "30m", P + "reference-point": ""}),
    (deployment, {P + "restart-at": "2026-10-05T03:00:00Z", P + "dry-run": "0"}),
    (deployment, {P + "restart-every": "1m", P + "catch-up": "always"}),
    (
        deployment,
        {
            P + "restart-cron": "30 2 * * MON-FRI",
            P + "cron-timezone": "Europe/Warsaw",
            P + "last-restart-timestamp": "2026-10-05T03:00:00.5Z",
        },
    ),
    (deployment, {P + "restart-cron": "*/15 0-6,22-23 1,15 jan-jun/2 ?"}),
    (deployment, {P + "restart-cron": "0 0 31 2 *"}),  # valid syntax; the controller reports it
    (configmap, {P + "managed-by": "lifecycle-controller", "example.com/other": "anything"}),
]


@pytest.mark.parametrize(("build", "annotations"), VALID)
def test_accepts_valid_manifests(
    env: PolicyEnv,
    build: Callable[[str, dict[str, str]], dict[str, Any]],
    annotations: dict[str, str],
) -> None:
    response = create(env.alice, build(unique("good"), annotations), env.validated)
    assert response.status == 201, response.body


# --- the policy agrees with the core's grammar -----------------------------------------------


def _accepts(
    parse: Callable[[str], object], errors: type[Exception] | tuple[type[Exception], ...]
) -> Callable[[str], bool]:
    def accepts(value: str) -> bool:
        try:
            parse(value)
        except errors:
            return False
        return True

    return accepts


def _cron_accepts(value: str) -> bool:
    """Syntax of the core's parser, and every field non-empty (a field of only commas has no
    value, so the controller finds no occurrence; the policy rejects it as syntax)."""
    try:
        spec = parse_cron(value)
    except CronError:
        return False
    fields = (spec.minutes, spec.hours, spec.days_of_month, spec.months, spec.days_of_week)
    return all(fields)


def _action(accepts: Callable[[str], bool]) -> Callable[[str], bool]:
    """Action annotations: an empty value counts as absent."""
    return lambda value: value == "" or accepts(value)


GRAMMARS: dict[
    str, tuple[Callable[[str, dict[str, str]], dict[str, Any]], Callable[[str], bool]]
] = {
    "delete-after": (configmap, _action(_accepts(parse_duration, DurationError))),
    "restart-every": (deployment, _action(_accepts(parse_restart_every, DurationError))),
    "delete-at": (configmap, _action(_accepts(parse_rfc3339, TimestampError))),
    "catch-up": (configmap, _accepts(parse_catch_up_rule, CatchUpError)),
    "dry-run": (configmap, lambda value: go_parse_bool(value) is not None),
    "restart-cron": (deployment, _action(_cron_accepts)),
}


def agrees(env: PolicyEnv, key: str, value: str) -> None:
    build, accepts = GRAMMARS[key]
    response = create(env.alice, build(unique("diff"), {P + key: value}), env.validated)
    assert response.status in (201, 422), response.body
    assert (response.status == 201) == accepts(value), (key, value, response.body.get("message"))


DURATIONS = [v for v, _ in REJECTED_DURATIONS] + [
    "1d", "25h", "5m", "106751d", "9223372036s", "2562047h", "153722867m", "1m", "15m", "7d",
    "59s", "60s", "000001s", "0000m", "007d",
]  # fmt: skip
TIMESTAMPS = [
    "2026-10-10T03:00:00Z", "2026-10-10T05:00:00+02:00", "2026-10-09T23:30:00-03:30",
    "2026-10-10T03:00:00.5Z", "2026-10-10T03:00:00.1234567899999Z", "2026-10-10T03:00:00,25Z",
    "2026-10-10T3:00:00Z", "2026-10-11T03:00:00+24:00", "2026-10-10T03:00:00+00:60",
    "2026-10-10T03:00:00", "2026-10-10 03:00:00Z", "2026-10-10t03:00:00Z", "2026-10-10T03:00:00z",
    "2026-10-10T03:00:00+0000", "2026-10-10", "2026-13-10T03:00:00Z", "2026-02-30T03:00:00Z",
    "2028-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "0000-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z", "2026-10-10T24:00:00Z", "2026-10-10T03:60:00Z", "2026-10-10T03:00:60Z",
    "2026-10-10T03:00:00+25:00", "2026-10-10T03:00:00+01:61", "2026-10-10T03:00:00.Z",
    "2026-10-10T03:00:00Zjunk", " 2026-10-10T03:00:00Z", "2026-1-10T03:00:00Z",
    "20261-10-10T03:00:00Z", "2026-10-10T123:00:00Z", "2026-10-10T03:00:00+1:00",
]  # fmt: skip
CRONS = [
    "* * * * *", "*/5 * * * *", "0 9 * * MON-FRI", "0 9 * * fri-mon", "0 0 1 jan,jul *",
    "0 0 ? * 0", "0 0 * * 7", "60 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 32 * *",
    "0 0 * 0 *", "0 0 * 13 *", "@hourly", "@every 1h", "0 0 * * * *", "0 0 * *", "",
    "5-1 * * * *", "1-5-7 * * * *", "*/0 * * * *", "5/15 * * * *", "*-x * * * *",
    "1,,2 * * * *", ", * * * *", "+5 * * * *", "-5 * * * *", "5- * * * *", "*/+5 * * * *",
    "  0   9 * * *  ", "0\t9 * * *", "0\u00a09 * * * *", "0 9 * * L", "0 9 * * 1#2",
    "0 9 15W * *", "00-059 00 01 01 00", "0 0 31 2 *", "TZ=UTC 0 9 * * *", "0 9 * * MONDAY",
]  # fmt: skip
VECTORS = (
    [("delete-after", v) for v in DURATIONS if len(v) < 200]
    + [("restart-every", v) for v in ("59s", "60s", "1m", "0m", "+1m", "1m0s", "2562047h")]
    + [("delete-at", v) for v in TIMESTAMPS]
    + [("catch-up", v) for v in ("always", "never", "15m", "Always", "", "0s", "-15m", "1w")]
    + [("dry-run", v) for v in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE",
                               "false", "False", "", "yes", "tRUE", " true")]
    + [("restart-cron", v) for v in CRONS]
)  # fmt: skip


def test_policy_agrees_with_the_core_on_every_vector(env: PolicyEnv) -> None:
    for key, value in VECTORS:
        agrees(env, key, value)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    number=st.integers(min_value=0, max_value=10**13) | st.integers(min_value=0, max_value=120),
    zeros=st.integers(min_value=0, max_value=3),
    unit=st.sampled_from("smhdw"),
)
def test_durations_agree_with_the_core(env: PolicyEnv, number: int, zeros: int, unit: str) -> None:
    agrees(env, "delete-after", "0" * zeros + f"{number}{unit}")
    agrees(env, "restart-every", f"{number}{unit}")


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    year=st.sampled_from([0, 1900, 1970, 2000, 2024, 2026, 2100, 9999]),
    month=st.integers(min_value=0, max_value=13),
    day=st.integers(min_value=0, max_value=32),
    hour=st.integers(min_value=0, max_value=25),
    short_hour=st.booleans(),
    minute=st.integers(min_value=0, max_value=61),
    second=st.integers(min_value=0, max_value=61),
    fraction=st.sampled_from(["", ".5", ",123", ".1234567891", "."]),
    zone=st.sampled_from(["Z", "z", "+02:00", "-03:30", "+24:00", "+25:00", "+00:60", "+0100", ""]),
)
def test_timestamps_agree_with_the_core(
    env: PolicyEnv,
    year: int,
    month: int,
    day: int,
    hour: int,
    short_hour: bool,
    minute: int,
    second: int,
    fraction: str,
    zone: str,
) -> None:
    hour_text = str(hour) if short_hour else f"{hour:02d}"
    value = (
        f"{year:04d}-{month:02d}-{day:02d}T{hour_text}:{minute:02d}:{second:02d}{fraction}{zone}"
    )
    agrees(env, "delete-at", value)


CRON_TOKENS = st.sampled_from(
    ["*", "?", "0", "5", "59", "60", "23", "24", "31", "32", "12", "13", "6", "7", "1-5", "5-1",
     "*/5", "*/0", "10/20", "1,2", "1,,3", "jan", "DEC", "mon-fri", "sat-sun", "L", "+3", "-3"]
)  # fmt: skip


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(fields=st.lists(CRON_TOKENS, min_size=4, max_size=6))
def test_cron_agrees_with_the_core(env: PolicyEnv, fields: list[str]) -> None:
    agrees(env, "restart-cron", " ".join(fields))


# --- updates, the controller and the built-in controllers --------------------------------------


def test_unchanged_invalid_values_do_not_block_updates(env: PolicyEnv) -> None:
    manifest = configmap(unique("legacy"), {P + "delete-after": "1w"})
    # Stored before the policy existed (here: written by an exempt identity).
    assert admin_create(env, manifest, env.validated).status == 201
    labels = {"metadata": {"labels": {"team": "a"}}}
    assert merge_patch(env.alice, manifest, env.validated, labels).status == 200
    change = {"metadata": {"annotations": {P + "delete-after": "2w"}}}
    response = merge_patch(env.alice, manifest, env.validated, change)
    assert response.status == 422
    assert denial(response).startswith(f'{P}delete-after: invalid duration format "2w"')
    fix = {"metadata": {"annotations": {P + "delete-after": "14d"}}}
    assert merge_patch(env.alice, manifest, env.validated, fix).status == 200


def test_mixed_families_already_stored_do_not_block_updates(env: PolicyEnv) -> None:
    mixed = {P + "delete-after": "1h", P + "restart-after": "1h"}
    manifest = deployment(unique("mixed"), mixed)
    assert admin_create(env, manifest, env.validated).status == 201
    labels = {"metadata": {"labels": {"team": "a"}}}
    assert merge_patch(env.alice, manifest, env.validated, labels).status == 200


def test_controller_writes_always_pass(env: PolicyEnv) -> None:
    """The chart's ServiceAccount, with the chart's RBAC, is exempt from both policies."""
    for namespace in (env.validated, env.guarded):
        manifest = deployment(unique("ctl"), {P + "restart-after": "1h"})
        assert create(env.bob, manifest, namespace, dry_run=False).status == 201
        conversion = {
            "metadata": {
                "annotations": {
                    P + "restart-after": None,
                    P + "restart-at": "2026-10-05T04:00:00Z",
                    P + "managed-by": "lifecycle-controller",
                    P + "reference-point": "whatever-the-user-wrote",
                }
            }
        }
        response = merge_patch(env.controller, manifest, namespace, conversion)
        assert response.status == 200, response.body
        restart = {
            "metadata": {"annotations": {P + "restart-at": None}},
            "spec": {"template": {"metadata": {"annotations": {P + "restartedAt": "now"}}}},
        }
        assert merge_patch(env.controller, manifest, namespace, restart).status == 200


def test_copies_by_built_in_controllers_pass(env: PolicyEnv) -> None:
    """The Deployment controller copies annotations to ReplicaSets; users may not do that."""
    name = unique("copied")
    manifest = deployment(name, {P + "restart-every": "1h"})
    assert create(env.alice, manifest, env.validated, dry_run=False).status == 201
    path = f"/apis/apps/v1/namespaces/{env.validated}/replicasets?labelSelector=app%3D{name}"
    deadline = time.monotonic() + 30
    while not (items := env.plane.request("GET", path).body.get("items")):
        assert time.monotonic() < deadline, "no ReplicaSet was created"
        time.sleep(0.2)
    assert items[0]["metadata"]["annotations"][P + "restart-every"] == "1h"
    direct = create(env.alice, replicaset(unique("rs"), {P + "restart-every": "1h"}), env.validated)
    assert direct.status == 422
    assert "not ReplicaSet" in denial(direct)


# --- the annotation guard ------------------------------------------------------------------


def test_guard_denies_users_without_permission(env: PolicyEnv) -> None:
    response = create(env.alice, configmap(unique("g"), {P + "delete-after": "1h"}), env.guarded)
    assert response.status == 403, response.body
    assert denial(response) == (
        f"alice-{env.tag} may not set, change or remove {P}delete-after: lifecycle.cezary.dev/ "
        f"annotations are restricted (ask for the ClusterRole vap-{env.tag}-lifecycle-controller-"
        "annotation-writer)"
    )


def test_guard_allows_groups_roles_and_unrelated_edits(env: PolicyEnv) -> None:
    annotated = {P + "delete-after": "1h"}
    by_group = configmap(unique("g"), annotated)
    assert create(env.bob, by_group, env.guarded, dry_run=False).status == 201
    by_role = configmap(unique("g"), annotated)
    assert create(env.carol, by_role, env.guarded, dry_run=False).status == 201
    plain = configmap(unique("g"))
    assert create(env.alice, plain, env.guarded, dry_run=False).status == 201
    other = {"metadata": {"annotations": {"example.com/note": "hi"}, "labels": {"a": "b"}}}
    assert merge_patch(env.alice, by_group, env.guarded, other).status == 200
    for patch in (
        {"metadata": {"annotations": {P + "delete-after": "2h"}}},  # change
        {"metadata": {"annotations": {P + "delete-after": None}}},  # removal
        {"metadata": {"annotations": {P + "dry-run": "true"}}},  # addition
    ):
        response = merge_patch(env.alice, by_group, env.guarded, patch)
        assert response.status == 403, (patch, response.body)
    assert (
        merge_patch(env.alice, plain, env.guarded, {"metadata": {"annotations": annotated}}).status
        == 403
    )
    assert (
        merge_patch(env.carol, plain, env.guarded, {"metadata": {"annotations": annotated}}).status
        == 200
    )


def test_policies_apply_only_to_bound_namespaces(env: PolicyEnv, namespace: str) -> None:
    env.plane.grant(
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": f"alice-{env.tag}"},
        name=f"alice-{env.tag}-unbound",
        namespaced_rules={namespace: USER_RULES},
    )
    unchecked = configmap(unique("free"), {P + "delete-after": "1w"})
    assert create(env.alice, unchecked, namespace).status == 201
