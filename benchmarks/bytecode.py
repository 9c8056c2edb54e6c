"""Compiled bytecode for every process a benchmark starts, as an installed user's has it.

``pip install`` compiles a package's modules to bytecode as it installs them (the container
image's virtualenv ships them; ``PYTHONDONTWRITEBYTECODE`` does not stop it). A process
started from a source checkout under ``PYTHONDONTWRITEBYTECODE=1`` (an editable install, a
``--controller-source`` tree, the benchmarks' own floors) finds no bytecode and compiles
every module it imports on each start: about 0.15 s of CPU for the controller, which no user
pays. So before a measured start, the package's and the benchmarks' modules are compiled
into their ``__pycache__`` directories (ignored by git), by the interpreter that will run
them; a module whose source is newer than its bytecode is compiled again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["compile_bytecode"]

_COMPILE = (
    "import compileall, importlib, os, sys\n"
    "for name in sys.argv[1:]:\n"
    "    module = importlib.import_module(name)\n"
    "    assert module.__file__ is not None\n"
    "    compileall.compile_dir(os.path.dirname(module.__file__), quiet=1)\n"
)

_compiled: set[tuple[str, str | None]] = set()


def _compile(interpreter: str, source: str | None, packages: tuple[str, ...]) -> None:
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = str(Path(source).resolve())
    subprocess.run([interpreter, "-c", _COMPILE, *packages], env=env, check=True)


def compile_bytecode(interpreter: str | None = None, source: str | None = None) -> None:
    """Compile the controller package as ``interpreter`` (this one when None) imports it (from
    ``source`` when given), and the benchmarks' own modules (the floors run with this
    interpreter); once per interpreter and source in a benchmark's process."""
    key = (interpreter or sys.executable, source)
    if key in _compiled:
        return
    _compile(key[0], source, ("lifecycle_controller",))
    _compile(sys.executable, None, ("benchmarks",))
    _compiled.add(key)
