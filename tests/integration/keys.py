"""The annotation keys and the controller's name, as the tests expect them.

Spelled out here on purpose instead of imported from ``lifecycle_controller.core.objects.keys``: a
typo
in the production spelling must make the tests fail, not travel into them.
"""

from __future__ import annotations

P = "lifecycle.cezary.dev/"
DELETE_AFTER = P + "delete-after"
DELETE_AT = P + "delete-at"
RESTART_AFTER = P + "restart-after"
RESTART_AT = P + "restart-at"
RESTART_EVERY = P + "restart-every"
RESTART_CRON = P + "restart-cron"
CRON_TIMEZONE = P + "cron-timezone"
LAST_RESTART = P + "last-restart-timestamp"
CATCH_UP = P + "catch-up"
DRY_RUN = P + "dry-run"
REFERENCE_POINT = P + "reference-point"
MANAGED_BY = P + "managed-by"
#: The restart marker, written into a workload's Pod template.
RESTARTED_AT = P + "restartedAt"

#: The controller's field manager, ``managed-by`` value and Events' ``reportingController``.
CONTROLLER = "lifecycle-controller"
