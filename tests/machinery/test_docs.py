"""User documentation keeps up with the code: every `run` flag is documented in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifecycle_controller.cli import RUN_FLAGS, Flag

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("flag", RUN_FLAGS, ids=lambda flag: flag.name)
def test_every_run_flag_and_its_env_var_is_in_the_readme(flag: Flag) -> None:
    assert f"`--{flag.name}`" in README
    assert f"`{flag.envvar}`" in README
