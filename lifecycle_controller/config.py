"""Frozen, grouped settings of ``lifecycle-controller run``, validated once at startup.

Flags and ``LIFECYCLE_<FLAG>`` environment variables arrive here as strings; every invariant
is checked with one specific message, and an invalid global value refuses to start (exit 1):
the catch-up defaults, ``--max-delete-ttl``, the namespace watch list, leader-election
timings, addresses, counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from lifecycle_controller.core.catchup import CatchUpPolicy, parse_catch_up_policy
from lifecycle_controller.core.durations import DurationError, parse_max_delete_ttl
from lifecycle_controller.core.gotext import go_parse_bool
from lifecycle_controller.core.scope import ScopeConfig, ScopeError

LogFormat = Literal["json", "console", "auto"]
LogLevel = Literal["debug", "info", "warning", "error"]
DEFAULT_LEADER_ELECTION_ID = "9a46ead0.lifecycle.cezary.dev"

T = TypeVar("T")


class ConfigError(ValueError):
    """One invalid setting; ``str()`` names the flag and what is wrong with it."""


_GO_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_flag_duration(value: str) -> float:
    """Seconds from a Go ``time.ParseDuration`` string (``15s``, ``1m30s``, ``500ms``).

    Used for operational flags (leader-election timings, rediscovery interval); annotation
    values use the strict grammar of the core instead.
    """
    text = value.strip()
    if text in ("0", ""):
        return 0.0
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    position, total = 0, 0.0
    while position < len(text):
        match = _GO_DURATION_PART.match(text, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {value!r} (expected e.g. 15s, 1m30s, 500ms)")
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        position = match.end()
    if position == 0:
        raise ValueError(f"invalid duration {value!r}")
    return sign * total


def parse_go_bool(value: str, *, flag: str) -> bool:
    parsed = go_parse_bool(value)
    if parsed is None:
        raise ConfigError(f"{flag}: invalid boolean {value!r}")
    return parsed


def parse_bind_address(value: str) -> tuple[str | None, int] | None:
    """Parse a Go-style listen address: ``0`` → None (disabled); ``:8081`` → (None, 8081)
    (every interface); ``127.0.0.1:0``; ``[::1]:8080``; ``localhost:9090``.

    Raises ValueError with a clear message otherwise.
    """
    text = value.strip()
    if text == "0":
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"invalid bind address {value!r}: expected [host]:port or 0")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"invalid bind address {value!r}: put IPv6 hosts in brackets")
    return (host or None), int(port_text)


@dataclass(frozen=True)
class ActionSettings:
    """What the decision core needs besides the object: global dry-run, defaults, guardrails."""

    dry_run: bool = False
    delete_catch_up: CatchUpPolicy = field(default_factory=lambda: parse_catch_up_policy("always"))
    restart_catch_up: CatchUpPolicy = field(default_factory=lambda: parse_catch_up_policy("always"))
    max_delete_ttl_ns: int | None = None
    max_deletes_per_minute: int = 0
    max_restarts_per_minute: int = 0


@dataclass(frozen=True)
class LeaderElectionSettings:
    enabled: bool = False
    lease_name: str = DEFAULT_LEADER_ELECTION_ID
    namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True


@dataclass(frozen=True)
class ServingSettings:
    health_probe_address: str = ":8081"
    metrics_address: str = "0"
    metrics_secure: bool = True
    metrics_cert_path: str = ""
    metrics_cert_name: str = "tls.crt"
    metrics_cert_key: str = "tls.key"
    enable_http2: bool = False


@dataclass(frozen=True)
class Settings:
    """Everything ``run`` needs, grouped by the component that consumes it."""

    scope: ScopeConfig
    actions: ActionSettings
    leader_election: LeaderElectionSettings
    serving: ServingSettings
    workers: int = 4
    rediscovery_interval: float = 60.0
    kubeconfig: str | None = None
    log_format: LogFormat = "auto"
    log_level: LogLevel = "info"
    run_for: float | None = None


@dataclass(frozen=True)
class RawFlags:
    """Flag values as typed by the user (strings and lists), before validation."""

    watch_resource: Sequence[str] = ()
    ignore_resource: Sequence[str] = ()
    watch_namespace: Sequence[str] = ()
    ignore_namespace: Sequence[str] = ()
    dry_run: str = "false"
    delete_catch_up: str = "always"
    restart_catch_up: str = "always"
    max_delete_ttl: str = ""
    max_deletes_per_minute: str = "0"
    max_restarts_per_minute: str = "0"
    workers: str = "4"
    rediscovery_interval: str = "60s"
    leader_elect: str = "false"
    leader_election_id: str = DEFAULT_LEADER_ELECTION_ID
    leader_election_namespace: str = ""
    leader_election_lease_duration: str = "15s"
    leader_election_renew_deadline: str = "10s"
    leader_election_retry_period: str = "2s"
    leader_election_release_on_cancel: str = "true"
    health_probe_bind_address: str = ":8081"
    metrics_bind_address: str = "0"
    metrics_secure: str = "true"
    metrics_cert_path: str = ""
    metrics_cert_name: str = "tls.crt"
    metrics_cert_key: str = "tls.key"
    enable_http2: str = "false"
    kubeconfig: str = ""
    log_format: str = "auto"
    log_level: str = "info"
    run_for: str = ""


def _checked(flag: str, parse: Callable[[str], T], value: str) -> T:
    try:
        return parse(value)
    except (ValueError, DurationError) as error:
        raise ConfigError(f"{flag}: {error}") from error


def _count(flag: str, value: str, *, minimum: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"{flag}: expected a whole number, got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{flag}: must be at least {minimum}, got {number}")
    return number


def _positive_seconds(flag: str, value: str) -> float:
    seconds = _checked(flag, parse_flag_duration, value)
    if seconds <= 0:
        raise ConfigError(f"{flag}: must be a positive duration, got {value!r}")
    return seconds


def _address(flag: str, value: str) -> str:
    """A listen address, checked now and kept as text for the server that binds it."""
    _checked(flag, parse_bind_address, value)
    return value.strip()


def _split(values: Sequence[str]) -> tuple[str, ...]:
    """Repeated flag values, stripped, empty entries dropped.

    Values are not split on commas here (a glob such as ``[a,b]*`` contains one); only the
    ``LIFECYCLE_*`` environment variables are comma-separated lists.
    """
    return tuple(value.strip() for value in values if value.strip())


def _choice(flag: str, value: str, choices: tuple[T, ...]) -> T:
    for choice in choices:
        if value.strip().lower() == choice:
            return choice
    raise ConfigError(f"{flag}: expected one of {', '.join(map(str, choices))}, got {value!r}")


def build_settings(raw: RawFlags) -> Settings:
    """Validate every flag; raise ConfigError with one clear line on the first problem."""
    scope = ScopeConfig(
        watch_resources=_split(raw.watch_resource),
        ignore_resources=_split(raw.ignore_resource),
        watch_namespaces=_split(raw.watch_namespace),
        ignore_namespaces=_split(raw.ignore_namespace),
    )
    try:
        scope.validate()
    except ScopeError as error:
        raise ConfigError(f"invalid namespace watch configuration: {error}") from error

    actions = ActionSettings(
        dry_run=parse_go_bool(raw.dry_run, flag="--dry-run"),
        delete_catch_up=_checked("--delete-catch-up", parse_catch_up_policy, raw.delete_catch_up),
        restart_catch_up=_checked(
            "--restart-catch-up", parse_catch_up_policy, raw.restart_catch_up
        ),
        max_delete_ttl_ns=_checked("--max-delete-ttl", parse_max_delete_ttl, raw.max_delete_ttl),
        max_deletes_per_minute=_count(
            "--max-deletes-per-minute", raw.max_deletes_per_minute, minimum=0
        ),
        max_restarts_per_minute=_count(
            "--max-restarts-per-minute", raw.max_restarts_per_minute, minimum=0
        ),
    )

    lease = _positive_seconds(
        "--leader-election-lease-duration", raw.leader_election_lease_duration
    )
    renew = _positive_seconds(
        "--leader-election-renew-deadline", raw.leader_election_renew_deadline
    )
    retry = _positive_seconds("--leader-election-retry-period", raw.leader_election_retry_period)
    if not lease > renew:
        raise ConfigError(
            "--leader-election-lease-duration must be greater than --leader-election-renew-deadline"
        )
    if not renew > 1.2 * retry:
        raise ConfigError(
            "--leader-election-renew-deadline must be greater than 1.2 x "
            "--leader-election-retry-period"
        )
    if not raw.leader_election_id.strip():
        raise ConfigError("--leader-election-id must not be empty")
    leader = LeaderElectionSettings(
        enabled=parse_go_bool(raw.leader_elect, flag="--leader-elect"),
        lease_name=raw.leader_election_id.strip(),
        namespace=raw.leader_election_namespace.strip() or None,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        release_on_cancel=parse_go_bool(
            raw.leader_election_release_on_cancel, flag="--leader-election-release-on-cancel"
        ),
    )

    serving = ServingSettings(
        health_probe_address=_address("--health-probe-bind-address", raw.health_probe_bind_address),
        metrics_address=_address("--metrics-bind-address", raw.metrics_bind_address),
        metrics_secure=parse_go_bool(raw.metrics_secure, flag="--metrics-secure"),
        metrics_cert_path=raw.metrics_cert_path,
        metrics_cert_name=raw.metrics_cert_name or "tls.crt",
        metrics_cert_key=raw.metrics_cert_key or "tls.key",
        enable_http2=parse_go_bool(raw.enable_http2, flag="--enable-http2"),
    )

    run_for = None
    if raw.run_for.strip():
        run_for = _positive_seconds("--run-for", raw.run_for)

    return Settings(
        scope=scope,
        actions=actions,
        leader_election=leader,
        serving=serving,
        workers=_count("--workers", raw.workers, minimum=1),
        rediscovery_interval=_positive_seconds("--rediscovery-interval", raw.rediscovery_interval),
        kubeconfig=raw.kubeconfig.strip() or None,
        log_format=_choice("--log-format", raw.log_format, ("json", "console", "auto")),
        log_level=_choice("--log-level", raw.log_level, ("debug", "info", "warning", "error")),
        run_for=run_for,
    )
