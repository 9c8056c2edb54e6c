"""The fast tier never waits for real time: a guard that fails a test which tries.

The tests of ``tests/core``, ``tests/machinery`` and ``tests/unit`` move time only through
the fake clock, and the in-process fake API server needs no real wait. The autouse fixture
:func:`no_real_sleep` (imported by those folders' conftests) makes ``time.sleep`` and
``asyncio.sleep`` with a positive delay raise when the call comes from a test module or a
test helper; the code under test is not affected (the loop-lag probe, for one, runs on the
real clock). :func:`fast_tier_sources_that_wait` is the same rule read in the sources, for
the ways round the fixture (``RealClock()`` handed to the code under test, ``from asyncio
import sleep``).
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

__all__ = ["FAST_TIER", "fast_tier_sources_that_wait", "no_real_sleep"]

TESTS = Path(__file__).resolve().parent
FAST_TIER = tuple(TESTS / name for name in ("core", "machinery", "unit"))
#: Where waiting for real time is the point: the tests of the real clock itself.
ALLOWED = frozenset({TESTS / "machinery" / "test_clock.py", Path(__file__).resolve()})
#: The in-process profiling harnesses run on the real clock by design (they measure CPU).
HARNESSES = TESTS / "profiling"
_WAITS = re.compile(r"\btime\.sleep\(|\bRealClock\(|from asyncio import .*\bsleep\b")


def _from_a_test(depth: int) -> bool:
    caller = Path(sys._getframe(depth).f_code.co_filename)
    return (
        caller.is_relative_to(TESTS)
        and not caller.is_relative_to(HARNESSES)
        and caller.resolve() not in ALLOWED
    )


def _guarded(real: Callable[..., Any], name: str) -> Callable[..., Any]:
    def guard(delay: float, *args: Any, **kwargs: Any) -> Any:
        if delay > 0 and _from_a_test(2):
            raise AssertionError(
                f"{name}({delay}) in a fast-tier test: move the fake clock instead, or wait"
                " for the event the code sets"
            )
        return real(delay, *args, **kwargs)

    return guard


@pytest.fixture(autouse=True)
def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", _guarded(time.sleep, "time.sleep"))
    monkeypatch.setattr(asyncio, "sleep", _guarded(asyncio.sleep, "asyncio.sleep"))


def fast_tier_sources_that_wait() -> list[str]:
    """``file:line`` of every fast-tier test source line that waits for real time."""
    found = []
    for folder in FAST_TIER:
        for path in sorted(folder.rglob("*.py")):
            if path.resolve() in ALLOWED:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _WAITS.search(line):
                    found.append(f"{path.relative_to(TESTS)}:{number}")
    return found
