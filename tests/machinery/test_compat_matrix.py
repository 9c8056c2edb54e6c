"""The compatibility matrix's results, README table and chart constraint (tests/compat/matrix.py),
and that the committed README and Chart.yaml agree with the committed results."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifecycle_controller.devcluster.versions import KUBERNETES_VERSIONS
from tests.compat import matrix
from tests.compat.matrix import (
    BEGIN,
    END,
    CompatResult,
    chart_kube_version,
    kube_version_constraint,
    load_results,
    oldest_passing,
    render_table,
    replace_table,
    set_chart_kube_version,
)


def test_a_result_round_trips_and_knows_its_status(tmp_path: Path) -> None:
    result = CompatResult("v1.31.14", passed=8, skipped=1, list_path="paged", notes=["x"])
    assert result.status == "pass"
    assert CompatResult.from_json(result.to_json()) == result
    assert CompatResult("v1.32.13", passed=7, failed=1).status == "fail"
    assert CompatResult("v1.32.13").status == "fail"  # nothing ran
    assert CompatResult("v1.30.14", build_error="go: error\nlink failed").status == "not built"
    matrix.results_path("v1.31.14", tmp_path).write_text(result.to_json())
    matrix.results_path("v1.4.0", tmp_path).write_text(CompatResult("v1.4.0").to_json())
    assert [r.version for r in load_results(tmp_path)] == ["v1.4.0", "v1.31.14"]


def test_the_table_lists_newest_first_with_counts_path_and_notes() -> None:
    table = render_table(
        [
            CompatResult("v1.31.14", passed=8, skipped=1, list_path="paged", notes=["a|b", "c"]),
            CompatResult("v1.36.3", passed=9, list_path="streaming"),
            CompatResult("v1.30.14", build_error="tail\nlast line of the error"),
        ]
    )
    assert table.splitlines() == [
        "| Kubernetes | Result | Informer list path | Notes |",
        "|---|---|---|---|",
        "| v1.36.3 | pass (9 passed, 0 failed, 0 skipped) | streaming | - |",
        "| v1.31.14 | pass (8 passed, 0 failed, 1 skipped) | paged | a\\|b; c |",
        "| v1.30.14 | not built | - | last line of the error |",
    ]


def test_the_table_is_replaced_between_the_markers_only() -> None:
    readme = f"intro\n{BEGIN}\nold table\n{END}\noutro\n"
    assert replace_table(readme, "new\n") == f"intro\n{BEGIN}\nnew\n{END}\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        replace_table("no markers\n", "new\n")


def test_the_chart_floor_is_the_oldest_passing_minor() -> None:
    results = [
        CompatResult("v1.30.14", build_error="x"),
        CompatResult("v1.31.14", passed=1, failed=1),
        CompatResult("v1.32.13", passed=3),
        CompatResult("v1.36.3", passed=3),
    ]
    assert oldest_passing(results) == "v1.32.13"
    assert oldest_passing([]) is None
    assert kube_version_constraint("v1.32.13") == ">=1.32.0-0"
    chart = 'name: x\nkubeVersion: ">=1.30.0-0"\nversion: 1\n'
    assert chart_kube_version(chart) == ">=1.30.0-0"
    updated = set_chart_kube_version(chart, ">=1.32.0-0")
    assert updated == 'name: x\nkubeVersion: ">=1.32.0-0"\nversion: 1\n'
    with pytest.raises(ValueError, match="no kubeVersion"):
        chart_kube_version("name: x\n")


def test_the_readme_table_matches_the_committed_results() -> None:
    results = load_results()
    assert results, "no compat results committed (docs/compat/results-*.json)"
    assert {r.version for r in results} <= set(KUBERNETES_VERSIONS)
    readme = matrix.README.read_text()
    assert replace_table(readme, render_table(results)) == readme, (
        "README table is stale: python -m tests.compat.matrix"
    )


def test_the_chart_kube_version_matches_the_oldest_passing_release() -> None:
    oldest = oldest_passing(load_results())
    assert oldest is not None
    chart = matrix.CHART.read_text()
    assert chart_kube_version(chart) == kube_version_constraint(oldest)


def test_ci_runs_the_edges_and_everything_on_demand() -> None:
    from tests.compat.run_matrix import selected

    assert selected(True, []) == [KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1]]
    assert selected(False, []) == list(KUBERNETES_VERSIONS)
    assert selected(True, [KUBERNETES_VERSIONS[1]]) == [KUBERNETES_VERSIONS[1]]
    with pytest.raises(SystemExit, match="not pinned"):
        selected(False, ["v1.20.0"])


def test_the_runner_runs_each_release_in_turn_and_reports_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.compat import run_matrix

    runs: list[tuple[str, list[str]]] = []

    class Completed:
        def __init__(self, returncode: int) -> None:
            self.returncode = returncode

    def run(command: list[str], *, env: dict[str, str], check: bool) -> Completed:
        version = env[matrix.VERSION_ENV]
        runs.append((version, command))
        return Completed(1 if version == KUBERNETES_VERSIONS[0] else 0)

    regenerated: list[list[str]] = []

    def regenerate(argv: list[str]) -> int:
        regenerated.append(argv)
        return 0

    monkeypatch.setattr("subprocess.run", run)
    monkeypatch.setattr(matrix, "main", regenerate)
    assert run_matrix.main(["--edges", "--junit-dir", "out"]) == 1
    assert [version for version, _ in runs] == [KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1]]
    assert f"--junitxml=out/junit-{KUBERNETES_VERSIONS[-1]}.xml" in runs[-1][1]
    assert regenerated == [[]]
    runs.clear()
    assert run_matrix.main([KUBERNETES_VERSIONS[-1]]) == 0
    assert [version for version, _ in runs] == [KUBERNETES_VERSIONS[-1]]
