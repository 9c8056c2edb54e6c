"""The chart and maintenance windows: the ``maintenanceWindow`` value and the admission policy.

The policy checks the shape of ``maintenance-window`` (docs/annotations.md#maintenance-windows);
the controller still checks that each zone exists and that a start differs from its end.
"""

from __future__ import annotations

import pytest

from lifecycle_controller.core.schedule.windows import WindowError, parse_windows
from tests.chart.support import Helm, args_of

# fmt: off
# (value, accepted by the policy); every accepted value the core accepts too.
WINDOW_VECTORS = [
    ("Mon-Fri 01:00-05:00 Europe/Warsaw", True),
    ("Mon-Fri 01:00-05:00 Europe/Warsaw, Sat-Sun 00:00-24:00 Europe/Warsaw", True),
    ("Fri-Mon 22:00-02:00 America/New_York", True),
    ("Sun-Sun 00:00-23:59 UTC", True),
    ("  Mon-Fri 01:00-05:00 UTC  ,Sat-Sun 10:00-11:00 UTC", True),
    ("", False),
    ("always", False),
    ("Mon 01:00-05:00 UTC", False),
    ("mon-fri 01:00-05:00 UTC", False),
    ("Mon-Fri 1:00-05:00 UTC", False),
    ("Mon-Fri 24:00-05:00 UTC", False),
    ("Mon-Fri 01:00-24:01 UTC", False),
    ("Mon-Fri 01:60-05:00 UTC", False),
    ("Mon-Fri 01:00-05:00", False),
    ("Mon-Fri 01:00-05:00 UTC,", False),
    ("Mon-Fri 01:00-05:00 UTC extra", False),
]
# fmt: on


def _core_accepts(value: str) -> bool:
    try:
        parse_windows(value)
    except WindowError:
        return False
    return True


@pytest.mark.parametrize(("value", "accepted"), WINDOW_VECTORS)
def test_vectors_match_the_core(value: str, accepted: bool) -> None:
    assert _core_accepts(value) is accepted


def test_maintenance_window_value_becomes_the_flag(helm: Helm) -> None:
    value = "Mon-Fri 01:00-05:00 Europe/Warsaw, Sat-Sun 00:00-24:00 Europe/Warsaw"
    args = args_of(helm.render({"controllerManager": {"maintenanceWindow": value}}))
    assert f"--maintenance-window={value}" in args
    assert not [a for a in args_of(helm.render()) if a.startswith("--maintenance-window")]


def test_schema_rejects_a_malformed_default(helm: Helm) -> None:
    error = helm.render_failure({"controllerManager": {"maintenanceWindow": "nightly"}})
    assert "/controllerManager/maintenanceWindow" in error
