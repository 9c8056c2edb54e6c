"""The ``lifecycle-controller`` console script: what must happen before the package loads.

Two start-up savings only work if they come before the first import of the command line
(docs/performance.md#start-up-imports):

* the garbage collector is off while the modules load (nothing they make is garbage):
  about 20 ms of CPU; it is turned back on once the command line is imported, and ``run``
  turns it off again while it imports the controller (``app/process.py`` freezes what was
  loaded and turns it back on);
* structlog is imported with rich hidden. structlog imports rich whenever it is installed,
  for pretty console tracebacks and for the locals of structured ones; rich is here only
  because the CEL library's own command line needs it, and the controller uses neither
  (its JSON tracebacks never show locals, and its console ones are plain text). It saved
  about 40 ms of CPU at every start. Anything imported later may still use rich.
"""

from __future__ import annotations

import gc
import importlib
import sys

__all__ = ["import_structlog_without_rich", "main"]


def import_structlog_without_rich() -> None:
    """Import structlog while an import of rich fails, then let rich be imported again.

    Does nothing when either is already loaded (structlog has then decided already).
    """
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # documented: the import then fails
    try:
        importlib.import_module("structlog")
    finally:
        del sys.modules["rich"]


def main() -> None:
    """Console-script entry (``python -m lifecycle_controller`` comes here too)."""
    gc.disable()
    try:
        import_structlog_without_rich()
        from lifecycle_controller.cli import main as command_line
    finally:
        gc.enable()
    command_line()
