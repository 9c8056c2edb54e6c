"""Events through events.k8s.io/v1 on the real API server: placement, series, dedupe."""

from __future__ import annotations

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.core import Event, EventType, ObjectKey, ObjectRef
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import NAMESPACES, KubeClient
from lifecycle_controller.kube.microtime import micro_time
from lifecycle_controller.machinery.clock import RealClock
from tests.integration.events import list_events
from tests.integration.support import CONFIGMAPS, configmap


def test_micro_time_always_has_six_fraction_digits() -> None:
    assert micro_time(1_767_225_600_000_000_000) == "2026-01-01T00:00:00.000000Z"
    assert micro_time(1_767_225_600_123_456_789) == "2026-01-01T00:00:00.123456Z"


async def test_event_regarding_namespaced_object_and_series(
    kube: KubeClient, namespace: str
) -> None:
    created = await kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/configmaps", body=configmap("subject")
    )
    meta = created["metadata"]
    ref = ObjectRef(
        ObjectKey(CONFIGMAPS, namespace, "subject"), meta["uid"], meta["resourceVersion"]
    )
    recorder = KubeEventRecorder(kube, clock=RealClock(), reporting_instance="test-instance")

    await recorder.record(ref, Event(EventType.NORMAL, "Deleted", "Resource deleted: 100% sure"))
    await recorder.record(ref, Event(EventType.NORMAL, "Deleted", "Resource deleted: 100% sure"))
    await recorder.record(ref, Event(EventType.WARNING, "IgnoredAnnotation", "once", "tz=x"))
    await recorder.record(ref, Event(EventType.WARNING, "IgnoredAnnotation", "once", "tz=x"))

    events = await list_events(kube, namespace, "subject", reporter=None)
    by_reason = {event["reason"]: event for event in events}
    assert sorted(by_reason) == ["Deleted", "IgnoredAnnotation"]
    assert len(events) == 2
    deleted = by_reason["Deleted"]
    assert deleted["note"] == "Resource deleted: 100% sure"
    assert deleted["type"] == "Normal"
    assert deleted["action"] == "Reconcile"
    assert deleted["reportingController"] == "lifecycle-controller"
    assert deleted["regarding"]["uid"] == meta["uid"]
    assert deleted["series"]["count"] == 2
    assert "series" not in by_reason["IgnoredAnnotation"]

    # The same Event is visible through the core v1 API, as operators' tools read it.
    core_events = await kube.request("GET", f"/api/v1/namespaces/{namespace}/events")
    assert any(e["involvedObject"]["name"] == "subject" for e in core_events["items"])


async def test_cluster_scoped_object_events_go_to_default(
    kube: KubeClient, control_plane: ControlPlane
) -> None:
    ref = ObjectRef(ObjectKey(NAMESPACES, None, "some-cluster-object"), "uid-cluster-scoped-test")
    recorder = KubeEventRecorder(kube, clock=RealClock(), reporting_instance="test-instance")
    await recorder.record(ref, Event(EventType.WARNING, "InvalidAnnotation", "bad value"))
    events = await list_events(kube, "default", "some-cluster-object", reporter=None)
    assert [e["reason"] for e in events] == ["InvalidAnnotation"]


async def test_event_failure_is_swallowed(control_plane: ControlPlane, namespace: str) -> None:
    kubeconfig = control_plane.user_kubeconfig(f"no-events-{namespace}")
    async with await KubeClient.connect(str(kubeconfig)) as powerless:
        recorder = KubeEventRecorder(powerless, clock=RealClock(), reporting_instance="x")
        ref = ObjectRef(ObjectKey(CONFIGMAPS, namespace, "x"), "uid-x")
        await recorder.record(ref, Event(EventType.NORMAL, "Deleted", "forbidden but harmless"))
    response = control_plane.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    assert response.status == 200
    assert response.body["items"] == []
