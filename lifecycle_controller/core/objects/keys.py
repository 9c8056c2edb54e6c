"""The annotation API: every ``lifecycle.cezary.dev/`` key and fixed value, in one place.

Both the decision logic and the informer-side relevance filter read these names; keeping
them here means a key is spelled once.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACTION_KEYS",
    "CATCH_UP",
    "CRON_TIMEZONE",
    "DELETE_AFTER",
    "DELETE_AT",
    "DELETE_FAMILY",
    "DRY_RUN",
    "EXEMPT",
    "KNOWN_KEYS",
    "LAST_RESTART_TIMESTAMP",
    "MAINTENANCE_WINDOW",
    "MANAGED_BY",
    "MANAGED_BY_VALUE",
    "MAX_DELETE_TTL",
    "MODIFIER_KEYS",
    "NAMESPACE_DEFAULT_KEYS",
    "OBSERVED",
    "PREFIX",
    "RECURRING_KEYS",
    "REFERENCE_POINT",
    "REFERENCE_POINT_APPLY",
    "REFERENCE_POINT_CREATION",
    "RELATIVE_KEYS",
    "RESTARTABLE_GROUP",
    "RESTARTABLE_KINDS",
    "RESTARTED_AT",
    "RESTART_AFTER",
    "RESTART_AT",
    "RESTART_CRON",
    "RESTART_EVERY",
    "RESTART_FAMILY",
    "WARN_BEFORE",
]

PREFIX: Final = "lifecycle.cezary.dev/"

# User-facing input annotations (docs/annotations.md#annotations-you-write).
DELETE_AFTER: Final = PREFIX + "delete-after"
DELETE_AT: Final = PREFIX + "delete-at"
RESTART_AFTER: Final = PREFIX + "restart-after"
RESTART_AT: Final = PREFIX + "restart-at"
RESTART_EVERY: Final = PREFIX + "restart-every"
RESTART_CRON: Final = PREFIX + "restart-cron"
CRON_TIMEZONE: Final = PREFIX + "cron-timezone"
REFERENCE_POINT: Final = PREFIX + "reference-point"
CATCH_UP: Final = PREFIX + "catch-up"
DRY_RUN: Final = PREFIX + "dry-run"
MAINTENANCE_WINDOW: Final = PREFIX + "maintenance-window"
WARN_BEFORE: Final = PREFIX + "warn-before"
# "true": no lifecycle policy ever acts on the object (its own annotations still do).
EXEMPT: Final = PREFIX + "exempt"
# On a Namespace only: a per-namespace cap on deletions (docs/annotations.md#namespace-defaults).
MAX_DELETE_TTL: Final = PREFIX + "max-delete-ttl"
# The keys a Namespace carries as defaults for the objects in it, plus the cap.
NAMESPACE_DEFAULT_KEYS: Final = (CATCH_UP, DRY_RUN, WARN_BEFORE, MAINTENANCE_WINDOW, MAX_DELETE_TTL)

# Written by the controller (docs/annotations.md#annotations-the-controller-writes).
LAST_RESTART_TIMESTAMP: Final = PREFIX + "last-restart-timestamp"
MANAGED_BY: Final = PREFIX + "managed-by"
RESTARTED_AT: Final = PREFIX + "restartedAt"  # in spec.template.metadata.annotations
# The persisted `never` observation (docs/behaviour.md#persisted-observations), opt-in.
OBSERVED: Final = PREFIX + "observed"
MANAGED_BY_VALUE: Final = "lifecycle-controller"

REFERENCE_POINT_APPLY: Final = "applyTimestamp"
REFERENCE_POINT_CREATION: Final = "creationTimestamp"

# Every key the controller reads or writes: anything else under PREFIX is ignored (a typo?).
KNOWN_KEYS: Final = (
    DELETE_AFTER,
    DELETE_AT,
    RESTART_AFTER,
    RESTART_AT,
    RESTART_EVERY,
    RESTART_CRON,
    CRON_TIMEZONE,
    REFERENCE_POINT,
    CATCH_UP,
    DRY_RUN,
    MAINTENANCE_WINDOW,
    WARN_BEFORE,
    EXEMPT,
    MAX_DELETE_TTL,
    LAST_RESTART_TIMESTAMP,
    MANAGED_BY,
    RESTARTED_AT,
    OBSERVED,
)

DELETE_FAMILY: Final = (DELETE_AT, DELETE_AFTER)
RESTART_FAMILY: Final = (RESTART_AT, RESTART_AFTER, RESTART_CRON, RESTART_EVERY)
# The six action annotations, in the reference's order.
ACTION_KEYS: Final = (
    DELETE_AT,
    DELETE_AFTER,
    RESTART_AT,
    RESTART_AFTER,
    RESTART_CRON,
    RESTART_EVERY,
)
# The keys that shape an action without being one: an object's own value of each overrides a
# lifecycle policy's, key by key (docs/architecture.md#policy-anchors).
MODIFIER_KEYS: Final = (DRY_RUN, CATCH_UP, WARN_BEFORE, MAINTENANCE_WINDOW)
RELATIVE_KEYS: Final = (DELETE_AFTER, RESTART_AFTER)
RECURRING_KEYS: Final = (RESTART_CRON, RESTART_EVERY)

# Restarts touch the Pod template of these apps kinds only, any version (docs/behaviour.md#restart).
RESTARTABLE_GROUP: Final = "apps"
RESTARTABLE_KINDS: Final = frozenset({"Deployment", "StatefulSet", "DaemonSet"})
