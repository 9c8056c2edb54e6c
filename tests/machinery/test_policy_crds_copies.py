"""The package's copies of the chart's policy CRDs are the chart's, byte for byte.

The chart's ``crds/`` is the one source of the two policy kinds; the package carries copies
(``lifecycle_controller/devcluster/crds/``) so that ``demo`` from an installed wheel installs
them too. Change the chart, then copy: ``cp deploy/helm/lifecycle-controller/crds/*.yaml
lifecycle_controller/devcluster/crds/``.
"""

from __future__ import annotations

from pathlib import Path

from lifecycle_controller.devcluster.policy_crds import CRD_DIR, policy_crd_manifests

CHART_CRDS = (
    Path(__file__).resolve().parents[2] / "deploy" / "helm" / "lifecycle-controller" / "crds"
)


def test_the_packaged_copies_are_the_charts_files_byte_for_byte() -> None:
    chart = {path.name: path.read_bytes() for path in CHART_CRDS.glob("*.yaml")}
    packaged = {path.name: path.read_bytes() for path in CRD_DIR.glob("*.yaml")}
    assert sorted(chart) == sorted(packaged)
    for name, data in chart.items():
        assert packaged[name] == data, f"{name} differs: copy the chart's file into {CRD_DIR}"


def test_both_policy_kinds_are_found_in_the_package() -> None:
    assert sorted(policy_crd_manifests()) == ["ClusterLifecyclePolicy", "LifecyclePolicy"]
