"""User documentation keeps up with the code: every `run` flag is documented in the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lifecycle_controller.config import RUN_FLAGS, Flag
from lifecycle_controller.tools.options import CONTROLLER_FLAGS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("flag", RUN_FLAGS, ids=lambda flag: flag.name)
def test_every_run_flag_and_its_env_var_is_in_the_readme(flag: Flag) -> None:
    assert f"`--{flag.name}`" in README
    assert f"`{flag.envvar}`" in README


def _readme_run_flags() -> dict[str, tuple[str, str]]:
    """The README's `run` flags table: flag name → (environment variable, default column)."""
    section = README.split("## `run` flags", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`--"):
            rows[cells[0].strip("`").removeprefix("--")] = (cells[1].strip("`"), cells[2])
    return rows


def test_the_readme_flags_table_lists_exactly_the_run_flags() -> None:
    rows = _readme_run_flags()
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
