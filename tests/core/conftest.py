"""The pure core's tests wait for no real time (see tests/realtime_guard.py)."""

from tests.realtime_guard import no_real_sleep

__all__ = ["no_real_sleep"]
