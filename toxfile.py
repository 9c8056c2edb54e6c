"""tox's inline plugin: one virtualenv shared by the environments that ask for it.

tox 4 recreates an environment whose folder was last used under another name. The runner
``shared_virtualenv`` leaves the name out of that comparison, so the environments of
tox.ini that set it (and the same ``env_dir``, extras and deps) install the package and its
dependencies once instead of once each. Anything else that differs still recreates.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tox.plugin import impl
from tox.tox_env.api import ToxEnv
from tox.tox_env.info import Info
from tox.tox_env.python.virtual_env.runner import VirtualEnvRunner
from tox.tox_env.register import ToxEnvRegister


class _InfoWithoutName(Info):
    """The environment's cached description, compared without the environment's name."""

    @contextmanager
    def compare(
        self, value: Any, section: str, sub_section: str | None = None
    ) -> Iterator[tuple[bool, Any | None]]:
        if section == ToxEnv.__name__ and isinstance(value, dict):
            value = {key: item for key, item in value.items() if key != "name"}
        with super().compare(value, section, sub_section) as outcome:
            yield outcome


class SharedVirtualEnvRunner(VirtualEnvRunner):
    @staticmethod
    def id() -> str:
        return "shared_virtualenv"

    @property
    def cache(self) -> Info:
        return _InfoWithoutName(self.env_dir)


@impl
def tox_register_tox_env(register: ToxEnvRegister) -> None:
    register.add_run_env(SharedVirtualEnvRunner)
