"""A policy's ``limit`` and its audit on the real API server (docs/policies.md#limit, #audit;
docs/reliability.md#policy-audit).

A limit of 2 per 20 s over 5 due ConfigMaps deletes 2 and holds 3 (the status shows them held,
``Limited=True`` and one Warning), then lets them go as the window frees up. The audit in the
policy's status survives a controller restart without counting anything twice, and so does a
long window with its waiters. A DELETE the API server refuses does not count against the
limit, and a policy deleted and applied again starts with an empty window. An object another
policy takes over leaves the line; a deletion held past its catch-up is late, not skipped;
a namespaced limit never delays an enforced deadline. A limit holds across a restart that
came before any status write: its places were recorded before they were used.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from lifecycle_controller.controller.policy.status import PolicyStatusWriter
from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from tests.integration.controller import StartController
from tests.integration.events import EventRecord, event_records, wait_for_event
from tests.integration.policy_tools import (
    cluster_policy,
    create_configmap,
    labelled,
    namespaced_policy,
)
from tests.integration.scenario_support import create, gone, start_for, wait_gone
from tests.integration.support import eventually

LIMITED = {"limit-test": "yes"}
S = 1_000_000_000


async def _names(kube: KubeClient, namespace: str) -> list[str]:
    listing = await kube.request("GET", CONFIGMAPS.collection_path(namespace))
    return sorted(
        item["metadata"]["name"]
        for item in listing["items"]
        if item["metadata"].get("labels") == LIMITED
    )


async def _status(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    policy = await kube.get(POLICIES, namespace, name)
    status: dict[str, Any] = policy.get("status") or {}
    return status


async def _limit_warnings(kube: KubeClient, namespace: str) -> list[EventRecord]:
    records = await event_records(kube, namespace, "capped")
    return [e for e in records if e.reason == "PolicyLimitReached"]


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or () if c.get("type") == kind), {})


@pytest.mark.long  # two turns of a 20 s window
async def test_a_limit_holds_the_rest_and_releases_them_as_the_window_frees(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(kube, POLICIES, namespace, _capped(namespace, actions=2, window="20s"))
    for index in range(5):
        await create_configmap(kube, namespace, labelled(f"due-{index}", LIMITED))
    await asyncio.sleep(1.5)  # every one is due before the controller starts
    await start_for(start_controller, namespace)

    async def two_gone() -> bool:
        return len(await _names(kube, namespace)) == 3

    await eventually(two_gone, within=30, what="two deletions")

    async def held_shown() -> bool:
        status = await _status(kube, namespace, "capped")
        return (status.get("actions") or {}).get("held") == 3

    await eventually(held_shown, within=20, what="status.actions.held == 3")
    status = await _status(kube, namespace, "capped")
    limited = _condition(status, "Limited")
    assert limited["status"] == "True", status
    assert limited["reason"] == "LimitReached"
    assert limited["message"].startswith("2 actions in the last 20s; 3 held until ")
    assert len(await _names(kube, namespace)) == 3  # still held: the window has not freed
    warnings = await _limit_warnings(kube, namespace)
    assert len(warnings) == 1, warnings
    assert warnings[0].type == "Warning"

    async def all_gone() -> bool:
        return not await _names(kube, namespace)

    await eventually(all_gone, within=90, what="the held ones deleted as the window freed")

    async def settled() -> bool:
        status = await _status(kube, namespace, "capped")
        actions = status.get("actions") or {}
        return actions.get("deleted") == 5 and actions.get("held") == 0

    await eventually(settled, within=20, what="five deletions in the audit, none held")
    status = await _status(kube, namespace, "capped")
    assert _condition(status, "Limited")["status"] == "False"
    assert sorted(e["name"] for e in status["lastActions"]) == [f"due-{i}" for i in range(5)]
    stamps = [e["at"] for e in status["lastActions"]]
    assert stamps == sorted(stamps, reverse=True)  # newest first
    # No more than two went within any 20 s (the stamps are whole seconds).
    instants = sorted(parse_rfc3339(stamp) for stamp in stamps)
    assert all(b - a >= 19 * S for a, b in zip(instants, instants[2:], strict=False)), stamps
    assert len(await _limit_warnings(kube, namespace)) == 1  # one trip: it never stopped holding


async def test_the_audit_survives_a_restart_without_double_counts(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """A dry-run policy reports its 3 due objects; a new controller (as after a failover)
    reports them again, and nothing is counted twice; then a real deletion adds one."""
    for name, dry_run in (("rehearsal", "true"), ("real", "false")):
        await create(
            kube,
            POLICIES,
            namespace,
            namespaced_policy(
                name,
                namespace,
                resources=["configmaps"],
                selector={"matchLabels": {**LIMITED, "policy": name}},
                lifecycle={"delete-after": "1s", "dry-run": dry_run},
            ),
        )
    for index in range(3):
        body = labelled(f"kept-{index}", {**LIMITED, "policy": "rehearsal"})
        await create_configmap(kube, namespace, body)
    await asyncio.sleep(1.5)
    first = await start_for(start_controller, namespace)

    async def reported(count: int) -> bool:
        status = await _status(kube, namespace, "rehearsal")
        return (status.get("actions") or {}).get("dryRun") == count

    await eventually(lambda: reported(3), within=30, what="three dry-run reports in the audit")
    before = await _status(kube, namespace, "rehearsal")
    await first.stop()

    second = await start_for(start_controller, namespace)
    await create_configmap(kube, namespace, labelled("goes", {**LIMITED, "policy": "real"}))

    async def deleted() -> bool:
        status = await _status(kube, namespace, "real")
        return (status.get("actions") or {}).get("deleted") == 1

    await eventually(deleted, within=30, what="the real policy's deletion in its audit")
    await asyncio.sleep(6)  # more than one status write interval of the second controller
    after = await _status(kube, namespace, "rehearsal")
    assert after["actions"]["dryRun"] == 3, after
    assert after["lastActions"] == before["lastActions"]
    occurrences = [e["occurrence"] for e in after["lastActions"]]
    assert len(set(occurrences)) == 3
    assert all(e["dryRun"] is True for e in after["lastActions"])
    real = await _status(kube, namespace, "real")
    assert [e["name"] for e in real["lastActions"]] == ["goes"]
    assert real["actions"]["dryRun"] == 0
    await second.stop()


def _capped(
    namespace: str, *, actions: int = 1, window: str = "1h", catch_up: str | None = None
) -> dict[str, Any]:
    """``actions`` per ``window`` (one per hour) over the labelled ConfigMaps, each due a
    second after creation (and caught up within ``catch_up``, given one)."""
    lifecycle = (
        {"delete-after": "1s"} if catch_up is None else {"delete-after": "1s", "catch-up": catch_up}
    )
    return namespaced_policy(
        "capped",
        namespace,
        resources=["configmaps"],
        selector={"matchLabels": LIMITED},
        limit={"actions": actions, "window": window},
        lifecycle=lifecycle,
    )


async def test_a_delete_the_api_server_refuses_does_not_count_against_the_limit(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
) -> None:
    """Limit 1 per hour. The controller may delete ``second`` but not ``first`` (RBAC by
    resource name): the DELETE of ``first``, due first, fails (403), which does not use up
    the hour's one action, so ``second`` is deleted when it falls due, not an hour later."""
    await create(kube, POLICIES, namespace, _capped(namespace))

    def rule(group: str, resource: str, *verbs: str, **more: list[str]) -> dict[str, Any]:
        return {"apiGroups": [group], "resources": [resource], "verbs": list(verbs), **more}

    rules = [
        rule("", "configmaps", "get", "list", "watch", "patch"),
        rule("", "configmaps", "delete", resourceNames=["second"]),
        rule("", "events", "create", "patch"),
        rule("events.k8s.io", "events", "create", "patch"),
    ]
    policies = [  # the controller reads both policy kinds cluster-wide
        rule("lifecycle.cezary.dev", "lifecyclepolicies", "get", "list", "watch"),
        rule("lifecycle.cezary.dev", "clusterlifecyclepolicies", "get", "list", "watch"),
        rule("lifecycle.cezary.dev", "lifecyclepolicies/status", "patch"),
    ]
    kubeconfig = await asyncio.to_thread(
        control_plane.user_kubeconfig,
        f"limit-{namespace}",
        cluster_rules=policies,
        namespaced_rules={namespace: rules},
    )
    await start_for(start_controller, namespace, kubeconfig=str(kubeconfig))
    await create_configmap(kube, namespace, labelled("first", LIMITED))
    failed = await wait_for_event(kube, namespace, "first", "DeletionFailed")
    assert "forbidden" in failed.note, failed.note  # it took the hour's one place, and failed
    await create_configmap(kube, namespace, labelled("second", LIMITED))
    await wait_gone(kube, CONFIGMAPS, namespace, "second", within=30)
    assert not await gone(kube, CONFIGMAPS, namespace, "first")

    async def audited() -> bool:
        status = await _status(kube, namespace, "capped")
        return (status.get("actions") or {}).get("deleted") == 1

    await eventually(audited, within=20, what="the one deletion done in the audit")
    status = await _status(kube, namespace, "capped")
    assert [e["name"] for e in status["lastActions"]] == ["second"]


async def test_a_policy_applied_again_starts_with_an_empty_window(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Limit 1 per hour: the policy deletes one ConfigMap, then is deleted; applied again
    under the same name it deletes the next due one at once (its predecessor's window went
    with it, as its audit did)."""
    running = await start_for(start_controller, namespace)
    await create(kube, POLICIES, namespace, _capped(namespace))
    await create_configmap(kube, namespace, labelled("before", LIMITED))
    await wait_gone(kube, CONFIGMAPS, namespace, "before", within=30)
    await kube.request("DELETE", POLICIES.object_path(namespace, "capped"))
    pipeline = running.controller.pipeline
    assert pipeline is not None
    decisions = pipeline.reconciler.policies
    assert decisions is not None

    async def forgotten() -> bool:
        return not decisions.store.current

    await eventually(forgotten, within=20, what="the controller to see the policy deleted")
    await create(kube, POLICIES, namespace, _capped(namespace))
    await create_configmap(kube, namespace, labelled("after", LIMITED))
    await wait_gone(kube, CONFIGMAPS, namespace, "after", within=30)


async def _held(kube: KubeClient, namespace: str, name: str) -> int | None:
    actions = (await _status(kube, namespace, name)).get("actions") or {}
    held = actions.get("held")
    return held if isinstance(held, int) else None


async def test_a_held_object_another_policy_takes_over_leaves_the_line(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """The ghost waiter: ``ghost`` waits for ``capped``'s limit (1 per 15 s) when a
    namespaced rehearsal of higher priority takes it over. ``capped`` holds nothing any more
    (its status says so), and the next object due is deleted when the window frees, not
    held for good behind the ghost (caught: ``held: 1`` and ``Limited=True`` for good, and
    ``after`` never deleted)."""
    await create(kube, POLICIES, namespace, _capped(namespace, window="15s"))
    await start_for(start_controller, namespace)
    await create_configmap(kube, namespace, labelled("first", LIMITED))
    await wait_gone(kube, CONFIGMAPS, namespace, "first", within=30)
    takeover = {**LIMITED, "takeover": "yes"}
    await create_configmap(kube, namespace, labelled("ghost", takeover))

    async def held(count: int) -> bool:
        return await _held(kube, namespace, "capped") == count

    await eventually(lambda: held(1), within=20, what="the ghost held by capped's limit")
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "rehearsal",
            namespace,
            resources=["configmaps"],
            priority=10,
            selector={"matchLabels": {"takeover": "yes"}},
            lifecycle={"delete-after": "1s", "dry-run": "true"},
        ),
    )
    await eventually(lambda: held(0), within=20, what="capped holding nothing any more")
    status = await _status(kube, namespace, "capped")
    assert _condition(status, "Limited")["status"] == "False", status
    await create_configmap(kube, namespace, labelled("after", LIMITED))
    await wait_gone(kube, CONFIGMAPS, namespace, "after", within=45)
    assert not await gone(kube, CONFIGMAPS, namespace, "ghost")  # the rehearsal's now


async def test_a_deletion_held_past_its_catch_up_is_late_by_the_hold_not_skipped(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """``catch-up: 5s`` and a limit of 1 per 12 s over two objects due at once: the second
    is held about 12 s, longer than its catch-up, and is still deleted when its place frees
    (caught: it was decided then as a skipped occurrence, and never deleted)."""
    await create(kube, POLICIES, namespace, _capped(namespace, window="12s", catch_up="5s"))
    for name in ("one", "two"):
        await create_configmap(kube, namespace, labelled(name, LIMITED))
    await start_for(start_controller, namespace)

    async def one_left() -> bool:
        return len(await _names(kube, namespace)) == 1

    await eventually(one_left, within=30, what="one deleted, one held")

    async def none_left() -> bool:
        return not await _names(kube, namespace)

    await eventually(none_left, within=45, what="the held one deleted when its place freed")

    async def audited() -> bool:
        actions = (await _status(kube, namespace, "capped")).get("actions") or {}
        return actions.get("deleted") == 2

    await eventually(audited, within=20, what="two deletions in the audit")


async def test_a_namespaced_limit_never_delays_an_enforced_deadline(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """An enforced cluster policy deletes after 20 s; a LifecyclePolicy deletes after 1 s with
    a limit of 1 per 30 days, so it wins as the sooner contender and then holds the second
    object. At the enforced deadline the enforced policy deletes it (caught: held 30 days)."""
    deadline = f"deadline-{namespace}"
    await create(
        kube,
        CLUSTER_POLICIES,
        None,
        cluster_policy(
            deadline,
            resources=["configmaps"],
            namespaces=[namespace],
            selector={"matchLabels": LIMITED},
            enforce=True,
            lifecycle={"delete-after": "20s"},
        ),
    )
    try:
        await create(kube, POLICIES, namespace, _capped(namespace, window="720h"))
        await start_for(start_controller, namespace)
        await create_configmap(kube, namespace, labelled("sooner", LIMITED))
        await wait_gone(kube, CONFIGMAPS, namespace, "sooner", within=30)
        await create_configmap(kube, namespace, labelled("deadline", LIMITED))

        async def held() -> bool:
            return await _held(kube, namespace, "capped") == 1

        await eventually(held, within=20, what="capped's limit holding the second object")
        await wait_gone(kube, CONFIGMAPS, namespace, "deadline", within=60)
        deleted = await wait_for_event(kube, namespace, "deadline", "Deleted")
        assert f"ClusterLifecyclePolicy/{deadline}" in deleted.note, deleted.note
        assert "enforced" in deleted.note
    finally:
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, deadline))


async def test_a_long_window_limit_survives_a_restart_with_its_waiters(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Limit 1 per hour over three due objects: one deleted, two held. A new controller (as
    after a restart or a failover) seeds the window from the status, so it holds both
    again; it does not delete one more (caught: a window not seeded lets one go)."""
    await create(kube, POLICIES, namespace, _capped(namespace))
    for index in range(3):
        await create_configmap(kube, namespace, labelled(f"due-{index}", LIMITED))
    await asyncio.sleep(1.5)  # every one is due before the controller starts
    first = await start_for(start_controller, namespace)

    async def audited() -> bool:
        status = await _status(kube, namespace, "capped")
        actions = status.get("actions") or {}
        return actions.get("deleted") == 1 and actions.get("held") == 2

    await eventually(audited, within=30, what="one deletion in the audit, two held")
    await first.stop()

    second = await start_for(start_controller, namespace)
    pipeline = second.controller.pipeline
    assert pipeline is not None
    decisions = pipeline.reconciler.policies
    assert decisions is not None
    ref = decisions.store.docs()[0].ref

    async def holding_both() -> bool:
        state = decisions.limits.state(ref, second.controller.clock.now_ns())
        return state is not None and (state.used, state.held) == (1, 2)

    await eventually(holding_both, within=30, what="the new controller holding both")
    assert len(await _names(kube, namespace)) == 2
    status = await _status(kube, namespace, "capped")
    assert _condition(status, "Limited")["status"] == "True", status
    assert status["actions"]["deleted"] == 1
    await second.stop()


async def test_a_new_controller_seeds_the_window_from_the_audit(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Limit 1 per hour: one controller deletes ``first`` and writes it into the audit; a new
    one (as after a restart or a failover) holds ``second``, due at once, for the rest of the
    hour, since the window it starts with is the audit's ``lastActions``.

    Caught (a mutation that passed every other test): the new controller started with an
    empty window and deleted ``second`` at once."""
    await create(kube, POLICIES, namespace, _capped(namespace))
    first = await start_for(start_controller, namespace)
    await create_configmap(kube, namespace, labelled("first", LIMITED))
    await wait_gone(kube, CONFIGMAPS, namespace, "first", within=30)

    async def audited() -> bool:
        status = await _status(kube, namespace, "capped")
        return [e["name"] for e in status.get("lastActions") or ()] == ["first"]

    await eventually(audited, within=20, what="the deletion of first in the audit")
    await first.stop()

    await start_for(start_controller, namespace)
    await create_configmap(kube, namespace, labelled("second", LIMITED))

    async def decided() -> bool:  # held by the seeded window, or (the bug) deleted
        status = await _status(kube, namespace, "capped")
        held = (status.get("actions") or {}).get("held") == 1
        return held or await gone(kube, CONFIGMAPS, namespace, "second")

    await eventually(decided, within=30, what="second held by the limit")
    assert not await gone(kube, CONFIGMAPS, namespace, "second"), "the window started empty"
    status = await _status(kube, namespace, "capped")
    assert _condition(status, "Limited").get("status") == "True", status
    assert status["actions"]["deleted"] == 1, status


async def test_a_long_window_limit_holds_across_a_restart_before_any_status_write(
    policy_crds: None,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Limit 2 per hour over 4 due objects. The first controller deletes 2 and stops before
    its status writer has written anything (as a SIGKILL between two status writes: its
    writer is made to write nothing). A new controller holds the other two for the hour,
    its window seeded from the places recorded before they were used, and once it has
    decided everything it counts the first one's two deletions in the audit: exactly 2.

    Caught on the code before the places were recorded: the new controller's window, seeded
    from an audit that never saw the two deletions, let the other two go at once."""

    async def never(self: PolicyStatusWriter) -> None:
        return None

    await create(kube, POLICIES, namespace, _capped(namespace, actions=2))
    for index in range(4):
        await create_configmap(kube, namespace, labelled(f"due-{index}", LIMITED))
    await asyncio.sleep(1.5)  # every one is due before the controller starts
    monkeypatch.setattr(PolicyStatusWriter, "flush", never)
    first = await start_for(start_controller, namespace)

    async def two_gone() -> bool:
        return len(await _names(kube, namespace)) == 2

    await eventually(two_gone, within=30, what="two deletions")
    await first.stop()
    status = await _status(kube, namespace, "capped")
    record = status["limit"]  # every place used was recorded before it was used
    places = [*record.get("groups", ()), *record.get("batches", ())]
    assert sum(entry["count"] for entry in places) >= 2, status
    monkeypatch.undo()

    await start_for(start_controller, namespace)

    async def decided() -> bool:  # held by the recorded places, or (the bug) deleted
        status = await _status(kube, namespace, "capped")
        held = (status.get("actions") or {}).get("held") == 2
        return held or len(await _names(kube, namespace)) < 2

    await eventually(decided, within=30, what="the two others held by the limit")
    assert len(await _names(kube, namespace)) == 2, "the limit was exceeded across the restart"

    async def counted() -> bool:
        status = await _status(kube, namespace, "capped")
        return (status.get("actions") or {}).get("deleted") == 2

    await eventually(counted, within=40, what="the first controller's deletions in the audit")
    status = await _status(kube, namespace, "capped")
    assert sorted(e["name"] for e in status["lastActions"]) == ["due-0", "due-1"], status
    assert len(await _names(kube, namespace)) == 2
