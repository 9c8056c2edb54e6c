"""The ``run`` flags, each declared once: name, default, help, kind, parser and destination.

Everything else is derived from :data:`RUN_FLAGS`: the click options (``cli.py``), the
``LIFECYCLE_<FLAG>`` environment variables, the raw values' defaults, and the typed
:class:`~lifecycle_controller.config.settings.Settings` that
:func:`~lifecycle_controller.config.build.build_settings` makes. This module imports nothing
of ``settings.py``, which reads its defaults here (no import cycle).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from lifecycle_controller.config import parsing as p
from lifecycle_controller.config import webhooks
from lifecycle_controller.config.parsing import Parser
from lifecycle_controller.machinery.logs import LogFormat

__all__ = ["BY_DEST", "DEFAULT_LEASE_NAME", "RUN_FLAGS", "Flag", "FlagKind", "LogLevel", "RawFlags"]

#: The reference controller's Lease name (the ``--leader-election-id`` default).
DEFAULT_LEASE_NAME = "9a46ead0.lifecycle.cezary.dev"

LogLevel = Literal["debug", "info", "warning", "error"]

#: How the command line reads a flag: ``value`` (one string), ``bool`` (Go syntax, bare
#: ``--flag`` is true) or ``list`` (repeatable; comma-separated in the environment).
FlagKind = Literal["value", "bool", "list"]

#: Flag values as typed by the user (strings, tuples of strings for lists), keyed by
#: destination (``watch_resource``); a missing flag takes its default. ``RawFlags(workers="2")``
#: builds one.
RawFlags = dict[str, str | Sequence[str]]


@dataclass(frozen=True)
class Flag:
    """One ``run`` flag.

    ``into`` is where the typed value goes in :class:`Settings`: ``group.field`` or a field of
    ``Settings`` itself; ``parse`` turns the raw value into it (raising ConfigError).

    ``affects_decision`` marks a flag that changes what the controller decides for one object
    (whether it is watched, what is due when, whether it waits, warns or only records): the
    operator tools (``status``, ``explain``, ``plan``, the kubectl plugin) take exactly these
    flags, so they judge an object as a controller started with them would. Flags whose effect
    hangs on the running process's own counters (the per-minute budgets, the breaker's
    threshold, the rollout slots) or on nothing about one object are not marked.
    """

    name: str
    default: str
    help: str
    parse: Parser
    into: str
    kind: FlagKind = "value"
    hidden: bool = False
    affects_decision: bool = False

    @property
    def envvar(self) -> str:
        return "LIFECYCLE_" + self.name.upper().replace("-", "_")

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def option(self) -> str:
        return f"--{self.name}"

    @property
    def raw_default(self) -> str | tuple[str, ...]:
        """The raw value when the flag is not given (a list flag: no values)."""
        return () if self.kind == "list" else self.default


RUN_FLAGS: tuple[Flag, ...] = (
    Flag(
        "kubeconfig",
        "",
        "Path to a kubeconfig; default: $KUBECONFIG, then in-cluster.",
        p.optional_text,
        "kubeconfig",
    ),
    Flag(
        "watch-resource",
        "",
        "Resource glob to watch (plural or plural.group); repeatable. "
        "Empty: every eligible resource.",
        p.globs,
        "scope.watch_resources",
        "list",
        affects_decision=True,
    ),
    Flag(
        "ignore-resource",
        "",
        "Resource glob never to watch; beats --watch-resource.",
        p.globs,
        "scope.ignore_resources",
        "list",
        affects_decision=True,
    ),
    Flag(
        "watch-namespace",
        "",
        "Namespace glob to act in; repeatable. Exact names scope the reads to those namespaces.",
        p.globs,
        "scope.watch_namespaces",
        "list",
        affects_decision=True,
    ),
    Flag(
        "ignore-namespace",
        "",
        "Namespace glob never to act in.",
        p.globs,
        "scope.ignore_namespaces",
        "list",
        affects_decision=True,
    ),
    Flag(
        "policy-protected-namespace",
        "",
        "Namespace no lifecycle policy reaches unless it names it literally (besides kube-system, "
        "kube-public, kube-node-lease and the controller's own); repeatable.",
        p.globs,
        "actions.policy_protected_namespaces",
        "list",
        affects_decision=True,
    ),
    Flag(
        "policy-default-limit",
        "",
        "The limit of a lifecycle policy that sets none, as ACTIONS/WINDOW such as 100/1h: "
        "past it, its actions wait (0 or empty = none).",
        p.policy_limit,
        "actions.policy_default_limit",
        affects_decision=True,
    ),
    Flag(
        "dry-run",
        "false",
        "Decide and emit Events, but never write.",
        p.boolean,
        "actions.dry_run",
        "bool",
        affects_decision=True,
    ),
    Flag(
        "delete-catch-up",
        "always",
        "Default catch-up policy for deletions: always, never, or a duration such as 15m.",
        p.catch_up_rule,
        "actions.delete_catch_up",
        affects_decision=True,
    ),
    Flag(
        "restart-catch-up",
        "always",
        "Default catch-up policy for restarts.",
        p.catch_up_rule,
        "actions.restart_catch_up",
        affects_decision=True,
    ),
    Flag(
        "max-delete-ttl",
        "",
        "Refuse delete TTLs longer than this (e.g. 30d); empty or 0 disables.",
        p.max_delete_ttl,
        "actions.max_delete_ttl_ns",
        affects_decision=True,
    ),
    Flag(
        "maintenance-window",
        "",
        "Default maintenance windows, e.g. 'Mon-Fri 01:00-05:00 Europe/Warsaw'; due actions "
        "outside them wait for the next opening. Empty: always open.",
        p.maintenance_windows,
        "actions.maintenance_windows",
        affects_decision=True,
    ),
    Flag(
        "warn-before",
        "0s",
        "Post UpcomingDeletion/UpcomingRestart this long before an action is due (e.g. 15m); "
        "0s: off. The warn-before annotation wins.",
        p.lead_time,
        "actions.warn_before_ns",
        affects_decision=True,
    ),
    Flag(
        "persist-observations",
        "false",
        "Under catch-up never, also record each occurrence observed before it is due on the "
        "object (one patch of the observed annotation), so a new leader executes it.",
        p.boolean,
        "actions.persist_observations",
        "bool",
        affects_decision=True,
    ),
    Flag(
        "max-deletes-per-minute",
        "0",
        "Deletion budget per minute (0 = unlimited); excess waits.",
        p.count(0),
        "actions.max_deletes_per_minute",
    ),
    Flag(
        "max-restarts-per-minute",
        "0",
        "Restart budget per minute (0 = unlimited).",
        p.count(0),
        "actions.max_restarts_per_minute",
    ),
    Flag(
        "breaker-max-actions",
        "0",
        "Circuit breaker: trip before more than this many deletions plus restarts fall "
        "within --breaker-window (0 = off); latched until `lifecycle-controller breaker reset`.",
        p.count(0),
        "guardrails.breaker_max_actions",
    ),
    Flag(
        "breaker-window",
        "10m",
        "The sliding window of --breaker-max-actions.",
        p.positive_duration,
        "guardrails.breaker_window",
    ),
    Flag(
        "min-restart-interval",
        "0s",
        "Never restart one workload twice within this interval; a due restart waits (0s = off).",
        p.duration_or_zero,
        "guardrails.min_restart_interval",
        affects_decision=True,
    ),
    Flag(
        "max-concurrent-rollouts",
        "0",
        "At most this many restarted workloads mid-rollout at once; others wait in due-time "
        "order (0 = unlimited).",
        p.count(0),
        "guardrails.max_concurrent_rollouts",
    ),
    Flag(
        "rollout-timeout",
        "15m",
        "A restart's rollout not complete after this long is reported stalled and frees its slot.",
        p.positive_duration,
        "guardrails.rollout_timeout",
    ),
    Flag(
        "restart-jitter",
        "0s",
        "Delay each restart by a deterministic per-object amount up to this long (0s = off).",
        p.duration_or_zero,
        "guardrails.restart_jitter",
        affects_decision=True,
    ),
    Flag(
        "notify-webhook",
        "",
        "POST a JSON document (with a Slack-compatible text) for each notifiable Event to this "
        "http(s) URL; repeatable.",
        webhooks.webhook_urls,
        "notifications.webhooks",
        "list",
    ),
    Flag(
        "notify-webhook-file",
        "",
        "A file with one webhook URL per line (e.g. a mounted Secret key); read at start-up "
        "and again whenever it changes.",
        webhooks.webhook_file,
        "notifications.webhook_file",
    ),
    Flag(
        "cluster-name",
        "",
        "The cluster's name in every notification document and its text.",
        webhooks.cluster_name,
        "notifications.cluster_name",
    ),
    Flag(
        "notify-held-actions",
        "false",
        "Also notify each action the open circuit breaker holds (its ActionsHalted Warning); "
        "by default a trip is notified once, by CircuitBreakerTripped.",
        p.boolean,
        "notifications.held_actions",
        "bool",
    ),
    Flag(
        "act-on-annotation-copies",
        "false",
        "Also act on objects whose lifecycle annotations their owner copied onto them "
        "(ReplicaSets of a Deployment, ControllerRevisions of a StatefulSet or DaemonSet).",
        p.boolean,
        "actions.act_on_annotation_copies",
        "bool",
        affects_decision=True,
    ),
    Flag(
        "workers",
        "4",
        "Parallel reconcile workers (never two on one object).",
        p.count(1),
        "workers",
    ),
    Flag(
        "rediscovery-interval",
        "60s",
        "How often API discovery re-runs to pick up new or removed resource types.",
        p.positive_duration,
        "rediscovery_interval",
    ),
    Flag(
        "leader-elect",
        "false",
        "Elect a leader through a Lease; only it acts.",
        p.boolean,
        "leader_election.enabled",
        "bool",
    ),
    Flag(
        "leader-election-id",
        DEFAULT_LEASE_NAME,
        "Name of the Lease.",
        p.required_text,
        "leader_election.name",
        affects_decision=True,
    ),
    Flag(
        "leader-election-namespace",
        "",
        "Namespace of the Lease (default: the Pod's own).",
        p.optional_text,
        "leader_election.namespace",
        affects_decision=True,
    ),
    Flag(
        "leader-election-lease-duration",
        "15s",
        "How long a lease is valid without renewal.",
        p.positive_duration,
        "leader_election.lease_duration",
    ),
    Flag(
        "leader-election-renew-deadline",
        "10s",
        "How long the leader keeps trying to renew before giving up.",
        p.positive_duration,
        "leader_election.renew_deadline",
    ),
    Flag(
        "leader-election-retry-period",
        "2s",
        "Time between acquire/renew attempts.",
        p.positive_duration,
        "leader_election.retry_period",
    ),
    Flag(
        "leader-election-release-on-cancel",
        "true",
        "Release the Lease on shutdown so a successor takes over at once.",
        p.boolean,
        "leader_election.release_on_cancel",
        "bool",
    ),
    Flag(
        "health-probe-bind-address",
        ":8081",
        "Address of /healthz and /readyz (0 disables).",
        p.address,
        "serving.health_probe_address",
    ),
    Flag(
        "metrics-bind-address",
        "0",
        "Address of /metrics, e.g. :8443 (0 disables).",
        p.address,
        "serving.metrics_address",
    ),
    Flag(
        "metrics-secure",
        "true",
        "Serve /metrics over HTTPS and authorize scrapers with TokenReview + SubjectAccessReview.",
        p.boolean,
        "serving.metrics_secure",
        "bool",
    ),
    Flag(
        "metrics-cert-path",
        "",
        "Folder with the metrics TLS certificate (default: self-signed).",
        p.text,
        "serving.metrics_cert_path",
    ),
    Flag(
        "metrics-cert-name",
        "tls.crt",
        "Certificate file name in --metrics-cert-path.",
        p.text_or("tls.crt"),
        "serving.metrics_cert_name",
    ),
    Flag(
        "metrics-cert-key",
        "tls.key",
        "Key file name in --metrics-cert-path.",
        p.text_or("tls.key"),
        "serving.metrics_cert_key",
    ),
    Flag(
        "enable-http2",
        "false",
        "Accepted for compatibility; the metrics server speaks HTTP/1.1.",
        p.boolean,
        "serving.enable_http2",
        "bool",
    ),
    Flag(
        "log-format",
        "auto",
        "json, console, or auto (console on a terminal, else JSON).",
        p.choice(*get_args(LogFormat)),
        "log_format",
    ),
    Flag(
        "log-level",
        "info",
        "debug, info, warning or error.",
        p.choice(*get_args(LogLevel)),
        "log_level",
    ),
    Flag(
        "run-for",
        "",
        "Stop cleanly after this long (e.g. 90s); for demos and CI.",
        p.optional_positive_duration,
        "run_for",
    ),
)

#: Each flag by its destination (``watch_resource``).
BY_DEST = {flag.dest: flag for flag in RUN_FLAGS}
