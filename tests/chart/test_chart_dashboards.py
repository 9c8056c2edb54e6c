"""The chart's Grafana dashboard and PrometheusRule: rendering, structure, and real metric names.

Render tests need only helm: neither object exists by default, the dashboard ConfigMap carries
the sidecar label and a well-formed Grafana dashboard, the PrometheusRule carries exactly the
alerts docs/operator-guide.md#metrics-prometheus-and-alerts lists. The integration test starts
the real controller on the local control plane, scrapes its /metrics and checks that every
metric name used by a dashboard query or an alert expression is one the controller exports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from tests.chart.support import CHART_DIR, FULLNAME, RELEASE_NAMESPACE, Doc, Helm, of_kind, one
from tests.integration.controller import RunningController, StartController
from tests.integration.keys import DELETE_AFTER, DELETE_AT, RESTART_AFTER, RESTART_AT
from tests.integration.support import (
    CONFIGMAPS,
    DEPLOYMENTS,
    configmap,
    deployment,
    eventually,
)

DASHBOARD_FILE = CHART_DIR / "dashboards" / "lifecycle-controller.json"
GUIDE = CHART_DIR.parents[2] / "docs" / "operator-guide.md"
DASHBOARD_CONFIGMAP = f"{FULLNAME}-dashboard"
ENABLED: dict[str, Any] = {"dashboards": {"enabled": True}, "prometheusRule": {"enabled": True}}

# What the issue asks the dashboard to show, as the metric each topic is read from.
DASHBOARD_TOPICS = {
    "actions by result": "lifecycle_actions_total",
    "lateness": "lifecycle_action_lateness_seconds_bucket",
    "next actions per namespace": "lifecycle_next_action_timestamp_seconds",
    "misconfigurations": "lifecycle_misconfigurations_total",
    "queue depth": "workqueue_depth",
    "reconcile errors": "controller_runtime_reconcile_errors_total",
    "watch restarts": "lifecycle_watch_restarts_total",
    "leader": "leader_election_master_status",
    "event-loop lag": "lifecycle_event_loop_lag_seconds_bucket",
}


# --- PromQL: the metric names an expression selects -----------------------------------------

PROMQL_FUNCTIONS = frozenset(
    [
        "abs",
        "absent",
        "absent_over_time",
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan",
        "atanh",
        "avg_over_time",
        "ceil",
        "changes",
        "clamp",
        "clamp_max",
        "clamp_min",
        "cos",
        "cosh",
        "count_over_time",
        "day_of_month",
        "day_of_week",
        "day_of_year",
        "days_in_month",
        "deg",
        "delta",
        "deriv",
        "exp",
        "floor",
        "histogram_avg",
        "histogram_count",
        "histogram_fraction",
        "histogram_quantile",
        "histogram_stddev",
        "histogram_stdvar",
        "histogram_sum",
        "holt_winters",
        "hour",
        "idelta",
        "increase",
        "irate",
        "label_join",
        "label_replace",
        "last_over_time",
        "ln",
        "log10",
        "log2",
        "mad_over_time",
        "max_over_time",
        "min_over_time",
        "minute",
        "month",
        "pi",
        "predict_linear",
        "present_over_time",
        "quantile_over_time",
        "rad",
        "rate",
        "resets",
        "round",
        "scalar",
        "sgn",
        "sin",
        "sinh",
        "sort",
        "sort_by_label",
        "sort_by_label_desc",
        "sort_desc",
        "sqrt",
        "stddev_over_time",
        "stdvar_over_time",
        "sum_over_time",
        "tan",
        "tanh",
        "time",
        "timestamp",
        "vector",
        "year",
        "avg",
        "bottomk",
        "count",
        "count_values",
        "group",
        "limit_ratio",
        "limitk",
        "max",
        "min",
        "quantile",
        "stddev",
        "stdvar",
        "sum",
        "topk",
    ]
)
# Keywords followed by a parenthesised list of label names, not expressions.
LABEL_LIST_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
PROMQL_KEYWORDS = frozenset({"and", "or", "unless", "bool", "inf", "nan", "atan2"})

_NUMBER = re.compile(r"(0x[0-9a-fA-F]+|\d+(\.\d*)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)")
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_DURATION = re.compile(r"-?(\d+(ms|s|m|h|d|w|y))+")


def _skip_string(expr: str, start: int) -> int:
    """Index just past the string literal opening at ``start``."""
    quote, i = expr[start], start + 1
    while i < len(expr):
        if expr[i] == "\\" and quote != "`":
            i += 2
            continue
        if expr[i] == quote:
            return i + 1
        i += 1
    raise ValueError(f"unterminated string in {expr!r}")


def _skip_group(expr: str, start: int, closing: str) -> int:
    """Index just past the ``closing`` bracket matching the one at ``start`` (no nesting:
    label matchers, ranges and label lists hold none), skipping string literals."""
    i = start + 1
    while i < len(expr):
        if expr[i] in "\"'`":
            i = _skip_string(expr, i)
            continue
        if expr[i] == closing:
            return i + 1
        i += 1
    raise ValueError(f"unbalanced {expr[start]!r} in {expr!r}")


def _next_char(expr: str, i: int) -> str:
    while i < len(expr) and expr[i].isspace():
        i += 1
    return expr[i] if i < len(expr) else ""


def metric_names(expr: str) -> set[str]:
    """Every metric name ``expr`` selects: identifiers used as a bare selector or followed by
    ``{`` or ``[``, minus functions, aggregations, keywords, label names inside braces and
    label lists of ``by``/``without``/``on``/``ignoring``/``group_*``. Grafana variables
    (``$job``, ``$__rate_interval``) are skipped. An unknown function fails."""
    names: set[str] = set()
    i = 0
    while i < len(expr):
        char = expr[i]
        if char.isspace():
            i += 1
        elif char in "\"'`":
            i = _skip_string(expr, i)
        elif char == "{":
            i = _skip_group(expr, i, "}")
        elif char == "[":
            i = _skip_group(expr, i, "]")
        elif char == "$":
            match = _IDENTIFIER.match(expr, i + 1)
            i = match.end() if match else i + 1
        elif (number := _NUMBER.match(expr, i)) and not char.isalpha():
            i = number.end()
        elif identifier := _IDENTIFIER.match(expr, i):
            word, i = identifier.group(), identifier.end()
            following = _next_char(expr, i)
            if word in LABEL_LIST_KEYWORDS:
                while expr[i].isspace():
                    i += 1
                if expr[i] == "(":
                    i = _skip_group(expr, i, ")")
            elif word == "offset":
                duration = _DURATION.match(expr, i + len(expr[i:]) - len(expr[i:].lstrip()))
                assert duration, f"offset without a duration in {expr!r}"
                i = duration.end()
            elif word in PROMQL_KEYWORDS:
                continue
            elif word in PROMQL_FUNCTIONS:
                # Called (``rate(``), or an aggregation with its clause first (``sum by (``).
                rest = expr[i:].lstrip()
                assert rest.startswith(("(", "by", "without")), f"{word!r} in {expr!r}"
            elif following == "(":
                raise ValueError(f"unknown PromQL function {word!r} in {expr!r}")
            else:
                names.add(word)
        else:
            i += 1  # operators, parentheses, commas
    return names


def test_metric_names_tokenizer() -> None:
    assert metric_names(
        'sum by (action, result) (rate(lifecycle_actions_total{job=~"$job", x="a}b"}'
        "[$__rate_interval]))"
    ) == {"lifecycle_actions_total"}
    assert metric_names(
        "histogram_quantile(0.9, sum(rate(a_seconds_bucket[5m])) by (le)) > 1e-9"
    ) == {"a_seconds_bucket"}
    assert metric_names("up / on (pod) group_left (node) kube_pod_info - time()") == {
        "up",
        "kube_pod_info",
    }
    assert metric_names("max(x) < 1 or vector(0) unless y offset 5m") == {"x", "y"}
    with pytest.raises(ValueError, match="unknown PromQL function"):
        metric_names("rates(x[5m])")


# --- rendering ---------------------------------------------------------------------------------


def dashboard_configmaps(docs: Iterable[Doc]) -> list[Doc]:
    return [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == DASHBOARD_CONFIGMAP]


def dashboard_of(docs: Iterable[Doc]) -> dict[str, Any]:
    configmap = one(docs, "ConfigMap", DASHBOARD_CONFIGMAP)
    (key,) = configmap["data"]
    assert key.endswith(".json")
    dashboard: dict[str, Any] = json.loads(configmap["data"][key])
    return dashboard


def rules_of(docs: Iterable[Doc]) -> list[dict[str, Any]]:
    rule = one(docs, "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def panels_of(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included (rows themselves excluded)."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in panels_of(dashboard) for t in p["targets"]]


def variable_metrics(dashboard: dict[str, Any]) -> set[str]:
    """Metric names the query variables read (``label_values(metric{...}, label)``)."""
    names = set()
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = re.fullmatch(r"label_values\((.+),\s*\w+\)", text)
        assert match, f"variable {variable['name']}: unexpected query {text!r}"
        names |= metric_names(match.group(1))
    return names


def chart_expressions(helm: Helm) -> list[str]:
    docs = helm.render(ENABLED)
    return dashboard_expressions(dashboard_of(docs)) + [r["expr"] for r in rules_of(docs)]


def test_neither_dashboard_nor_rule_by_default(helm: Helm) -> None:
    docs = helm.render()
    assert dashboard_configmaps(docs) == []
    assert of_kind(docs, "PrometheusRule") == []


def test_each_flag_renders_only_its_object(helm: Helm) -> None:
    only_dashboard = helm.render({"dashboards": {"enabled": True}})
    assert len(dashboard_configmaps(only_dashboard)) == 1
    assert of_kind(only_dashboard, "PrometheusRule") == []
    only_rule = helm.render({"prometheusRule": {"enabled": True}})
    assert dashboard_configmaps(only_rule) == []
    assert len(of_kind(only_rule, "PrometheusRule")) == 1


def test_dashboard_configmap_metadata(helm: Helm) -> None:
    configmap = one(helm.render(ENABLED), "ConfigMap", DASHBOARD_CONFIGMAP)
    assert configmap["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in configmap["metadata"]
    custom = {
        "dashboards": {
            "enabled": True,
            "namespace": "monitoring",
            "label": "example.com/dashboard",
            "labelValue": "true",
            "additionalLabels": {"team": "platform"},
            "annotations": {"grafana_folder": "Kubernetes"},
        }
    }
    metadata = one(helm.render(custom), "ConfigMap", DASHBOARD_CONFIGMAP)["metadata"]
    assert metadata["namespace"] == "monitoring"
    assert metadata["labels"]["example.com/dashboard"] == "true"
    assert metadata["labels"]["team"] == "platform"
    assert "grafana_dashboard" not in metadata["labels"]
    assert metadata["annotations"] == {"grafana_folder": "Kubernetes"}


def test_dashboard_is_the_chart_file(helm: Helm) -> None:
    assert dashboard_of(helm.render(ENABLED)) == json.loads(DASHBOARD_FILE.read_text())


def test_dashboard_structure(helm: Helm) -> None:
    dashboard = dashboard_of(helm.render(ENABLED))
    assert isinstance(dashboard["title"], str)
    assert dashboard["title"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", dashboard["uid"])
    assert isinstance(dashboard["schemaVersion"], int)
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    datasource = {"type": "prometheus", "uid": "${datasource}"}

    ids = [p["id"] for p in dashboard["panels"]] + [
        p["id"] for row in dashboard["panels"] for p in row.get("panels", [])
    ]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= grid.keys(), panel["title"]
        assert all(isinstance(grid[k], int) and grid[k] >= 0 for k in "hwxy"), panel["title"]
        assert grid["w"] > 0, panel["title"]
        assert grid["h"] > 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]

    panels = list(panels_of(dashboard))
    assert panels
    for panel in panels:
        assert isinstance(panel["title"], str), panel
        assert panel["title"], panel
        assert isinstance(panel["type"], str), panel["title"]
        assert panel["type"], panel["title"]
        assert panel["datasource"] == datasource, panel["title"]
        targets = panel["targets"]
        assert targets, f"{panel['title']} has no target"
        ref_ids = [t["refId"] for t in targets]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in targets:
            assert isinstance(target["expr"], str), panel["title"]
            assert target["expr"].strip(), panel["title"]
            assert target["datasource"] == datasource, panel["title"]
            assert metric_names(target["expr"]), f"{panel['title']}: {target['expr']}"
    titles = [p["title"] for p in panels]
    assert len(titles) == len(set(titles)), titles


def test_dashboard_covers_every_topic(helm: Helm) -> None:
    used = set().union(
        *map(metric_names, dashboard_expressions(dashboard_of(helm.render(ENABLED))))
    )
    missing = {topic: name for topic, name in DASHBOARD_TOPICS.items() if name not in used}
    assert not missing, f"dashboard lacks panels for {missing}"


def test_prometheus_rule(helm: Helm) -> None:
    values = {"prometheusRule": {"enabled": True, "additionalLabels": {"release": "prometheus"}}}
    docs = helm.render(values)
    rule = one(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules = rules_of(docs)
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for alert in rules:
        assert metric_names(alert["expr"]), alert["alert"]
        assert alert["annotations"]["summary"], alert["alert"]
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}
    leader = next(r for r in rules if r["alert"] == "LifecycleControllerNoLeader")
    assert f'leader_election_master_status{{name="{FULLNAME}"}}' in leader["expr"]
    failing = next(r for r in rules if r["alert"] == "LifecycleActionsFailing")
    assert failing["annotations"]["summary"].startswith(
        "{{ $labels.action }} of {{ $labels.kind }}"
    )

    elsewhere = {"prometheusRule": {"enabled": True, "namespace": "monitoring"}}
    assert one(helm.render(elsewhere), "PrometheusRule")["metadata"]["namespace"] == "monitoring"


def test_leader_alert_follows_leader_election(helm: Helm) -> None:
    lease = {"controllerManager": {"leaderElection": {"resourceName": "my-lease"}}}
    rules = rules_of(helm.render({**ENABLED, **lease}))
    leader = next(r for r in rules if r["alert"] == "LifecycleControllerNoLeader")
    assert 'name="my-lease"' in leader["expr"]
    # Without leader election no replica ever reports leading: the alert would always fire.
    off = {"controllerManager": {"leaderElection": {"enabled": False}}}
    assert "LifecycleControllerNoLeader" not in {
        r["alert"] for r in rules_of(helm.render(off | ENABLED))
    }


def guide_alerts() -> list[dict[str, Any]]:
    """The alert rules in the operator guide's monitoring section (its first YAML block)."""
    section = (
        GUIDE.read_text().split("## Metrics, Prometheus and alerts", 1)[1].split("\n## ", 1)[0]
    )
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "no YAML block in the guide's monitoring section"
    groups = yaml.safe_load(block.group(1))["groups"]
    return [r for group in groups for r in group["rules"]]


def test_guide_and_chart_list_the_same_alerts(helm: Helm) -> None:
    # The guide shows what the chart renders for its install example (release "lifecycle").
    rendered = rules_of(helm.render(ENABLED, release="lifecycle"))
    assert guide_alerts() == rendered


# --- every metric name the chart uses is one the controller exports ---------------------------


def exported_names(text: str) -> set[str]:
    """The series names a /metrics text can produce: counters under ``_total``, histograms
    under ``_bucket``/``_sum``/``_count`` (and the bare family name), gauges as they are."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {sample.name for sample in family.samples}
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {family.name} | {f"{family.name}_{s}" for s in ("bucket", "sum", "count")}
        else:
            names.add(family.name)
    return names


def test_exported_names_keep_histogram_suffixes_to_histograms() -> None:
    text = (
        "# TYPE a_total counter\na_total 1\n"
        '# TYPE h_seconds histogram\nh_seconds_bucket{le="+Inf"} 0\nh_seconds_count 0\n'
        "h_seconds_sum 0\n# TYPE g gauge\ng 1\n"
    )
    names = exported_names(text)
    assert {"a_total", "h_seconds_bucket", "h_seconds_sum", "g"} <= names
    assert "g_bucket" not in names
    assert "a" not in names


async def scrape(http: aiohttp.ClientSession, running: RunningController) -> str:
    server = running.controller.metrics_server
    assert server is not None
    assert server.port is not None
    async with http.get(f"http://127.0.0.1:{server.port}/metrics") as response:
        assert response.status == 200
        return await response.text()


@pytest.mark.integration
async def test_every_metric_the_chart_uses_is_exported(
    helm: Helm,
    control_plane: ControlPlane,
    start_controller: StartController,
    namespace: str,
) -> None:
    docs = helm.render(ENABLED)
    dashboard = dashboard_of(docs)
    used = set().union(
        *map(metric_names, dashboard_expressions(dashboard) + [r["expr"] for r in rules_of(docs)])
    )
    used |= variable_metrics(dashboard)

    lease = f"dashboards-{namespace}"
    running = await start_controller(
        watch_resource=["configmaps", "deployments.apps"],
        watch_namespace=[namespace],
        metrics_bind_address="127.0.0.1:0",
        metrics_secure=False,
        leader_elect=True,
        leader_election_id=lease,
        leader_election_namespace=namespace,
    )
    async with (
        await KubeClient.connect(str(control_plane.admin_kubeconfig)) as kube,
        aiohttp.ClientSession() as http,
    ):
        await kube.create(CONFIGMAPS, namespace, configmap("ttl", **{DELETE_AFTER: "1h"}))
        await kube.create(DEPLOYMENTS, namespace, deployment("app", {RESTART_AFTER: "1h"}))

        async def both_scheduled() -> bool:
            if running.controller.metrics_server is None:
                return False
            objects = [(CONFIGMAPS, "ttl", DELETE_AT), (DEPLOYMENTS, "app", RESTART_AT)]
            for resource, name, key in objects:
                obj = await kube.get_metadata(resource, namespace, name)
                if key not in (obj["metadata"].get("annotations") or {}):
                    return False
            text = await scrape(http, running)
            return f'kind="ConfigMap",namespace="{namespace}"' in text and (
                f'kind="Deployment",namespace="{namespace}"' in text
            )

        await eventually(both_scheduled, within=20, what="both objects to be scheduled")
        text = await scrape(http, running)

    exported = exported_names(text)
    missing = sorted(used - exported)
    assert not missing, f"the chart uses metrics the controller does not export: {missing}"
    # The per-kind series the dashboard breaks down by exist for both watched kinds.
    for kind in ("ConfigMap", "Deployment"):
        assert f'lifecycle_actions_total{{action="delete",kind="{kind}",result="success"}}' in text
        assert f'lifecycle_misconfigurations_total{{kind="{kind}",' in text
    assert f'leader_election_master_status{{name="{lease}"}} 1.0' in text
    assert 'workqueue_depth{name="lifecycle"}' in text
    assert 'controller_runtime_reconcile_errors_total{controller="lifecycle"}' in text


def test_service_monitor_keeps_the_namespace_label_the_dashboard_groups_by(helm: Helm) -> None:
    monitor = {"metrics": {"serviceMonitor": {"enabled": True, "insecureSkipVerify": True}}}
    endpoint = one(helm.render(monitor), "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["honorLabels"] is True
    monitor["metrics"]["serviceMonitor"]["honorLabels"] = False
    endpoint = one(helm.render(monitor), "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["honorLabels"] is False
