"""README's first command from a wheel, as a newcomer runs it: a non-editable install in a clean
virtualenv, then ``lifecycle-controller demo --console``.

The package must carry everything the demo and the console need: the policy CRDs (the demo
rehearses a policy in dry run, then switches it on: without them it said the policy part was
skipped) and the console's page. The wheel is built from this tree and installed with its
dependencies into a fresh virtualenv; nothing of the tree is on the path when the installed
command runs. The console it opens is read in the browser until its timeline and its last
actions show the demo at work.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import venv
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from benchmarks.browser import headless, missing
from lifecycle_controller.devcluster import ControlPlane

pytestmark = [pytest.mark.integration, pytest.mark.long]  # the wheel and its virtualenv

ROOT = Path(__file__).resolve().parents[2]


def _run(*command: str | Path, cwd: Path | None = None) -> None:
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=cwd,
        env=_outside_the_tree(),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _outside_the_tree() -> dict[str, str]:
    """This environment without anything that would find the source tree's package."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV", "KUBECONFIG")
        and not key.startswith("LIFECYCLE_")
    } | {"PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel of this tree installed (not editable); its bin/."""
    work = tmp_path_factory.mktemp("wheel")
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist", ROOT)
    (wheel,) = (work / "dist").glob("lifecycle_controller-*.whl")
    venv.create(work / "venv", with_pip=True, clear=True)
    bin_dir = work / "venv" / "bin"
    _run(bin_dir / "python", "-m", "pip", "install", "-q", wheel)
    return bin_dir


def _lines(process: subprocess.Popen[str]) -> Iterator[str]:
    assert process.stdout is not None
    yield from process.stdout


def test_the_demo_from_a_wheel_rehearses_its_policy_and_opens_the_console(
    control_plane: ControlPlane, installed: Path, tmp_path: Path
) -> None:
    # control_plane: the binaries are built (or found in the per-user cache) before the demo.
    located = subprocess.run(
        [
            installed / "python",
            "-c",
            "import lifecycle_controller; print(lifecycle_controller.__file__)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=_outside_the_tree(),
    )
    assert located.stdout.startswith(str(installed.parent)), located.stdout  # not the tree's
    assert not missing(), f"{missing()} not installed: run `tox -e browser`"
    with subprocess.Popen(
        [installed / "lifecycle-controller", "demo", "--nodes", "0", "--duration", "60",
         "--console", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=_outside_the_tree(),
    ) as process:  # fmt: skip
        text = _follow(process)
    assert process.returncode == 0, text
    assert "policy part is skipped" not in text
    assert "applied LifecyclePolicy lifecycle-demo/tmp-configmaps" in text
    assert SWITCHED in text


#: The demo's line once its policy's dry run is over (the last thing the test waits for).
SWITCHED = "switching LifecyclePolicy tmp-configmaps on"


def _until(output: queue.Queue[str], seen: list[str], found: Callable[[str], bool]) -> str:
    """The first line of the demo's output that ``found`` accepts (lines up to it go to
    ``seen``); fails after two minutes without one."""
    while True:
        line = output.get(timeout=120)
        seen.append(line)
        if found(line):
            return line


def _follow(process: subprocess.Popen[str]) -> str:
    """Read the demo's output; open its console in the browser once it prints the URL, and
    wait there for the demo's actions; once they showed and the policy was switched on, stop
    the demo with Ctrl-C, as a person does (its ``--duration`` ends it if the test gets no
    further); the whole output once the demo has ended."""
    output: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in _lines(process):
            output.put(line)

    reader = threading.Thread(target=read)
    reader.start()
    seen: list[str] = []
    try:
        url = _until(output, seen, lambda line: line.startswith("console: ")).split()[1]
        driver = headless()
        try:
            driver.get(url)
            wait = WebDriverWait(driver, 60, poll_frequency=0.2)
            wait.until(
                lambda d: d.find_elements(By.CSS_SELECTOR, "#chart .mark"), "the demo's timeline"
            )
            wait.until(
                lambda d: d.find_elements(
                    By.CSS_SELECTOR,
                    '#actions tr[data-name="preview-env-config"][data-action="delete"]',
                ),
                "the demo's deletion in the last actions",
            )
            wait.until(
                lambda d: d.find_elements(
                    By.CSS_SELECTOR,
                    '#policies tr[data-ref="LifecyclePolicy/lifecycle-demo/tmp-configmaps"]',
                ),
                "the demo's policy",
            )
        finally:
            driver.quit()
        _until(output, seen, lambda line: SWITCHED in line)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        process.wait(timeout=180)
        reader.join(timeout=30)
    while not output.empty():
        seen.append(output.get())
    return "".join(seen)
