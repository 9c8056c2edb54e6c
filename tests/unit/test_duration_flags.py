"""One grammar for every duration flag: Go's ``time.ParseDuration`` plus ``d`` (24h).

Annotation values keep their own strict grammar (tests/core/duration_vectors.py); the flags
and the chart's values schema take Go durations, so ``--warn-before 1m30s`` and
``--min-restart-interval 1d`` both work.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lifecycle_controller.config import RUN_FLAGS, ConfigError, Flag
from lifecycle_controller.config import parsing as p
from lifecycle_controller.config.parsing import parse_flag_duration_ns

S = 1_000_000_000
SCHEMA = Path(__file__).parents[2] / "deploy/helm/lifecycle-controller/values.schema.json"

DURATION_PARSERS = {
    p.positive_duration,
    p.optional_positive_duration,
    p.duration_or_zero,
    p.lead_time,
    p.max_delete_ttl,
}
DURATION_FLAGS = [flag for flag in RUN_FLAGS if flag.parse in DURATION_PARSERS]


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("15s", 15 * S),
        ("1m30s", 90 * S),
        ("500ms", S // 2),
        ("1.5h", 5400 * S),
        ("1d", 86_400 * S),
        ("1d12h", 129_600 * S),
        ("30d", 2_592_000 * S),
        ("2us", 2_000),
        ("-1m", -60 * S),
    ],
)
def test_the_flag_grammar(text: str, ns: int) -> None:
    assert parse_flag_duration_ns(text) == ns


@pytest.mark.parametrize("text", ["", "1", "1x", "m", "1m30", "1w", ".s", "9999999999h"])
def test_the_flag_grammar_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_flag_duration_ns(text)


def test_the_duration_flags_are_found() -> None:
    names = {flag.name for flag in DURATION_FLAGS}
    assert {"warn-before", "min-restart-interval", "max-delete-ttl", "breaker-window"} <= names


@pytest.mark.parametrize("flag", DURATION_FLAGS, ids=lambda flag: flag.name)
@pytest.mark.parametrize("text", ["1m30s", "1d", "1d12h", "1.5h"])
def test_every_duration_flag_takes_the_one_grammar(flag: Flag, text: str) -> None:
    assert flag.parse(flag.option, text)


@pytest.mark.parametrize("flag", DURATION_FLAGS, ids=lambda flag: flag.name)
def test_every_duration_flag_refuses_garbage(flag: Flag) -> None:
    with pytest.raises(ConfigError, match=re.escape(flag.option)):
        flag.parse(flag.option, "soon")


def _duration_patterns() -> dict[str, str]:
    """The schema's patterns of the controller's duration values, by value path."""
    manager = json.loads(SCHEMA.read_text())["properties"]["controllerManager"]["properties"]
    found = {
        f"leaderElection.{key}": manager["leaderElection"]["properties"][key]["pattern"]
        for key in ("leaseDuration", "renewDeadline", "retryPeriod")
    }
    found["breaker.window"] = manager["breaker"]["properties"]["window"]["pattern"]
    for key in (
        "maxDeleteTTL",
        "warnBefore",
        "minRestartInterval",
        "rolloutTimeout",
        "restartJitter",
        "rediscoveryInterval",
    ):
        found[key] = manager[key]["pattern"]
    return found


@pytest.mark.parametrize(("path", "pattern"), sorted(_duration_patterns().items()))
def test_the_chart_schema_takes_the_flag_grammar(path: str, pattern: str) -> None:
    for text in ("1m30s", "1d", "1d12h", "500ms", "15m"):
        assert re.search(pattern, text), (path, text)
    for text in ("1x", "soon", "1w"):
        assert not re.search(pattern, text), (path, text)
