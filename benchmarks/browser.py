"""The system browser, headless (Debian's ``chromium`` driven by Selenium), and the console it
looks at, started as a user starts it (:func:`console_process`).

The console's browser tests (tests/integration/test_console_browser.py), its benchmark
(``benchmarks.console``) and the README's screenshot (``benchmarks.console_screenshot``) all
drive the same browser, the one the distribution packages: nothing is downloaded at run time
(Selenium's own driver manager is bypassed by naming the driver).

``python -m benchmarks.browser install`` is the project's set-up step (``tox -e browser``,
before the integration tests): it does nothing when both are installed, runs
``apt-get install chromium chromium-driver`` as root when they are not, and otherwise says
what to install and exits 1, so a machine without the browser fails the set-up rather than
skipping the tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "ConsoleProcess",
    "console_process",
    "headless",
    "install",
    "missing",
]

CHROMIUM: Final = Path(os.environ.get("LIFECYCLE_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER: Final = Path(os.environ.get("LIFECYCLE_CHROMEDRIVER", "/usr/bin/chromedriver"))
_PACKAGES: Final = ("chromium", "chromium-driver")


def missing() -> list[str]:
    """The executables that are not there (empty: the browser can run)."""
    return [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]


def install() -> int:
    """Install the browser if it is missing (see the module docstring); the exit status."""
    if not missing():
        print(f"browser: {CHROMIUM} and {CHROMEDRIVER} found")
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(
            f"browser: {', '.join(missing())} not found; install Debian's "
            f"{' and '.join(_PACKAGES)} (apt-get install -y {' '.join(_PACKAGES)}) as root",
            file=sys.stderr,
        )
        return 1
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *_PACKAGES]):
        print("browser: " + " ".join(step), flush=True)
        subprocess.run(step, check=True, env=environment)
    if missing():
        print(f"browser: still missing after apt-get: {', '.join(missing())}", file=sys.stderr)
        return 1
    return 0


def headless(width: int = 1400, height: int = 1000, *, dark: bool = False) -> webdriver.Chrome:
    """A headless chromium of this size (``dark``: the page sees a dark colour scheme)."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--blink-settings=preferredColorScheme={0 if dark else 1}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


class ConsoleProcess:
    """A running ``lifecycle-controller console``: its process and the URL it printed."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url


@contextlib.contextmanager
def console_process(
    kubeconfig: Path | str, *args: str, env: Mapping[str, str] | None = None
) -> Iterator[ConsoleProcess]:
    """``lifecycle-controller console --no-browser --address 127.0.0.1:0 ARGS`` with
    ``kubeconfig``, until the block ends (then SIGTERM, as Ctrl-C would)."""
    command = [sys.executable, "-m", "lifecycle_controller", "console", "--no-browser"]
    command += ["--address", "127.0.0.1:0", "--kubeconfig", str(kubeconfig), *args]
    environment = {**(env if env is not None else os.environ), "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, text=True, env=environment
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # "console: URL  (read-only; ...)"
            if not line.startswith("console: "):
                process.kill()
                process.wait(timeout=30)
                errors.seek(0)
                raise RuntimeError(f"the console did not start: {line}{errors.read()}")
            yield ConsoleProcess(process, line.split()[1])
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m benchmarks.browser install")
    sys.exit(install())
