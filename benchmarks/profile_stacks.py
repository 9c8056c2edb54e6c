"""Sampling profiles of the controller process under the benchmark, and their top items.

``python -m benchmarks.cluster --profile`` samples the running ``lifecycle-controller run``
from outside (the ``py-spy`` sampler of the ``bench`` extra, attached to its PID, without
pausing it) during the bursts and during the storms, and reports the functions that hold
the most samples: *self* (the function itself was running) and *inclusive* (it was on the
stack). The sampler runs in its own process, so the controller's CPU figures barely move.
The raw stacks are written beside the report (keep them out of the repository).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Sampler", "top_items"]

#: Samples per second (the controller spends well under 100 ms on one action burst second).
RATE = 250
#: Frames of the package's own code (the path inside the installed or checked-out tree).
PACKAGE = "lifecycle_controller/"
#: The package's functions on this share of all samples are its entry points (the CLI, the
#: event loop's runner), not steps: left out of the inclusive list.
ENTRY_SHARE = 0.8


@dataclass
class Sampler:
    """One sampling run on ``pid``, writing collapsed stacks to ``output``."""

    pid: int
    output: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> bool:
        """Start sampling; False when the sampler is not installed."""
        beside = Path(sys.executable).with_name("py-spy")  # a virtualenv not on PATH
        binary = str(beside) if beside.exists() else shutil.which("py-spy")
        if binary is None:
            return False
        self.process = subprocess.Popen(
            [
                binary,
                "record",
                f"--pid={self.pid}",
                "--format=raw",
                f"--rate={RATE}",
                "--nonblocking",
                f"--output={self.output}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return True

    def stop(self) -> None:
        """Stop sampling and wait until the stacks are written."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)
        if self.process.poll() is None:
            self.process.kill()


def _function(frame: str) -> tuple[str, bool]:
    """``name (path/to/module.py:123)`` → (``module.py:name``, whether it is the package's)."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    ours = PACKAGE in path
    # controller/reconcile/reconciler.py for the package's, the file name for the others
    path = path.split(PACKAGE, 1)[1] if ours else path.rsplit("/", 1)[-1]
    return (f"{path}:{name}" if path else name), ours


def top_items(stacks: Path, n: int = 15) -> dict[str, Any]:
    """The ``n`` functions with the most samples, in % of all samples: *self* (any code,
    libraries included: where the time goes) and *inclusive* (the package's own functions
    below its entry points: which of its steps the time goes to)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in stacks.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_function(f) for f in stack.split(";") if f and not f.startswith("process ")]
        if not frames:
            continue
        own[frames[-1][0]] += count
        for function in {name for name, ours in frames if ours}:
            inclusive[function] += count
    entry = {f for f, c in inclusive.items() if c >= ENTRY_SHARE * total}

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(100 * c / total, 1)) for f, c in counter.most_common(n)]

    for function in entry:
        del inclusive[function]
    return {"samples": total, "self": share(own), "inclusive": share(inclusive)}
