"""Every ``run`` flag the tools' decision path reads is marked ``affects_decision``, and only those.

The fields read are found, not listed: :func:`controller_view` (what ``status``, ``explain``
and ``plan`` decide with) runs over settings whose groups record each attribute read, so a
new flag that feeds the decision, but is not marked, fails here.
"""

from __future__ import annotations

import types
from typing import Any

from lifecycle_controller.config import RUN_FLAGS, build_settings
from lifecycle_controller.config.settings import Settings
from lifecycle_controller.tools.options import CONTROLLER_FLAGS, controller_view


class _Recording:
    """A settings group that notes ``group.field`` for every field read through it."""

    def __init__(self, group: str, real: object, seen: set[str]) -> None:
        self._group, self._real, self._seen = group, real, seen

    def __getattr__(self, name: str) -> Any:
        on_class = getattr(type(self._real), name, None)
        if isinstance(on_class, types.FunctionType):
            return types.MethodType(on_class, self)  # its reads of self are recorded too
        self._seen.add(f"{self._group}.{name}")
        return getattr(self._real, name)


class _RecordingSettings:
    def __init__(self, real: Settings, seen: set[str]) -> None:
        self._real, self._seen = real, seen

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if name == "scope":  # handed on whole: the tools judge the scope with all of it
            self._seen.add("scope.*")
            return value
        if hasattr(value, "__dataclass_fields__"):
            return _Recording(name, value, self._seen)
        self._seen.add(name)
        return value


def _fields_read() -> set[str]:
    seen: set[str] = set()
    controller_view(_RecordingSettings(build_settings({}), seen))  # type: ignore[arg-type]
    return seen


def _reads(into: str, seen: set[str]) -> bool:
    group = into.rpartition(".")[0]
    return into in seen or f"{group}.*" in seen


def test_every_flag_the_decision_reads_is_marked() -> None:
    seen = _fields_read()
    unmarked = [f.name for f in RUN_FLAGS if _reads(f.into, seen) and not f.affects_decision]
    assert unmarked == []


def test_every_marked_flag_is_read_by_the_decision() -> None:
    seen = _fields_read()
    unread = [f.name for f in RUN_FLAGS if f.affects_decision and not _reads(f.into, seen)]
    assert unread == []


def test_the_tools_take_exactly_the_marked_flags() -> None:
    assert tuple(flag for flag in RUN_FLAGS if flag.affects_decision) == CONTROLLER_FLAGS
    names = {flag.name for flag in CONTROLLER_FLAGS}
    # the ones the hand-written list used to miss
    assert {"maintenance-window", "warn-before", "min-restart-interval", "restart-jitter"} <= names


def test_the_recording_sees_the_decision_settings() -> None:
    seen = _fields_read()
    assert {"actions.maintenance_windows", "actions.warn_before_ns", "scope.*"} <= seen
    assert "serving.metrics_address" not in seen
