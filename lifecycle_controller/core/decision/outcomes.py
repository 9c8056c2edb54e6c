"""The inputs and the output of :func:`decide`: facts, settings and the decision types.

A decision tells the caller everything it needs to carry out at most one API call, and
what to do around it:

* ``events`` and ``ledger_ops`` apply at once, whatever happens next (warnings emitted
  before the action, the ``never`` occurrence check, forgetting an arm);
* a :class:`Patch` or :class:`Delete` carries the write, then an :class:`Outcome` to apply
  only if the write succeeds (Events, ledger operations, requeue delay) and a
  :class:`Failure` that turns the error text into the Warning Event to emit if it fails;
* every other decision writes nothing: :class:`Idle`, :class:`Invalid`, :class:`Wait` and
  :class:`DryRun` (see their docs for requeueing).

``action``, ``due_ns`` and ``log`` are metadata for metrics and the log line.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import Any

from lifecycle_controller.core.decision.events import Event, Failure
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.schedule.catchup import ALWAYS, CatchUpRule, LedgerOp
from lifecycle_controller.core.schedule.windows import MaintenanceWindows

__all__ = [
    "Action",
    "Decision",
    "DecisionSettings",
    "Delete",
    "DryRun",
    "Failure",
    "Idle",
    "Invalid",
    "ObjectFacts",
    "Operation",
    "Outcome",
    "Patch",
    "Refusal",
    "Wait",
]


class Action(enum.StrEnum):
    DELETE = "delete"
    RESTART = "restart"


class Operation(enum.StrEnum):
    """What a write (or, in dry-run, the write that was not made) is for."""

    CONVERT = "convert"  # -after -> -at
    CLEANUP = "cleanup"  # drop a redundant -after (creationTimestamp with an existing -at)
    INITIALIZE = "initialize"  # first last-restart-timestamp of a recurring schedule
    RESTART = "restart"  # template marker + acknowledgement
    SKIP = "skip"  # acknowledgement only (catch-up policy)
    DELETE = "delete"


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectFacts:
    """What decide() needs to know about the object besides its annotations.

    ``key`` names the object (and its resource type). ``has_pod_template``: pass True for
    apps Deployments, StatefulSets and DaemonSets (the API requires a template).
    ``restart_marker`` is the template's current ``lifecycle.cezary.dev/restartedAt`` as last
    seen by the caller (from its last restart patch response), or None; the new marker
    always differs from it.
    """

    key: ObjectKey
    uid: str
    resource_version: str
    creation_ns: int | None = None
    terminating: bool = False
    has_pod_template: bool = False
    restart_marker: str | None = None
    #: (group, kind) of the controlling owner reference, for the annotation-copy rule.
    controller_owner: tuple[str, str] | None = None

    @property
    def kind(self) -> str:
        return self.key.resource.kind

    @property
    def namespace(self) -> str | None:
        return self.key.namespace

    @property
    def name(self) -> str:
        return self.key.name


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionSettings:
    """Global configuration that shapes decisions.

    ``local_zone`` is what ``cron-timezone: Local`` means (the container's zone, UTC in the
    usual images); the composition root supplies it because core reads no system state.
    ``act_on_annotation_copies`` turns off the annotation-copy rule
    (:mod:`~lifecycle_controller.core.objects.copies`). ``maintenance_windows`` is the
    ``--maintenance-window`` default for objects without the annotation (None: always open).
    ``warn_before_ns`` is the ``--warn-before`` default lead time (0: no warnings).
    ``persist_observations`` also records ``never`` observations on the object
    (docs/behaviour.md#persisted-observations). ``writes_annotations`` False is the form of a
    lifecycle policy's writes (docs/policies.md#what-a-policy-writes): no annotation changes
    at all, so a restart patches only the Pod template marker, an acknowledgement or a
    conversion is an empty guarded patch whose acknowledged instant is the
    :attr:`Patch.acknowledges`, and no observation is persisted.
    """

    dry_run: bool = False
    delete_catch_up: CatchUpRule = ALWAYS
    restart_catch_up: CatchUpRule = ALWAYS
    max_delete_ttl_ns: int | None = None
    #: The Namespace whose ``max-delete-ttl`` annotation set the cap (None: the flag's).
    max_delete_ttl_namespace: str | None = None
    local_zone: tzinfo = UTC
    act_on_annotation_copies: bool = False
    maintenance_windows: MaintenanceWindows | None = None
    warn_before_ns: int = 0
    persist_observations: bool = False
    writes_annotations: bool = True
    #: The deciding lifecycle policy's ``limit`` has held its actions since then (None: it
    #: holds none): a ``catch-up`` window does not count the time since as lateness, so an
    #: action the limit held is late by the hold, not missed (docs/policies.md#limit).
    limit_held_since_ns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What to do after a successful write (for a delete, NotFound counts as success)."""

    events: tuple[Event, ...] = ()
    ledger_ops: tuple[LedgerOp, ...] = ()
    requeue_after_ns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """Common part of every decision."""

    events: tuple[Event, ...] = ()
    ledger_ops: tuple[LedgerOp, ...] = ()
    action: Action | None = None
    due_ns: int | None = None
    log: str = ""
    #: The lifecycle policy that decided (``Kind/namespace/name``); None: the annotations.
    policy: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Idle(Decision):
    """Nothing to do and nothing to wait for (no action annotations, terminating, ...)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Invalid(Decision):
    """A misconfiguration blocks the action; ``events`` holds its Warning. No requeue.

    ``refusal``: a deletion ``max-delete-ttl`` refuses (None: another problem); a policy's
    ``Refused`` condition counts them (docs/policies.md#status)."""

    reason: str
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """What ``max-delete-ttl`` refused and the cap that did, in a few words: ``what``
    (``delete-after 720h``: a policy's own value, or the object's annotation and value) and
    ``cap`` (``max-delete-ttl 168h (--max-delete-ttl)``)."""

    what: str
    cap: str

    def __str__(self) -> str:
        return f"{self.what} exceeds {self.cap}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait(Decision):
    """Nothing to do yet: requeue after ``requeue_after_ns`` (at least 1 ns).

    ``record``, with ``--persist-observations`` only, is a merge patch that persists the
    ``never`` observation of the waiting occurrence; its failure changes nothing else.
    ``scheduled_ns`` is that occurrence's own time (``due_ns`` is after maintenance windows):
    actions deferred to one window opening run in this order.
    """

    requeue_after_ns: int
    record: Mapping[str, Any] | None = None
    scheduled_ns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DryRun(Decision):
    """Dry-run: ``events`` say what would have been done; no write and no requeue."""

    operation: Operation


@dataclass(frozen=True, slots=True, kw_only=True)
class Patch(Decision):
    """One JSON merge patch (RFC 7386) guarded by the observed resourceVersion.

    ``body`` does not contain ``metadata.resourceVersion``; use :meth:`body_with` to get a
    fresh copy that does. ``acknowledges``: in a policy's form (no annotation writes), the
    ``last-restart-timestamp`` this write stands for, which the controller keeps in memory.
    """

    operation: Operation
    body: Mapping[str, Any] = field(default_factory=dict)
    on_success: Outcome = field(default_factory=Outcome)
    failure: Failure | None = None
    acknowledges: str | None = None

    def body_with(self, resource_version: str) -> dict[str, Any]:
        patch: dict[str, Any] = copy.deepcopy(dict(self.body))
        patch.setdefault("metadata", {})["resourceVersion"] = resource_version
        return patch


@dataclass(frozen=True, slots=True, kw_only=True)
class Delete(Decision):
    """DELETE with preconditions {uid, resourceVersion}; NotFound counts as success."""

    uid: str
    resource_version: str
    on_success: Outcome = field(default_factory=Outcome)
    failure: Failure
    #: The DELETE's ``propagationPolicy`` (a policy's ``deletionPropagation``); None: the
    #: server's default for the kind.
    propagation: str | None = None
