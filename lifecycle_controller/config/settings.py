"""The frozen, grouped settings of ``lifecycle-controller run``.

Each group is consumed by one component. The leader-election group is also the elector's own
configuration, so its invariants (client-go's timing rules, the Lease's name and namespace)
are checked here, once, whoever builds it.

A field's default is its flag's default, parsed (:func:`flag_default`): the flag table in
``flags.py`` is the only place a default is spelled.
"""

from __future__ import annotations

import functools
import math
import os
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import Any

from lifecycle_controller.config.flags import DEFAULT_LEASE_NAME, RUN_FLAGS, LogLevel
from lifecycle_controller.config.parsing import ConfigError
from lifecycle_controller.core.decision.outcomes import DecisionSettings
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.policy.limit import PolicyLimit
from lifecycle_controller.core.schedule.catchup import CatchUpRule
from lifecycle_controller.core.schedule.windows import MaintenanceWindows
from lifecycle_controller.machinery.logs import LogFormat

__all__ = [
    "DEFAULT_LEASE_NAME",
    "JITTER_FACTOR",
    "ActionSettings",
    "GuardrailSettings",
    "LeaderElectionError",
    "LeaderElectionSettings",
    "LogFormat",
    "LogLevel",
    "NotificationSettings",
    "ServingSettings",
    "Settings",
]

#: client-go ``JitterFactor``: acquire attempts wait ``retry * (1 + rand * 1.2)``, so the
#: renew deadline must exceed ``1.2 * retry_period``.
JITTER_FACTOR = 1.2


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@functools.cache
def flag_default(into: str) -> Any:
    """The typed default of the ``run`` flag whose value goes ``into`` this field."""
    flag = next(flag for flag in RUN_FLAGS if flag.into == into)
    return flag.parse(flag.option, flag.raw_default)


def _flag(into: str) -> Callable[[], Any]:
    """A ``default_factory``: the default of the flag of this field (:func:`flag_default`)."""
    return lambda: flag_default(into)


def local_zone() -> tzinfo:
    """What ``cron-timezone: Local`` means: ``$TZ`` if it names a zone, else UTC."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    return UTC


@dataclass(frozen=True)
class ActionSettings:
    """What the decision core needs besides the object: global dry-run, defaults, guardrails."""

    dry_run: bool = field(default_factory=_flag("actions.dry_run"))
    delete_catch_up: CatchUpRule = field(default_factory=_flag("actions.delete_catch_up"))
    restart_catch_up: CatchUpRule = field(default_factory=_flag("actions.restart_catch_up"))
    max_delete_ttl_ns: int | None = field(default_factory=_flag("actions.max_delete_ttl_ns"))
    max_deletes_per_minute: int = field(default_factory=_flag("actions.max_deletes_per_minute"))
    max_restarts_per_minute: int = field(default_factory=_flag("actions.max_restarts_per_minute"))
    act_on_annotation_copies: bool = field(
        default_factory=_flag("actions.act_on_annotation_copies")
    )
    maintenance_windows: MaintenanceWindows | None = field(
        default_factory=_flag("actions.maintenance_windows")
    )
    warn_before_ns: int = field(default_factory=_flag("actions.warn_before_ns"))
    persist_observations: bool = field(default_factory=_flag("actions.persist_observations"))
    #: Namespaces protected from lifecycle policies besides the system ones
    #: (docs/policies.md#safety-rules).
    policy_protected_namespaces: tuple[str, ...] = field(
        default_factory=_flag("actions.policy_protected_namespaces")
    )
    #: ``--policy-default-limit``: the limit of a policy that sets none (None: none).
    policy_default_limit: PolicyLimit | None = field(
        default_factory=_flag("actions.policy_default_limit")
    )

    def decision_settings(self, zone: tzinfo | None = None) -> DecisionSettings:
        """What the decision core reads of these settings.

        ``zone`` is what ``cron-timezone: Local`` means; by default :func:`local_zone`.
        """
        return DecisionSettings(
            dry_run=self.dry_run,
            delete_catch_up=self.delete_catch_up,
            restart_catch_up=self.restart_catch_up,
            max_delete_ttl_ns=self.max_delete_ttl_ns,
            local_zone=local_zone() if zone is None else zone,
            act_on_annotation_copies=self.act_on_annotation_copies,
            maintenance_windows=self.maintenance_windows,
            warn_before_ns=self.warn_before_ns,
            persist_observations=self.persist_observations,
        )


@dataclass(frozen=True)
class GuardrailSettings:
    """The blast-radius controls (docs/operator-guide.md#blast-radius-controls); all off by default.

    Durations in seconds. ``breaker_max_actions`` 0 and ``max_concurrent_rollouts`` 0 mean
    off and unlimited; ``min_restart_interval`` and ``restart_jitter`` 0 mean off.
    """

    breaker_max_actions: int = field(default_factory=_flag("guardrails.breaker_max_actions"))
    breaker_window: float = field(default_factory=_flag("guardrails.breaker_window"))
    min_restart_interval: float = field(default_factory=_flag("guardrails.min_restart_interval"))
    max_concurrent_rollouts: int = field(
        default_factory=_flag("guardrails.max_concurrent_rollouts")
    )
    rollout_timeout: float = field(default_factory=_flag("guardrails.rollout_timeout"))
    restart_jitter: float = field(default_factory=_flag("guardrails.restart_jitter"))


class LeaderElectionError(ConfigError):
    """A broken leader-election invariant.

    ``str()`` starts with ``invalid leader election configuration:`` and shows the values;
    :attr:`flag_message` says the same in terms of the flags only (what ``run`` prints).
    """

    def __init__(self, problem: str, *, flag_message: str | None = None) -> None:
        super().__init__(f"invalid leader election configuration: {problem}")
        self.flag_message = flag_message or problem


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionSettings:
    """Whether to elect, where the Lease lives and the election timings (seconds).

    ``namespace`` None means the Pod's own (resolved when connecting). Validated at
    construction, client-go's invariants: ``lease_duration > renew_deadline >
    1.2 * retry_period``, every value positive and finite, and ``lease_duration >= 1`` because
    the Lease stores whole seconds; the name is a DNS subdomain, the namespace a DNS label.
    A broken invariant raises :class:`LeaderElectionError` naming the flag to fix.
    """

    enabled: bool = field(default_factory=_flag("leader_election.enabled"))
    name: str = field(default_factory=_flag("leader_election.name"))
    namespace: str | None = field(default_factory=_flag("leader_election.namespace"))
    lease_duration: float = field(default_factory=_flag("leader_election.lease_duration"))
    renew_deadline: float = field(default_factory=_flag("leader_election.renew_deadline"))
    retry_period: float = field(default_factory=_flag("leader_election.retry_period"))
    release_on_cancel: bool = field(default_factory=_flag("leader_election.release_on_cancel"))

    def __post_init__(self) -> None:
        self._check_names()
        self._check_timings()

    def _check_names(self) -> None:
        if not (len(self.name) <= 253 and _DNS_SUBDOMAIN.fullmatch(self.name)):
            raise LeaderElectionError(
                f"--leader-election-id {self.name!r} is not a valid Lease name (DNS subdomain)"
            )
        namespace = self.namespace
        if namespace is not None and not (len(namespace) <= 63 and _DNS_LABEL.fullmatch(namespace)):
            raise LeaderElectionError(
                f"--leader-election-namespace {namespace!r} is not a valid namespace name"
            )

    def _check_timings(self) -> None:
        lease, renew, retry = self.lease_duration, self.renew_deadline, self.retry_period
        timings = {
            "--leader-election-lease-duration": lease,
            "--leader-election-renew-deadline": renew,
            "--leader-election-retry-period": retry,
        }
        for flag, value in timings.items():
            if not (math.isfinite(value) and value > 0):
                raise LeaderElectionError(f"{flag} must be a positive duration, got {value}s")
        if lease < 1:
            raise LeaderElectionError(
                f"--leader-election-lease-duration must be at least 1s, got {lease}s"
            )
        if not lease > renew:
            raise LeaderElectionError(
                f"--leader-election-lease-duration ({lease}s) must be greater than "
                f"--leader-election-renew-deadline ({renew}s)",
                flag_message="--leader-election-lease-duration must be greater than "
                "--leader-election-renew-deadline",
            )
        if not renew > JITTER_FACTOR * retry:
            raise LeaderElectionError(
                f"--leader-election-renew-deadline ({renew}s) must be greater than "
                f"{JITTER_FACTOR} x --leader-election-retry-period ({retry}s)",
                flag_message="--leader-election-renew-deadline must be greater than "
                f"{JITTER_FACTOR} x --leader-election-retry-period",
            )

    @property
    def lease_duration_seconds(self) -> int:
        """The whole seconds written to ``spec.leaseDurationSeconds`` (rounded up)."""
        return math.ceil(self.lease_duration)


@dataclass(frozen=True)
class ServingSettings:
    health_probe_address: str = field(default_factory=_flag("serving.health_probe_address"))
    metrics_address: str = field(default_factory=_flag("serving.metrics_address"))
    metrics_secure: bool = field(default_factory=_flag("serving.metrics_secure"))
    metrics_cert_path: str = field(default_factory=_flag("serving.metrics_cert_path"))
    metrics_cert_name: str = field(default_factory=_flag("serving.metrics_cert_name"))
    metrics_cert_key: str = field(default_factory=_flag("serving.metrics_cert_key"))
    enable_http2: bool = field(default_factory=_flag("serving.enable_http2"))


@dataclass(frozen=True)
class NotificationSettings:
    """Webhook notifications (docs/notifications.md); off without a URL or a URL file.

    ``webhooks`` are the ``--notify-webhook`` URLs (validated); ``webhook_file`` the
    ``--notify-webhook-file`` path (read once at start-up, then whenever it changes);
    ``cluster_name`` goes into every document and its ``text``; ``held_actions``
    (``--notify-held-actions``) notifies each action the open breaker holds, not only the trip.
    """

    webhooks: tuple[str, ...] = field(default_factory=_flag("notifications.webhooks"))
    webhook_file: str | None = field(default_factory=_flag("notifications.webhook_file"))
    cluster_name: str = field(default_factory=_flag("notifications.cluster_name"))
    held_actions: bool = field(default_factory=_flag("notifications.held_actions"))

    @property
    def enabled(self) -> bool:
        return bool(self.webhooks) or self.webhook_file is not None


@dataclass(frozen=True)
class Settings:
    """Everything ``run`` needs, grouped by the component that consumes it."""

    scope: ScopeConfig
    actions: ActionSettings
    leader_election: LeaderElectionSettings
    serving: ServingSettings
    guardrails: GuardrailSettings = field(default_factory=GuardrailSettings)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    workers: int = field(default_factory=_flag("workers"))
    rediscovery_interval: float = field(default_factory=_flag("rediscovery_interval"))
    kubeconfig: str | None = field(default_factory=_flag("kubeconfig"))
    log_format: LogFormat = field(default_factory=_flag("log_format"))
    log_level: LogLevel = field(default_factory=_flag("log_level"))
    run_for: float | None = field(default_factory=_flag("run_for"))
