"""Which watch events deserve a reconcile (docs/behaviour.md#relevance-predicate), as predicates.

Timers drive all scheduled work, so a watch event only matters when it changes what the
controller would decide: an action annotation, ``dry-run``, or a modifier that the current
action reads. Everything else (spec and status churn, labels, ``managed-by``, ``catch-up``,
resyncs) is dropped. Delete events never need a reconcile.
"""

from __future__ import annotations

from collections.abc import Mapping

from lifecycle_controller.core.objects import keys

__all__ = ["has_action", "should_enqueue_on_create", "should_enqueue_on_update"]

Annotations = Mapping[str, str] | None


def _get(annotations: Annotations, key: str) -> str:
    return (annotations or {}).get(key, "")


def has_action(annotations: Annotations) -> bool:
    """Whether any of the six action annotations has a non-empty value."""
    if not annotations:  # most objects a policy keeps have none: asked for each one listed
        return False
    return any(_get(annotations, key) for key in keys.ACTION_KEYS)


def should_enqueue_on_create(annotations: Annotations) -> bool:
    """Create events, including the initial list: only objects with an action."""
    return has_action(annotations)


def _changed(old: Annotations, new: Annotations, key: str) -> bool:
    return _get(old, key) != _get(new, key)


def _either(old: Annotations, new: Annotations, candidates: tuple[str, ...]) -> bool:
    return any(_get(side, key) for side in (old, new) for key in candidates)


def should_enqueue_on_update(old: Annotations, new: Annotations) -> bool:
    """Update events: only changes that can alter the decision."""
    if old == new:
        return False  # spec or status churn: every answer below needs an annotation to change
    if not has_action(old) and not has_action(new):
        return False
    if any(_changed(old, new, key) for key in keys.ACTION_KEYS):
        return True
    if any(
        _changed(old, new, key) for key in (keys.DRY_RUN, keys.MAINTENANCE_WINDOW, keys.WARN_BEFORE)
    ):
        return True
    if _changed(old, new, keys.REFERENCE_POINT) and _either(old, new, keys.RELATIVE_KEYS):
        return True
    if _either(old, new, keys.RECURRING_KEYS) and _changed(old, new, keys.LAST_RESTART_TIMESTAMP):
        return True
    return _changed(old, new, keys.CRON_TIMEZONE) and _either(old, new, (keys.RESTART_CRON,))
