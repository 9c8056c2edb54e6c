"""`lifecycle-controller plan`: manifests in, explanations out (table, JSON, YAML)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from lifecycle_controller.cli import cli, main

MANIFESTS = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: preview
    namespace: team-a
    annotations:
      lifecycle.cezary.dev/delete-after: 90m
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: untouched}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  annotations:
    lifecycle.cezary.dev/restart-cron: "0 3 * * 0"
spec:
  template: {}
"""


def run(*args: str, stdin: str = MANIFESTS) -> str:
    result = CliRunner().invoke(cli, ["plan", *args], input=stdin)
    assert result.exit_code == 0, result.output
    return result.output


def test_json_output_lists_annotated_objects_only() -> None:
    rows = json.loads(run("-f", "-", "--now", "2026-11-30T12:00:00Z", "-o", "json"))
    assert [(r["kind"], r["name"], r["action"], r["next"]) for r in rows] == [
        ("ConfigMap", "preview", "delete", "2026-11-30T13:30:00Z"),
        ("Deployment", "api", "restart", "2026-12-06T03:00:00Z"),
    ]
    assert rows[1]["upcoming"] == [
        "2026-12-06T03:00:00Z",
        "2026-12-13T03:00:00Z",
        "2026-12-20T03:00:00Z",
    ]


def test_yaml_output_and_occurrence_count() -> None:
    rows = yaml.safe_load(
        run("-f", "-", "--now", "2026-11-30T12:00:00Z", "-o", "yaml", "--occurrences", "2")
    )
    assert rows[1]["upcoming"] == ["2026-12-06T03:00:00Z", "2026-12-13T03:00:00Z"]


def test_table_output() -> None:
    table = run("-f", "-", "--now", "2026-11-30T12:00:00Z")
    lines = table.splitlines()
    assert lines[0].split() == ["KIND", "NAMESPACE", "NAME", "ACTION", "NEXT", "(UTC)", "DETAIL"]
    assert "preview" in lines[1]
    assert "2026-11-30T13:30:00Z" in lines[1]


DUE_WARSAW_CRON = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nightly
  namespace: prod
  annotations:
    lifecycle.cezary.dev/restart-cron: "30 2 * * *"
    lifecycle.cezary.dev/cron-timezone: Europe/Warsaw
    lifecycle.cezary.dev/last-restart-timestamp: "2027-10-29T00:00:00Z"
spec:
  template: {}
"""


def test_table_of_a_due_recurring_restart_lists_every_following_occurrence() -> None:
    # Due at --now (the 2027-10-30 run was missed): the table shows the due occurrence,
    # then all of the following ones, starting with the DST fall-back day.
    table = run("-f", "-", "--now", "2027-10-30T12:00:00Z", stdin=DUE_WARSAW_CRON)
    times = [line.split()[-3] for line in table.splitlines()[2:]]
    assert "restart now" in table.splitlines()[1]
    assert times == ["2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z", "2027-11-02T01:30:00Z"]


def test_bad_now_and_bad_manifest_are_usage_errors() -> None:
    result = CliRunner().invoke(cli, ["plan", "-f", "-", "--now", "tomorrow"], input=MANIFESTS)
    assert result.exit_code != 0
    assert "--now" in result.output
    result = CliRunner().invoke(cli, ["plan", "-f", "-"], input="just a string")
    assert result.exit_code != 0
    assert "not a Kubernetes object" in result.output


# --- plan as a linter -------------------------------------------------------------------------

BAD = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: bad
  annotations:
    lifecycle.cezary.dev/delete-after: 2x
"""
LONG_TTL = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: long
  annotations:
    lifecycle.cezary.dev/delete-after: 90d
"""


def lint(*args: str) -> int:
    """The exit status of ``lifecycle-controller plan ...`` as the installed command gives it."""
    try:
        main(["plan", *args])
    except SystemExit as stopped:
        code = stopped.code
        return code if isinstance(code, int) else 1
    return 0


def test_folders_are_read_recursively_and_problems_exit_1(tmp_path: Path) -> None:
    (tmp_path / "apps" / "nested").mkdir(parents=True)
    (tmp_path / "apps" / "nested" / "cron.yaml").write_text(DUE_WARSAW_CRON)
    (tmp_path / "apps" / "README.md").write_text("not a manifest: skipped by its suffix")
    assert lint("-f", str(tmp_path), "-o", "json") == 0
    (tmp_path / "apps" / "bad.yml").write_text(BAD)
    assert lint("-f", str(tmp_path)) == 1
    result = CliRunner().invoke(cli, ["plan", "-f", str(tmp_path), "-o", "json"])
    assert result.exit_code == 1
    rows = json.loads(result.output)
    assert sorted(row["name"] for row in rows) == ["bad", "nightly"]


def test_a_ttl_over_max_delete_ttl_is_a_problem(tmp_path: Path) -> None:
    manifest = tmp_path / "long.yaml"
    manifest.write_text(LONG_TTL)
    assert lint("-f", str(manifest)) == 0
    assert lint("-f", str(manifest), "--max-delete-ttl", "30d") == 1


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert lint("-f", str(tmp_path / "missing.yaml")) == 2
    assert lint("-f", "-", "--max-delete-ttl", "2x") == 2
    assert lint("-f", "-", "--now", "yesterday") == 2
    assert lint() == 2  # -f is required


NAMESPACED = """
apiVersion: v1
kind: Namespace
metadata:
  name: previews
  annotations:
    lifecycle.cezary.dev/dry-run: "true"
    lifecycle.cezary.dev/max-delete-ttl: "1h"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: short
  namespace: previews
  annotations:
    lifecycle.cezary.dev/delete-after: 30m
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: long
  namespace: previews
  annotations:
    lifecycle.cezary.dev/delete-after: 2h
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: elsewhere
  namespace: team-a
  annotations:
    lifecycle.cezary.dev/delete-after: 2h
"""


def test_a_namespace_manifest_in_the_input_supplies_its_defaults() -> None:
    result = CliRunner().invoke(
        cli, ["plan", "-f", "-", "--now", "2026-11-30T12:00:00Z", "-o", "json"], input=NAMESPACED
    )
    assert result.exit_code == 1  # "long" has a problem: plan is also a linter
    rows = json.loads(result.stdout)
    by_name = {row["name"]: row for row in rows}
    assert by_name["short"]["dry_run"] is True
    assert by_name["short"]["inherited"] == [
        "dry-run: true (from namespace previews)",
        "max-delete-ttl: 1h (from namespace previews)",
    ]
    assert by_name["long"]["problems"][0].startswith("DeleteTTLExceeded: ")
    assert by_name["elsewhere"]["dry_run"] is False
    assert by_name["elsewhere"]["inherited"] == []
    table = (
        CliRunner()
        .invoke(cli, ["plan", "-f", "-", "--now", "2026-11-30T12:00:00Z"], input=NAMESPACED)
        .stdout
    )
    assert (
        "(dry-run: true (from namespace previews), max-delete-ttl: 1h (from namespace previews))"
        in table
    )
