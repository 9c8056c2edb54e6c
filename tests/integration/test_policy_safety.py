"""The policies' safety rules on the real control plane (docs/policies.md#safety-rules).

Each test runs the real controller against the real API server and names, in its docstring,
what it caught in the semantics these rules replaced. Where a test shows that something is
*not* done, a sentinel object with its own short ``delete-after``, created after the object
under test, must be gone first: the controller has then had every chance to act on the
object under test, which the old semantics deleted at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from tests.integration.controller import StartController
from tests.integration.events import wait_event
from tests.integration.keys import DELETE_AFTER, DELETE_AT, DRY_RUN, RESTART_AT, P
from tests.integration.policy_tools import ClusterPolicies, labelled, namespaced_policy
from tests.integration.scenario_support import create, gone, start_for, wait_gone
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, deployment, eventually

EXEMPT = P + "exempt"


async def sentinel_gone(kube: KubeClient, namespace: str, name: str = "sentinel") -> None:
    """Create an object with its own 1 s TTL and wait until the controller deleted it."""
    await create(kube, CONFIGMAPS, namespace, labelled(name, {}, **{DELETE_AFTER: "1s"}))
    await wait_gone(kube, CONFIGMAPS, namespace, name, within=30)


async def test_a_restart_policy_does_not_shadow_a_deletion_policy(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Caught: a priority-10 restart policy made the deletion policy "overlapped" on the same
    Deployments, which were then never deleted; and an object's own invalid restart
    annotation took a ConfigMap out of every policy."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "nightly",
            namespace,
            resources=["deployments.apps"],
            priority=10,
            lifecycle={"restart-every": "24h"},
        ),
    )
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "previews",
            namespace,
            resources=["deployments.apps", "configmaps"],
            lifecycle={"delete-after": "2s"},
        ),
    )
    await start_for(start_controller, namespace, "deployments.apps", "configmaps")
    await create(kube, DEPLOYMENTS, namespace, deployment("preview"))
    await create(kube, CONFIGMAPS, namespace, labelled("garbled", {}, **{RESTART_AT: "garbage"}))
    await wait_gone(kube, DEPLOYMENTS, namespace, "preview", within=30)
    await wait_gone(kube, CONFIGMAPS, namespace, "garbled", within=30)
    deleted = await wait_event(kube, namespace, "preview", "Deleted")
    assert "previews: delete-after 2s" in deleted[-1][2]


async def test_an_objects_dry_run_false_does_not_cancel_a_policy_rehearsal(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Caught: an object's own ``dry-run: "false"`` turned the policy's dry run into a real
    deletion, the documented way to roll a policy out."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "rehearsal",
            namespace,
            resources=["configmaps"],
            names=["tmp-*"],
            lifecycle={"delete-after": "1s", "dry-run": "true"},
        ),
    )
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("tmp-1", {}, **{DRY_RUN: "false"}))
    dry = await wait_event(kube, namespace, "tmp-1", "DryRunDelete", within=30)
    assert "rehearsal" in dry[-1][2]
    await sentinel_gone(kube, namespace)
    assert not await gone(kube, CONFIGMAPS, namespace, "tmp-1")


async def test_a_delete_at_policy_leaves_objects_created_after_its_time(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Caught: once a ``delete-at`` policy's time had passed, every new matching object was
    deleted the moment it appeared ("no previews can ever exist again")."""
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("before", {"sprint": "42"}))
    at = datetime.now(UTC) + timedelta(seconds=3)
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "end-of-sprint",
            namespace,
            resources=["configmaps"],
            selector={"matchLabels": {"sprint": "42"}},
            lifecycle={"delete-at": at.strftime("%Y-%m-%dT%H:%M:%SZ")},
        ),
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "before", within=30)
    await create(kube, CONFIGMAPS, namespace, labelled("after", {"sprint": "42"}))
    await sentinel_gone(kube, namespace)
    assert not await gone(kube, CONFIGMAPS, namespace, "after")


async def test_a_catch_all_cluster_policy_does_not_reach_kube_system(
    policy_crds: None,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    cluster_policies: ClusterPolicies,
) -> None:
    """Caught: a cluster policy without ``namespaces`` matched objects in kube-system."""
    name = f"catch-all-{namespace}"
    await cluster_policies(
        name,
        resources=["configmaps"],
        names=[f"{namespace}-*"],
        lifecycle={"delete-after": "1s"},
    )
    await start_controller(
        watch_resource=["configmaps"], watch_namespace=[namespace, "kube-system"]
    )
    victim = f"{namespace}-system"
    await create(kube, CONFIGMAPS, "kube-system", labelled(victim, {}))
    try:
        await create(kube, CONFIGMAPS, namespace, labelled(f"{namespace}-team", {}))
        await wait_gone(kube, CONFIGMAPS, namespace, f"{namespace}-team", within=30)
        await sentinel_gone(kube, namespace)
        assert not await gone(kube, CONFIGMAPS, "kube-system", victim)

        async def counted() -> bool:
            policy = await kube.get(CLUSTER_POLICIES, None, name)
            return (policy.get("status") or {}).get("protected") == 1

        await eventually(counted, within=30, what="status.protected of the catch-all policy")
    finally:
        await kube.request("DELETE", CONFIGMAPS.object_path("kube-system", victim))


async def test_an_invalid_policy_holds_what_it_would_match(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Caught: a typo in a team's "keep these" policy made it drop out of precedence and
    the cleanup policy below it deleted what the team meant to keep; and a condition that
    erred on an object counted as "no match" and let the policy below act."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "keep",
            namespace,
            resources=["configmaps"],
            priority=100,
            selector={"matchLabels": {"keep": "yes"}},
            condition="object.metadata.labels[",  # does not compile: the policy is invalid
            lifecycle={"delete-after": "8760h"},
        ),
    )
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "by-team",
            namespace,
            resources=["configmaps"],
            priority=50,
            selector={"matchLabels": {"by": "team"}},
            condition='object.metadata.labels["team"] != "core"',  # errs without a team label
            lifecycle={"delete-after": "8760h"},
        ),
    )
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "cleanup", namespace, resources=["configmaps"], lifecycle={"delete-after": "1s"}
        ),
    )
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("kept", {"keep": "yes"}))
    await create(kube, CONFIGMAPS, namespace, labelled("no-team", {"by": "team"}))
    await create(kube, CONFIGMAPS, namespace, labelled("other", {}))
    await wait_gone(kube, CONFIGMAPS, namespace, "other", within=30)
    await sentinel_gone(kube, namespace)
    assert not await gone(kube, CONFIGMAPS, namespace, "kept")
    assert not await gone(kube, CONFIGMAPS, namespace, "no-team")

    async def held() -> bool:
        keep = (await kube.get(POLICIES, namespace, "keep")).get("status") or {}
        team = (await kube.get(POLICIES, namespace, "by-team")).get("status") or {}
        return keep.get("held") == 1 and team.get("held") == 1

    await eventually(held, within=30, what="status.held of both holding policies")
    warned = await wait_event(kube, namespace, "by-team", "PolicyConditionFailed", within=30)
    assert "no-team" in warned[-1][2]


async def test_an_enforced_cluster_policy_wins(
    policy_crds: None,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    cluster_policies: ClusterPolicies,
) -> None:
    """Caught: a namespaced ``delete-at: 2999-01-01`` beat a priority-1000 cluster policy,
    and an object's own action annotation or ``exempt`` took it out of every policy."""
    name = f"deadline-{namespace}"
    await cluster_policies(
        name,
        resources=["configmaps"],
        namespaces=[namespace],
        names=["enf-*"],
        priority=1000,
        enforce=True,
        lifecycle={"delete-after": "2s"},
    )
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "far",
            namespace,
            resources=["configmaps"],
            lifecycle={"delete-at": "2999-01-01T00:00:00Z"},
        ),
    )
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("enf-plain", {}))
    await create(kube, CONFIGMAPS, namespace, labelled("enf-exempt", {}, **{EXEMPT: "true"}))
    await create(
        kube,
        CONFIGMAPS,
        namespace,
        labelled("enf-own", {}, **{DELETE_AT: "2999-01-01T00:00:00Z"}),
    )
    for victim in ("enf-plain", "enf-exempt", "enf-own"):
        await wait_gone(kube, CONFIGMAPS, namespace, victim, within=30)
    deleted = await wait_event(kube, namespace, "enf-own", "Deleted")
    assert f"ClusterLifecyclePolicy/{name}" in deleted[-1][2]
