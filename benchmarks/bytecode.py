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

import subprocess
import sys
from pathlib import Path

__all__ = ["compile_bytecode"]

# Where the installed package is, as the controller's interpreter imports it; -P keeps the
# current directory (often a checkout) from shadowing what the console script would import.
_LOCATE = (
    "import importlib.util, os\n"
    "spec = importlib.util.find_spec('lifecycle_controller')\n"
    "assert spec is not None and spec.origin is not None\n"
    "print(os.path.dirname(spec.origin))\n"
)

_compiled: set[tuple[str, str | None]] = set()


def _package_dir(interpreter: str, source: str | None) -> Path:
    """The ``lifecycle_controller`` folder the controller will import: ``source``'s when given
    (it goes first on the controller's ``PYTHONPATH``), else the one its interpreter finds."""
    if source:
        return Path(source).resolve() / "lifecycle_controller"
    located = subprocess.run(
        [interpreter, "-P", "-c", _LOCATE], check=True, capture_output=True, text=True
    )
    return Path(located.stdout.strip())


def _compile(interpreter: str, folder: Path) -> None:
    subprocess.run([interpreter, "-m", "compileall", "-q", str(folder)], check=True)


def compile_bytecode(interpreter: str | None = None, source: str | None = None) -> None:
    """Compile the controller package as ``interpreter`` (this one when None) imports it (from
    ``source`` when given), and the benchmarks' own modules (the floors run with this
    interpreter); once per interpreter and source in a benchmark's process."""
    key = (interpreter or sys.executable, source)
    if key in _compiled:
        return
    _compile(key[0], _package_dir(key[0], source))
    _compile(sys.executable, Path(__file__).resolve().parent)
    _compiled.add(key)
