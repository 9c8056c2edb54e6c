"""Every alert the chart ships, evaluated by promtool against series that must fire it and
series that must not.

The rules are rendered by helm exactly as a user installs them and handed to
``promtool test rules`` (Prometheus's own rule evaluator, built from its Go module and cached
per machine like helm). Each :class:`Case` is one promtool test group: input series at a
one-minute scrape interval, one evaluation time and the alerts expected then (none for a
quiet case). The lateness histogram is not written by hand: the series come from the
controller's own :class:`~lifecycle_controller.serving.metrics.Metrics`, so the buckets the
alert reads are the buckets the controller exports. When promtool cannot be built on this
machine the tests skip and say why.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lifecycle_controller.serving.metrics import Metrics
from tests.chart.support import FULLNAME, Helm, one

RULES_VALUES: dict[str, Any] = {"prometheusRule": {"enabled": True}}  # leader election is on
LEASE = FULLNAME  # the chart's default --leader-election-id

Series = Mapping[str, str]  # series selector -> values in promtool's expanding notation


@dataclass(frozen=True)
class Case:
    """Input series, and the alerts ``alert`` must raise at ``at`` (none: it must stay quiet)."""

    id: str
    alert: str
    series: Series
    at: str
    fires: Sequence[Mapping[str, str]] = field(default=())  # labels beyond severity


def lateness_series(per_minute: Sequence[float], minutes: int) -> dict[str, str]:
    """``lifecycle_action_lateness_seconds_bucket`` series of a controller that completes one
    action per entry of ``per_minute`` (each that many seconds late) every minute."""
    metrics = Metrics(process_collectors=False)
    history: dict[str, list[str]] = {}
    for minute in range(minutes + 1):
        if minute:
            for seconds in per_minute:
                metrics.observe_lateness(seconds)
        for family in metrics.registry.collect():
            for sample in family.samples:
                if sample.name == "lifecycle_action_lateness_seconds_bucket":
                    selector = f'{sample.name}{{le="{sample.labels["le"]}"}}'
                    history.setdefault(selector, []).append(f"{sample.value:g}")
    return {selector: " ".join(values) for selector, values in history.items()}


ACTIONS = "lifecycle_actions_total"
NINETY_MINUTES = 90

CASES = [
    # --- the Lease has no holder ------------------------------------------------------------
    Case(
        "no replica leads",
        "LifecycleControllerNoLeader",
        {
            f'leader_election_master_status{{name="{LEASE}",pod="a"}}': "0x20",
            f'leader_election_master_status{{name="{LEASE}",pod="b"}}': "0x20",
        },
        at="10m",
        fires=[{}],
    ),
    Case(
        "one replica leads",
        "LifecycleControllerNoLeader",
        {
            f'leader_election_master_status{{name="{LEASE}",pod="a"}}': "1x20",
            f'leader_election_master_status{{name="{LEASE}",pod="b"}}': "0x20",
        },
        at="10m",
    ),
    Case(
        "a hand-over shorter than five minutes",
        "LifecycleControllerNoLeader",
        {f'leader_election_master_status{{name="{LEASE}",pod="a"}}': "1x5 0x3 1x12"},
        at="10m",
    ),
    # --- discovery or caches incomplete -----------------------------------------------------
    Case(
        "never ready",
        "LifecycleControllerNotReady",
        {"lifecycle_controller_discovery_ready": "0x30"},
        at="15m",
        fires=[{}],
    ),
    Case(
        "ready after five minutes",
        "LifecycleControllerNotReady",
        {"lifecycle_controller_discovery_ready": "0x5 1x25"},
        at="15m",
    ),
    # --- actions failing ---------------------------------------------------------------------
    Case(
        "deletes keep failing",
        "LifecycleActionsFailing",
        {
            f'{ACTIONS}{{action="delete",kind="ConfigMap",result="error"}}': "0+1x60",
            f'{ACTIONS}{{action="delete",kind="ConfigMap",result="success"}}': "0+5x60",
        },
        at="40m",
        fires=[{"action": "delete", "kind": "ConfigMap"}],
    ),
    Case(
        "actions succeed",
        "LifecycleActionsFailing",
        {
            f'{ACTIONS}{{action="delete",kind="ConfigMap",result="error"}}': "0x60",
            f'{ACTIONS}{{action="delete",kind="ConfigMap",result="success"}}': "0+5x60",
        },
        at="40m",
    ),
    # --- actions late (the histogram comes from the controller's own Metrics) ---------------
    Case(
        "every action eleven minutes late",
        "LifecycleActionsLate",
        lateness_series([668.0] * 10, NINETY_MINUTES),
        at="70m",
        fires=[{}],
    ),
    Case(
        "actions later than the highest bucket",
        "LifecycleActionsLate",
        lateness_series([7200.0] * 3, NINETY_MINUTES),
        at="70m",
        fires=[{}],
    ),
    Case(
        "a fifth of the actions ten minutes late",
        "LifecycleActionsLate",
        lateness_series([1.0] * 8 + [600.0] * 2, NINETY_MINUTES),
        at="70m",
        fires=[{}],
    ),
    Case(
        "actions on time",
        "LifecycleActionsLate",
        lateness_series([0.2] * 9 + [4.0], NINETY_MINUTES),
        at="70m",
    ),
    Case(
        "one action in twenty ten minutes late",
        "LifecycleActionsLate",
        lateness_series([1.0] * 19 + [600.0], NINETY_MINUTES),
        at="70m",
    ),
    Case(
        "no action due",
        "LifecycleActionsLate",
        lateness_series([], NINETY_MINUTES),
        at="70m",
    ),
    # --- an action budget holds actions back -------------------------------------------------
    Case(
        "throttled for an hour",
        "LifecycleActionsThrottled",
        {f'{ACTIONS}{{action="restart",kind="Deployment",result="throttled"}}': "0+3x60"},
        at="45m",
        fires=[{}],
    ),
    Case(
        "throttled for ten minutes",
        "LifecycleActionsThrottled",
        {f'{ACTIONS}{{action="restart",kind="Deployment",result="throttled"}}': "0+3x10 30x50"},
        at="45m",
    ),
    # --- misconfigured objects ----------------------------------------------------------------
    Case(
        "an invalid annotation was found",
        "LifecycleMisconfiguredObjects",
        {
            'lifecycle_misconfigurations_total{kind="ConfigMap",reason="invalid_annotation"}': (
                "0x10 1x50"
            )
        },
        at="30m",
        fires=[{"kind": "ConfigMap", "reason": "invalid_annotation"}],
    ),
    Case(
        "the last one more than an hour ago",
        "LifecycleMisconfiguredObjects",
        {
            'lifecycle_misconfigurations_total{kind="ConfigMap",reason="invalid_annotation"}': (
                "0 1x150"
            )
        },
        at="2h",
    ),
    # --- work queue backlog ------------------------------------------------------------------
    Case(
        "1500 keys for half an hour",
        "LifecycleWorkqueueBacklog",
        {'workqueue_depth{name="lifecycle"}': "1500x30"},
        at="20m",
        fires=[{}],
    ),
    Case(
        "1500 keys for ten minutes",
        "LifecycleWorkqueueBacklog",
        {'workqueue_depth{name="lifecycle"}': "1500x10 0x20"},
        at="20m",
    ),
    Case(
        "900 keys",
        "LifecycleWorkqueueBacklog",
        {'workqueue_depth{name="lifecycle"}': "900x30"},
        at="20m",
    ),
    # --- circuit breaker ---------------------------------------------------------------------
    Case(
        "breaker open",
        "LifecycleCircuitBreakerOpen",
        {'lifecycle_breaker_open{pod="a"}': "1x5", 'lifecycle_breaker_open{pod="b"}': "0x5"},
        at="1m",
        fires=[{}],
    ),
    Case(
        "breaker closed",
        "LifecycleCircuitBreakerOpen",
        {'lifecycle_breaker_open{pod="a"}': "0x5"},
        at="1m",
    ),
    # --- stalled rollouts ---------------------------------------------------------------------
    Case(
        "a rollout stalled",
        "LifecycleRolloutsStalled",
        {'lifecycle_rollouts_total{kind="Deployment",result="stalled"}': "0x10 1x50"},
        at="30m",
        fires=[{"kind": "Deployment"}],
    ),
    Case(
        "rollouts complete",
        "LifecycleRolloutsStalled",
        {
            'lifecycle_rollouts_total{kind="Deployment",result="stalled"}': "0x60",
            'lifecycle_rollouts_total{kind="Deployment",result="completed"}': "0+1x60",
        },
        at="30m",
    ),
]


# --- promtool ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped_rules(helm: Helm) -> list[dict[str, Any]]:
    """The rule groups of the rendered PrometheusRule (the file a Prometheus would load)."""
    groups: list[dict[str, Any]] = one(helm.render(RULES_VALUES), "PrometheusRule")["spec"][
        "groups"
    ]
    return groups


def alerts_of(groups: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


def expanded(annotations: Mapping[str, str], labels: Mapping[str, str]) -> dict[str, str]:
    """The annotations as Prometheus expands them for an alert with ``labels``."""

    def value(match: re.Match[str]) -> str:
        return labels[match.group(1)]

    return {
        key: re.sub(r"\{\{ \$labels\.(\w+) \}\}", value, text) for key, text in annotations.items()
    }


def promtool_test(case: Case, rule: Mapping[str, Any]) -> dict[str, Any]:
    """One promtool test group for ``case``."""
    exp_alerts = []
    for extra in case.fires:
        labels = {**rule.get("labels", {}), **extra}
        exp_alerts.append(
            {"exp_labels": labels, "exp_annotations": expanded(rule["annotations"], labels)}
        )
    return {
        "name": case.id,
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
        "alert_rule_test": [
            {"eval_time": case.at, "alertname": case.alert, "exp_alerts": exp_alerts}
        ],
    }


def run_promtool(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, check=False, timeout=120
    )


def write_rules(folder: Path, groups: Sequence[Mapping[str, Any]]) -> Path:
    rules = folder / "rules.yaml"
    rules.write_text(json.dumps({"groups": list(groups)}))  # JSON is YAML
    return rules


def test_the_rendered_rules_are_valid(
    promtool: Path, shipped_rules: list[dict[str, Any]], tmp_path: Path
) -> None:
    result = run_promtool(promtool, "check", "rules", str(write_rules(tmp_path, shipped_rules)))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_shipped_alert_has_a_case_that_fires_and_one_that_does_not(
    shipped_rules: list[dict[str, Any]],
) -> None:
    shipped = set(alerts_of(shipped_rules))
    firing = {case.alert for case in CASES if case.fires}
    quiet = {case.alert for case in CASES if not case.fires}
    assert shipped - firing == set(), "alerts without a case that fires them"
    assert shipped - quiet == set(), "alerts without a case that keeps them quiet"
    assert firing | quiet == shipped, "cases for alerts the chart does not ship"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.alert}: {c.id}" for c in CASES])
def test_alert(
    case: Case, promtool: Path, shipped_rules: list[dict[str, Any]], tmp_path: Path
) -> None:
    rule = alerts_of(shipped_rules)[case.alert]
    rules = write_rules(tmp_path, shipped_rules)
    tests = tmp_path / "tests.yaml"
    tests.write_text(
        json.dumps(
            {
                "rule_files": [str(rules)],
                "evaluation_interval": "1m",
                "tests": [promtool_test(case, rule)],
            }
        )
    )
    result = run_promtool(promtool, "test", "rules", str(tests))
    assert result.returncode == 0, result.stdout + result.stderr
