"""``--maintenance-window``: the default windows reach the decision settings."""

from __future__ import annotations

import pytest

from lifecycle_controller.config import ConfigError, RawFlags, build_settings
from lifecycle_controller.core.schedule.windows import parse_windows

WARSAW_NIGHTS = "Mon-Fri 01:00-05:00 Europe/Warsaw, Sat-Sun 00:00-24:00 Europe/Warsaw"


def test_the_flag_sets_the_default_and_rejects_bad_values() -> None:
    settings = build_settings(RawFlags(maintenance_window=WARSAW_NIGHTS))
    decision = settings.actions.decision_settings()
    assert decision.maintenance_windows == parse_windows(WARSAW_NIGHTS)
    assert build_settings(RawFlags()).actions.decision_settings().maintenance_windows is None
    with pytest.raises(ConfigError, match="maintenance-window"):
        build_settings(RawFlags(maintenance_window="Mon-Fri 01:00-05:00 Nowhere/Zone"))
