"""Leader election configuration, identity and Lease record formats (no API, no time)."""

from __future__ import annotations

import re
import socket

import pytest

from lifecycle_controller.config import DEFAULT_LEASE_NAME, LeaderElectionSettings
from lifecycle_controller.controller.leadership.lease import LeaseRecord, default_identity
from lifecycle_controller.kube.microtime import micro_time

MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def test_defaults_are_controller_runtimes() -> None:
    config = LeaderElectionSettings(namespace="lifecycle-system")
    assert config.name == DEFAULT_LEASE_NAME == "9a46ead0.lifecycle.cezary.dev"
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)
    assert config.release_on_cancel is True
    assert config.lease_duration_seconds == 15


def test_config_is_frozen() -> None:
    config = LeaderElectionSettings(namespace="ns")
    with pytest.raises(AttributeError):
        config.lease_duration = 1  # type: ignore[misc]


def test_short_test_timings_are_accepted() -> None:
    config = LeaderElectionSettings(
        namespace="ns", lease_duration=3, renew_deadline=2, retry_period=0.5
    )
    assert config.lease_duration_seconds == 3


def test_lease_duration_seconds_rounds_up() -> None:
    config = LeaderElectionSettings(
        namespace="ns", lease_duration=2.2, renew_deadline=2, retry_period=0.5
    )
    assert config.lease_duration_seconds == 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"lease_duration": 10},
            "lease-duration (10s) must be greater than --leader-",
        ),
        ({"renew_deadline": 15}, "lease-duration (15.0s) must be greater than"),
        ({"retry_period": 9}, "renew-deadline (10.0s) must be greater than 1.2 x"),
        ({"retry_period": 25 / 3}, "must be greater than 1.2 x --leader-election-retry-period"),
        ({"retry_period": 0}, "--leader-election-retry-period must be a positive duration"),
        ({"renew_deadline": -1}, "--leader-election-renew-deadline must be a positive duration"),
        ({"lease_duration": float("nan")}, "lease-duration must be a positive duration"),
        ({"lease_duration": float("inf")}, "lease-duration must be a positive duration"),
        (
            {"lease_duration": 0.9, "renew_deadline": 0.5, "retry_period": 0.1},
            "--leader-election-lease-duration must be at least 1s, got 0.9s",
        ),
        ({"name": ""}, "--leader-election-id '' is not a valid Lease name"),
        ({"name": "Upper.case"}, "is not a valid Lease name"),
        ({"name": "x" * 254}, "is not a valid Lease name"),
        ({"namespace": "a.b"}, "--leader-election-namespace 'a.b' is not a valid namespace"),
        ({"namespace": ""}, "is not a valid namespace"),
    ],
)
def test_broken_invariants_raise_one_clear_message(
    overrides: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {"namespace": "ns", **overrides}
    with pytest.raises(ValueError, match=r"^invalid leader election configuration: ") as caught:
        LeaderElectionSettings(**arguments)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_renew_deadline_equal_to_jittered_retry_is_rejected() -> None:
    """client-go: renewDeadline must be strictly greater than JitterFactor * retryPeriod."""
    with pytest.raises(ValueError, match=r"1\.2 x"):
        LeaderElectionSettings(namespace="ns", lease_duration=3, renew_deadline=1.2, retry_period=1)
    LeaderElectionSettings(namespace="ns", lease_duration=3, renew_deadline=1.21, retry_period=1)


def test_default_identity_is_hostname_underscore_uuid() -> None:
    first, second = default_identity(), default_identity()
    host = socket.gethostname()
    assert re.fullmatch(re.escape(host) + r"_[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", first)
    assert first != second


@pytest.mark.parametrize(
    ("now_ns", "expected"),
    [
        (1_767_225_600 * 10**9, "2026-01-01T00:00:00.000000Z"),
        (1_767_225_600 * 10**9 + 1_999, "2026-01-01T00:00:00.000001Z"),
        (1_767_225_600 * 10**9 + 123_456_789, "2026-01-01T00:00:00.123456Z"),
        (1_767_225_659 * 10**9 + 999_999_999, "2026-01-01T00:00:59.999999Z"),
    ],
)
def test_micro_time_has_six_fraction_digits_in_utc(now_ns: int, expected: str) -> None:
    assert micro_time(now_ns) == expected
    assert MICRO_TIME.fullmatch(expected)


def test_micro_time_ignores_local_timezone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert micro_time(1_767_225_600 * 10**9) == "2026-01-01T00:00:00.000000Z"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_lease_record_round_trip_and_missing_fields() -> None:
    record = LeaseRecord("me", 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.5Z", 3)
    assert LeaseRecord.from_lease({"spec": record.to_spec()}) == record
    assert LeaseRecord.from_lease({"metadata": {}}) == LeaseRecord("", 0, None, None, 0)
