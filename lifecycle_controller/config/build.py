"""Every ``run`` flag's text to one validated :class:`Settings` (the flag table meets the types).

It sits apart from ``flags.py`` (the table, which the settings read their defaults from) and
``settings.py`` (the types), so that neither of those imports the other in a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lifecycle_controller.config.flags import BY_DEST, RUN_FLAGS
from lifecycle_controller.config.parsing import ConfigError
from lifecycle_controller.config.settings import (
    ActionSettings,
    GuardrailSettings,
    LeaderElectionError,
    LeaderElectionSettings,
    NotificationSettings,
    ServingSettings,
    Settings,
)
from lifecycle_controller.core.objects.scope import ScopeConfig, ScopeError

__all__ = ["build_settings"]

_GROUPS = ("scope", "actions", "leader_election", "serving", "guardrails", "notifications")


def build_settings(raw: Mapping[str, str | Sequence[str]]) -> Settings:
    """Validate every flag; raise ConfigError with one clear line on the first problem.

    ``raw`` maps flag destinations (``watch_resource``) to the values typed by the user; a
    name that is not a flag is a programming error (TypeError).
    """
    unknown = sorted(set(raw) - set(BY_DEST))
    if unknown:
        raise TypeError(f"unknown run flag(s): {', '.join(unknown)}")
    fields: dict[str, dict[str, Any]] = {group: {} for group in ("", *_GROUPS)}
    for flag in RUN_FLAGS:
        group, _, name = flag.into.rpartition(".")
        fields[group][name] = flag.parse(flag.option, raw.get(flag.dest, flag.raw_default))

    scope = ScopeConfig(**fields["scope"])
    try:
        scope.validate()
    except ScopeError as error:
        raise ConfigError(f"invalid namespace watch configuration: {error}") from error
    try:
        leader = LeaderElectionSettings(**fields["leader_election"])
    except LeaderElectionError as error:
        raise ConfigError(error.flag_message) from error
    return Settings(
        scope=scope,
        actions=ActionSettings(**fields["actions"]),
        leader_election=leader,
        serving=ServingSettings(**fields["serving"]),
        guardrails=GuardrailSettings(**fields["guardrails"]),
        notifications=NotificationSettings(**fields["notifications"]),
        **fields[""],
    )
