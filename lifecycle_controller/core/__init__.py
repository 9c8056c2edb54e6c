"""The pure decision core: annotation grammar, schedules, catch-up and decide().

Synchronous and deterministic: no I/O, no asyncio, no clock (``now`` is always a parameter,
instants are integer nanoseconds since the Unix epoch in UTC). The reconciler reads an
object, calls :func:`decide`, and carries out the one write the decision describes.
"""

from lifecycle_controller.core.decision.decide import decide
from lifecycle_controller.core.decision.events import Event, EventType
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Failure,
    Idle,
    Invalid,
    ObjectFacts,
    Operation,
    Outcome,
    Patch,
    Wait,
)
from lifecycle_controller.core.decision.patches import next_restart_marker
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.relevance import (
    has_action,
    should_enqueue_on_create,
    should_enqueue_on_update,
)
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef, ResourceType
from lifecycle_controller.core.schedule.catchup import (
    ALWAYS,
    NEVER,
    Arm,
    CatchUpError,
    CatchUpMode,
    CatchUpRule,
    Forget,
    Identity,
    Ledger,
    LedgerOp,
    LedgerView,
    Observe,
    parse_catch_up_rule,
)
from lifecycle_controller.core.schedule.schedules import (
    CronSchedule,
    IntervalSchedule,
    Schedule,
    next_occurrences,
    plan_recurring,
    requeue_after,
)
from lifecycle_controller.core.text.cron import (
    CronError,
    CronSpec,
    ZoneError,
    load_zone,
    parse_cron,
)
from lifecycle_controller.core.text.durations import (
    DurationError,
    parse_duration,
    parse_max_delete_ttl,
    parse_restart_every,
)
from lifecycle_controller.core.text.gotext import format_go_duration
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    format_rfc3339_seconds,
    parse_rfc3339,
)

__all__ = [
    "ALWAYS",
    "NEVER",
    "Action",
    "Arm",
    "CatchUpError",
    "CatchUpMode",
    "CatchUpRule",
    "CronError",
    "CronSchedule",
    "CronSpec",
    "Decision",
    "DecisionSettings",
    "Delete",
    "DryRun",
    "DurationError",
    "Event",
    "EventType",
    "Failure",
    "Forget",
    "Identity",
    "Idle",
    "IntervalSchedule",
    "Invalid",
    "Ledger",
    "LedgerOp",
    "LedgerView",
    "ObjectFacts",
    "ObjectKey",
    "ObjectRef",
    "Observe",
    "Operation",
    "Outcome",
    "Patch",
    "ResourceType",
    "Schedule",
    "TimestampError",
    "Wait",
    "ZoneError",
    "decide",
    "format_go_duration",
    "format_rfc3339_nano",
    "format_rfc3339_seconds",
    "has_action",
    "keys",
    "load_zone",
    "next_occurrences",
    "next_restart_marker",
    "parse_catch_up_rule",
    "parse_cron",
    "parse_duration",
    "parse_max_delete_ttl",
    "parse_restart_every",
    "parse_rfc3339",
    "plan_recurring",
    "requeue_after",
    "should_enqueue_on_create",
    "should_enqueue_on_update",
]
