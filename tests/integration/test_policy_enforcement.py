"""An enforced policy against the Namespace, and an exempt Namespace, on the real control plane
(docs/policies.md#safety-rules).

* An enforced ``ClusterLifecyclePolicy`` is a deadline against every lower layer: the
  Namespace's ``catch-up: never``, a maintenance window days away, a ``max-delete-ttl`` shorter
  than its own and an invalid default do not stop its deletion; a policy that is not enforced
  still obeys each of them.
* ``lifecycle.cezary.dev/exempt`` on a Namespace keeps every policy that is not enforced away
  from its objects (counted in their ``status.exempt``); an enforced one acts; removing the
  annotation lets the others act at once.

Where a test shows that something is *not* done, a sentinel with its own short
``delete-after`` (and its own value of the key the Namespace gets wrong), created after the
objects under test, must be gone first: the controller has then had every chance to act.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES, POLICIES
from lifecycle_controller.machinery.clock import RealClock
from lifecycle_controller.tools.explain import explain_object
from tests.conftest import fresh_namespace
from tests.integration.controller import StartController
from tests.integration.events import wait_event
from tests.integration.keys import DELETE_AFTER, P
from tests.integration.policy_tools import ClusterPolicies, labelled, namespaced_policy
from tests.integration.scenario_support import create, gone, patch, wait_gone
from tests.integration.support import CONFIGMAPS, eventually

CATCH_UP = P + "catch-up"
EXEMPT = P + "exempt"
MAINTENANCE_WINDOW = P + "maintenance-window"
MAX_DELETE_TTL = P + "max-delete-ttl"
TTL = 2  # seconds: the policies' delete-after


async def annotate_namespace(kube: KubeClient, namespace: str, **annotations: str | None) -> None:
    await patch(kube, NAMESPACES, None, namespace, {"metadata": {"annotations": annotations}})


def far_window() -> str:
    """A one-minute window at least eleven hours away, every day."""
    hour = (datetime.now(UTC) + timedelta(hours=12)).hour
    return f"Mon-Sun {hour:02d}:00-{hour:02d}:01 UTC"


async def older_than(kube: KubeClient, namespace: str, name: str, seconds: float) -> None:
    """Wait until the object is ``seconds`` old (the API server runs on this machine's clock;
    its timestamps are whole seconds, cut down)."""
    created = datetime.fromisoformat(
        (await kube.get(CONFIGMAPS, namespace, name))["metadata"]["creationTimestamp"]
    )

    async def old() -> bool:
        return (datetime.now(UTC) - created).total_seconds() > seconds

    await eventually(old, within=30, what=f"{name} to be {seconds}s old")


async def sentinel_gone(kube: KubeClient, namespace: str, **annotations: str) -> None:
    """An object with its own 1 s TTL (and ``annotations``), deleted by the controller."""
    body = labelled("sentinel", {}, **{DELETE_AFTER: "1s", **annotations})
    await create(kube, CONFIGMAPS, namespace, body)
    await wait_gone(kube, CONFIGMAPS, namespace, "sentinel", within=30)


async def test_an_enforced_deletion_is_not_weakened_by_the_namespace_defaults(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    cluster_policies: ClusterPolicies,
) -> None:
    """Caught: the enforced deletion was skipped under the Namespace's ``catch-up: never``,
    waited for its window, was refused for good by its shorter ``max-delete-ttl``, and held
    by its invalid ``catch-up`` "until it is fixed"."""
    defaults = {
        "never": {CATCH_UP: "never"},
        "window": {MAINTENANCE_WINDOW: far_window()},
        "cap": {MAX_DELETE_TTL: "1s"},
        "invalid": {CATCH_UP: "sometimes"},
    }
    with contextlib.ExitStack() as stack:
        spaces = {case: stack.enter_context(fresh_namespace(control_plane)) for case in defaults}
        for case, annotations in defaults.items():
            await annotate_namespace(kube, spaces[case], **annotations)
        listed = sorted(spaces.values())
        suffix = listed[0]
        await cluster_policies(
            f"deadline-{suffix}",
            resources=["configmaps"],
            namespaces=listed,
            names=["enf"],
            enforce=True,
            lifecycle={"delete-after": f"{TTL}s"},
        )
        await cluster_policies(
            f"plain-{suffix}",
            resources=["configmaps"],
            namespaces=listed,
            names=["plain"],
            lifecycle={"delete-after": f"{TTL}s"},
        )
        for where in listed:
            await create(kube, CONFIGMAPS, where, labelled("enf", {}))
            await create(kube, CONFIGMAPS, where, labelled("plain", {}))
        # Overdue when the controller first sees them: catch-up never skips what is late.
        await older_than(kube, spaces["never"], "plain", TTL + 1)
        await start_controller(watch_resource=["configmaps"], watch_namespace=listed)

        for case, where in spaces.items():
            await wait_gone(kube, CONFIGMAPS, where, "enf", within=30)
            deleted = await wait_event(kube, where, "enf", "Deleted")
            assert deleted[-1][2].endswith(f"delete-after {TTL}s, enforced)"), (case, deleted)

        # The policy that is not enforced obeys each Namespace.
        await wait_event(kube, spaces["never"], "plain", "ActionSkipped")
        await wait_event(kube, spaces["window"], "plain", "ActionDeferred")
        await wait_event(kube, spaces["cap"], "plain", "DeleteTTLExceeded")
        await sentinel_gone(kube, spaces["invalid"], **{CATCH_UP: "always"})
        for where in listed:
            assert not await gone(kube, CONFIGMAPS, where, "plain"), where


async def test_an_exempt_namespace_is_left_alone_but_by_enforced_policies(
    policy_crds: None,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    cluster_policies: ClusterPolicies,
) -> None:
    """Caught: ``exempt`` on a Namespace exempted only the Namespace object; every policy
    deleted its objects at once."""
    await annotate_namespace(kube, namespace, **{EXEMPT: "true"})
    await cluster_policies(
        f"deadline-{namespace}",
        resources=["configmaps"],
        namespaces=[namespace],
        names=["enf"],
        enforce=True,
        lifecycle={"delete-after": "1s"},
    )
    plain = f"plain-{namespace}"
    await cluster_policies(
        plain,
        resources=["configmaps"],
        namespaces=[namespace],
        names=["kept"],
        lifecycle={"delete-after": "1s"},
    )
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "team",
            namespace,
            resources=["configmaps"],
            names=["kept"],
            lifecycle={"delete-after": "1s"},
        ),
    )
    await start_controller(watch_resource=["configmaps"], watch_namespace=[namespace])
    await create(kube, CONFIGMAPS, namespace, labelled("kept", {}))
    await create(kube, CONFIGMAPS, namespace, labelled("enf", {}))
    await wait_gone(kube, CONFIGMAPS, namespace, "enf", within=30)
    await sentinel_gone(kube, namespace)  # its own annotations still act there
    assert not await gone(kube, CONFIGMAPS, namespace, "kept")

    async def counted() -> bool:
        cluster = (await kube.get(CLUSTER_POLICIES, None, plain)).get("status") or {}
        team = (await kube.get(POLICIES, namespace, "team")).get("status") or {}
        return (cluster.get("exempt"), team.get("exempt")) == (1, 1) and (
            cluster.get("matched"),
            team.get("matched"),
        ) == (0, 0)

    await eventually(counted, within=30, what="status.exempt of both policies kept away")
    explained = await explain_object(
        kube,
        "configmap/kept",
        namespace=namespace,
        scope=ScopeConfig(),
        settings=DecisionSettings(),
        now_ns=RealClock().now_ns(),
    )
    assert explained.policies is not None
    assert explained.policies.exempt_namespace == namespace
    assert explained.why_nothing_happened is not None
    assert f"namespace {namespace} is exempt" in explained.why_nothing_happened

    # The Namespace loses its exemption: its objects are decided again, and go.
    await annotate_namespace(kube, namespace, **{EXEMPT: None})
    await wait_gone(kube, CONFIGMAPS, namespace, "kept", within=30)
