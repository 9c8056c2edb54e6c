"""The chart's values for the blast-radius controls: rendered flags and the breaker's RBAC.

docs/operator-guide.md#blast-radius-controls: off by default (no flag, no Role); when set,
the flags reach ``run`` and parse as valid settings, and the circuit breaker gets a Role
that reads and patches only its own ConfigMap beside the Lease.
"""

from __future__ import annotations

from lifecycle_controller import config
from tests.chart.support import (
    FULLNAME,
    RELEASE_NAMESPACE,
    Helm,
    args_of,
    of_kind,
    one,
    parse_run_args,
    rules,
)

GUARDRAILS = {
    "controllerManager": {
        "breaker": {"maxActions": 25, "window": "30m"},
        "minRestartInterval": "1h",
        "maxConcurrentRollouts": 3,
        "rolloutTimeout": "20m",
        "restartJitter": "5m",
    }
}


def test_off_by_default_no_flag_and_no_role(helm: Helm) -> None:
    docs = helm.render()
    args = args_of(docs)
    for flag in ("--breaker", "--min-restart", "--max-concurrent", "--rollout-", "--restart-j"):
        assert not [arg for arg in args if arg.startswith(flag)], flag
    assert not [role for role in of_kind(docs, "Role") if "breaker" in role["metadata"]["name"]]


def test_values_render_the_flags_and_parse_as_settings(helm: Helm) -> None:
    args = args_of(helm.render(GUARDRAILS))
    assert "--breaker-max-actions=25" in args
    assert "--breaker-window=30m" in args
    assert "--min-restart-interval=1h" in args
    assert "--max-concurrent-rollouts=3" in args
    assert "--rollout-timeout=20m" in args
    assert "--restart-jitter=5m" in args
    guardrails = config.build_settings(parse_run_args(args)).guardrails
    assert guardrails.breaker_max_actions == 25
    assert guardrails.breaker_window == 1800
    assert guardrails.max_concurrent_rollouts == 3
    assert guardrails.restart_jitter == 300


def test_the_breaker_role_names_only_its_configmap(helm: Helm) -> None:
    docs = helm.render(GUARDRAILS)
    role = one(docs, "Role", f"{FULLNAME}-breaker-role")
    assert role["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert rules(role) == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [f"{FULLNAME}-breaker"],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
    ]
    one(docs, "RoleBinding", f"{FULLNAME}-breaker-rolebinding")


def test_without_leader_election_the_breaker_still_names_the_lease(helm: Helm) -> None:
    values = {
        "controllerManager": {"breaker": {"maxActions": 5}, "leaderElection": {"enabled": False}}
    }
    args = args_of(helm.render(values))
    assert "--leader-elect" not in args
    assert f"--leader-election-id={FULLNAME}" in args
    assert f"--leader-election-namespace={RELEASE_NAMESPACE}" in args
