"""The policy recipes in README.md and docs/policies.md show what ``plan`` really prints.

Each recipe is a file in examples/policies/; docs/policies.md shows every one, the README the
first (:data:`SHOWN`), each with its policy and the output of
``lifecycle-controller plan -f examples/policies/NAME.yaml --now 2026-12-02T10:00:00Z``. This
test runs that command and finds its output, verbatim, after the command line in each
document, and checks that every recipe's policy is valid (``plan`` exits 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lifecycle_controller.cli import cli

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(path.stem for path in (ROOT / "examples" / "policies").glob("*.yaml"))
NOW = "2026-12-02T10:00:00Z"
#: (document, recipe) for every recipe each document shows.
SHOWN = [("docs/policies.md", name) for name in RECIPES] + [("README.md", "preview-namespaces")]


def _shown(document: str, name: str) -> str:
    """The console block in ``document`` after the recipe's ``plan`` command line."""
    command = f"$ lifecycle-controller plan -f examples/policies/{name}.yaml --now {NOW}\n"
    assert command in document, f"{name}: the plan command is not shown"
    return document.split(command, 1)[1].split("```", 1)[0]


def test_there_are_five_recipes() -> None:
    assert RECIPES == [
        "nightly-restarts",
        "pending-claims",
        "preview-namespaces",
        "scaled-to-zero",
        "stale-configmaps",
    ]


@pytest.mark.parametrize(("document", "name"), SHOWN)
def test_the_documented_plan_output_is_what_plan_prints(document: str, name: str) -> None:
    path = ROOT / "examples" / "policies" / f"{name}.yaml"
    result = CliRunner().invoke(cli, ["plan", "-f", str(path), "--now", NOW])
    assert result.exit_code == 0, result.output
    assert "POLICY" in result.output
    assert _shown((ROOT / document).read_text(), name) == result.output


@pytest.mark.parametrize(("document", "name"), SHOWN)
def test_the_documented_policy_is_the_example_file(document: str, name: str) -> None:
    policy = (ROOT / "examples" / "policies" / f"{name}.yaml").read_text().split("\n---\n")[0]
    assert f"```yaml\n{policy.rstrip()}\n```" in (ROOT / document).read_text()
