"""The chart's defaults (values.yaml, through the args template) are the flag table's defaults.

Rendering the chart with its own values and parsing the args with the real ``run`` command
maps every value to its flag the way the templates do; each flag's parsed value must then be
the flag table's default, except for the few the chart deliberately sets otherwise (listed
with the reason). No cluster is needed.
"""

from __future__ import annotations

from lifecycle_controller.config import RUN_FLAGS
from tests.chart.support import Helm, args_of, parse_run_args

#: Flags the chart sets on purpose to another value than ``run``'s default, and why.
CHART_CHOICES = {
    "leader-elect": "an installed controller elects a leader (replicas may be raised)",
    "leader-election-id": "the Lease is named after the release",
    "metrics-bind-address": "an installed controller serves /metrics (:8443)",
    "log-format": "JSON logs in the cluster",
    "watch-resource": "the explicit list that also drives the generated RBAC",
    "ignore-namespace": "the system namespaces are never acted in (kube-system, ...)",
    "policy-default-limit": "an installed controller caps every policy (100/1h) unless the "
    "policy sets its own limit: a new policy cannot act on an old cluster all at once",
}


def test_chart_defaults_are_the_flag_table_defaults(helm: Helm) -> None:
    params = parse_run_args(args_of(helm.render()))
    different = {}
    for flag in RUN_FLAGS:
        chart = flag.parse(flag.option, params[flag.dest])
        table = flag.parse(flag.option, flag.raw_default)
        if chart != table:
            different[flag.name] = (chart, table)
    assert sorted(different) == sorted(CHART_CHOICES), different
