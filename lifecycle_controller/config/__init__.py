"""Frozen, grouped settings of ``lifecycle-controller run``, validated once at startup.

Flags and ``LIFECYCLE_<FLAG>`` environment variables arrive here as strings; every invariant
is checked with one specific message, and an invalid global value refuses to start (exit 1):
the catch-up defaults, ``--max-delete-ttl``, the namespace watch list, leader-election
timings, addresses, counts.

* ``flags.py``: the flag table (each flag declared once), which imports nothing of the
  settings; ``build.py``: :func:`build_settings`, the table's values into the settings;
* ``settings.py``: the settings types and their cross-field invariants;
* ``parsing.py``: one flag's text to its typed value.
"""

from lifecycle_controller.config.build import build_settings
from lifecycle_controller.config.flags import RUN_FLAGS, Flag, FlagKind, RawFlags
from lifecycle_controller.config.parsing import (
    ConfigError,
    parse_bind_address,
    parse_flag_duration,
    parse_go_bool,
)
from lifecycle_controller.config.settings import (
    DEFAULT_LEASE_NAME,
    JITTER_FACTOR,
    ActionSettings,
    GuardrailSettings,
    LeaderElectionError,
    LeaderElectionSettings,
    LogFormat,
    LogLevel,
    NotificationSettings,
    ServingSettings,
    Settings,
)

__all__ = [
    "DEFAULT_LEASE_NAME",
    "JITTER_FACTOR",
    "RUN_FLAGS",
    "ActionSettings",
    "ConfigError",
    "Flag",
    "FlagKind",
    "GuardrailSettings",
    "LeaderElectionError",
    "LeaderElectionSettings",
    "LogFormat",
    "LogLevel",
    "NotificationSettings",
    "RawFlags",
    "ServingSettings",
    "Settings",
    "build_settings",
    "parse_bind_address",
    "parse_flag_duration",
    "parse_go_bool",
]
