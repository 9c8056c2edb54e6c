"""User documentation keeps up with the code: every `run` flag is documented in
docs/reference.md, and the README's commands table lists the tools' controller flags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lifecycle_controller.config import RUN_FLAGS, Flag
from lifecycle_controller.tools.options import CONTROLLER_FLAGS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
#: The reference page of `run`: its flags table, Events, probes and metrics.
REFERENCE = (ROOT / "docs" / "reference.md").read_text()


@pytest.mark.parametrize("flag", RUN_FLAGS, ids=lambda flag: flag.name)
def test_every_run_flag_and_its_env_var_is_in_the_reference(flag: Flag) -> None:
    assert f"`--{flag.name}`" in REFERENCE
    assert f"`{flag.envvar}`" in REFERENCE


def _reference_run_flags() -> dict[str, tuple[str, str]]:
    """The reference's `run` flags table: flag name → (environment variable, default column)."""
    section = REFERENCE.split("## `run` flags", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`--"):
            rows[cells[0].strip("`").removeprefix("--")] = (cells[1].strip("`"), cells[2])
    return rows


def test_the_reference_flags_table_lists_exactly_the_run_flags() -> None:
    rows = _reference_run_flags()
    assert list(rows) == [flag.name for flag in RUN_FLAGS]
    for flag in RUN_FLAGS:
        envvar, default = rows[flag.name]
        assert envvar == flag.envvar, flag.name
        if flag.default:
            assert default == f"`{flag.default}`", flag.name
        else:  # no default: blank, or a note in parentheses such as "(all)"
            assert default == "" or (default.startswith("(") and default.endswith(")")), flag.name


def test_the_readme_lists_exactly_the_controller_flags_the_tools_take() -> None:
    (line,) = [line for line in README.splitlines() if line.startswith("| controller flags |")]
    listed = set(re.findall(r"`--([a-z-]+)`", line))
    assert listed == {flag.name for flag in CONTROLLER_FLAGS}
