"""The annotation-copy rule: which objects carry their owner's annotations, and decide() on them."""

from __future__ import annotations

import dataclasses

import pytest

from lifecycle_controller.core import DecisionSettings, Idle, Invalid
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.copies import controller_owner, is_annotation_copy
from lifecycle_controller.core.objects.resources import ResourceType

from .support import CONFIGMAP, run

REPLICASETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", True)
REVISIONS = ResourceType("apps", "v1", "controllerrevisions", "ControllerRevision", True)
PODS = ResourceType("", "v1", "pods", "Pod", True)
JOBS = ResourceType("batch", "v1", "jobs", "Job", True)


@pytest.mark.parametrize(
    ("resource", "owner", "copy"),
    [
        (REPLICASETS, ("apps", "Deployment"), True),
        (REVISIONS, ("apps", "StatefulSet"), True),
        (REVISIONS, ("apps", "DaemonSet"), True),
        (REPLICASETS, None, False),  # a bare ReplicaSet is the user's own
        (REPLICASETS, ("example.com", "Deployment"), False),  # another group's Deployment
        (REVISIONS, ("apps", "Deployment"), False),
        (PODS, ("apps", "ReplicaSet"), False),  # Pods take annotations from the template
        (JOBS, ("batch", "CronJob"), False),  # so do a CronJob's Jobs
    ],
)
def test_copying_owners(resource: ResourceType, owner: tuple[str, str] | None, copy: bool) -> None:
    assert is_annotation_copy(resource, owner) is copy


def test_controller_owner_is_the_reference_marked_controller() -> None:
    metadata = {
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"},
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True},
        ]
    }
    assert controller_owner(metadata) == ("apps", "Deployment")
    assert controller_owner({"ownerReferences": [{"kind": "Node", "apiVersion": "v1"}]}) is None
    assert controller_owner(
        {"ownerReferences": [{"kind": "Node", "apiVersion": "v1", "controller": True}]}
    ) == ("", "Node")
    assert controller_owner({}) is None
    assert controller_owner({"ownerReferences": ["garbage"]}) is None


def test_decide_ignores_a_copy_unless_told_to_act_on_copies() -> None:
    copy = dataclasses.replace(
        CONFIGMAP,
        key=dataclasses.replace(CONFIGMAP.key, resource=REPLICASETS),
        controller_owner=("apps", "Deployment"),
    )
    due = {keys.RESTART_CRON: "* * * * *", keys.LAST_RESTART_TIMESTAMP: "2000-01-01T00:00:00Z"}
    ignored = run(due, facts=copy)
    assert isinstance(ignored, Idle)
    assert ignored.events == ()
    acted = run(due, facts=copy, settings=DecisionSettings(act_on_annotation_copies=True))
    assert isinstance(acted, Invalid)  # the old behaviour: a restart on a ReplicaSet
    assert acted.reason == "UnsupportedRestartKind"
