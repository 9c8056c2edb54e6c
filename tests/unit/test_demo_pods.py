"""The demo's account of Pods replaced by restarts (lifecycle_controller/tools/demo_pods.py)."""

from __future__ import annotations

from typing import Any

from lifecycle_controller.core.objects.keys import RESTARTED_AT
from lifecycle_controller.tools.demo_pods import DemoPods, PodSighting

FIRST = "2026-12-03T10:00:15Z"
SECOND = "2026-12-03T10:01:00Z"


def _pod(
    name: str,
    deployment: str | None = "web",
    marker: str | None = None,
    *,
    ready: bool = True,
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"app": "web"}}
    if deployment is not None:
        metadata["labels"]["demo"] = deployment
    if marker is not None:
        metadata["annotations"] = {RESTARTED_AT: marker}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-03T10:00:20Z"
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": metadata, "status": {"phase": "Running", "conditions": [condition]}}


def test_a_sighting_reads_the_deployment_marker_and_whether_the_pod_serves() -> None:
    assert PodSighting.of(_pod("a", marker=FIRST), label="demo") == PodSighting(
        "a", "web", FIRST, serving=True
    )
    assert PodSighting.of(_pod("b", ready=False), label="demo") == PodSighting(
        "b", "web", None, serving=False
    )
    deleting = PodSighting.of(_pod("c", deleting=True), label="demo")
    assert deleting is not None
    assert not deleting.serving
    assert PodSighting.of(_pod("d", deployment=None), label="demo") is None
    pending = {"metadata": {"name": "e", "labels": {"demo": "web"}}, "status": {"phase": "Pending"}}
    assert PodSighting.of(pending, label="demo") == PodSighting("e", "web", None, serving=False)


def test_a_restart_is_told_once_when_all_its_pods_serve_and_the_old_ones_are_gone() -> None:
    pods = DemoPods()
    assert pods.observe([_pod("web-a"), _pod("web-b")]) == []
    # Mid-rollout: one new Pod not Ready yet, the old ones still there.
    assert (
        pods.observe([_pod("web-a"), _pod("web-b"), _pod("web-c", marker=FIRST, ready=False)]) == []
    )
    # One new Pod serves, an old one is being deleted: still not done.
    listing = [_pod("web-a", deleting=True), _pod("web-b"), _pod("web-c", marker=FIRST)]
    assert pods.observe(listing) == []
    done = [_pod("web-c", marker=FIRST), _pod("web-d", marker=FIRST)]
    assert pods.observe(done) == [
        "Deployment web: restart of 10:00:15 replaced Pods web-a, web-b with web-c, web-d"
    ]
    assert pods.observe(done) == []  # told once
    assert pods.summary("web") == [
        "Deployment web: 1 restart(s)",
        "  10:00:15: Pods web-a, web-b replaced by web-c, web-d (done)",
    ]


def test_the_summary_tells_each_restart_and_one_still_rolling_out() -> None:
    pods = DemoPods()
    pods.observe([_pod("w-a", "worker")])
    pods.observe([_pod("w-b", "worker", FIRST)])
    pods.observe([_pod("w-b", "worker", FIRST), _pod("w-c", "worker", SECOND, ready=False)])
    assert pods.summary("worker") == [
        "Deployment worker: 2 restart(s)",
        "  10:00:15: Pods w-a replaced by w-b (done)",
        "  10:01:00: Pods w-b replaced by w-c (still rolling out)",
    ]


def test_a_deployment_never_restarted_or_never_seen() -> None:
    pods = DemoPods()
    pods.observe([_pod("web-a"), _pod("other", deployment=None)])
    assert pods.summary("web") == ["Deployment web: not restarted (Pods: web-a)"]
    assert pods.summary("worker") == ["Deployment worker: not restarted (Pods: none seen)"]


def test_pods_seen_only_after_a_restart_have_no_predecessors_to_name() -> None:
    pods = DemoPods()
    assert pods.observe([_pod("web-c", marker=FIRST)]) == [
        "Deployment web: restart of 10:00:15 replaced Pods none seen with web-c"
    ]
    assert pods.summary("web")[1] == "  10:00:15: Pods none seen replaced by web-c (done)"
