"""README's picture of the console: ``lifecycle-controller demo --console``, photographed.

Runs the demo as a user runs it (a local control plane, its samples, its policy rehearsed in
dry run and then switched on, the controller), opens the console it serves in headless
chromium, waits until the demo has acted (the ConfigMap's deletion and the policy's in the
last actions, the cron restarts on the timeline), selects the first restart mark so the
detail panel shows where it comes from, and saves the page to ``docs/console.png``
(``--dark``: the dark theme). Nothing is drawn by hand: run it again after changing the page.

    python -m benchmarks.console_screenshot [--output docs/console.png] [--dark]
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import subprocess
import sys
import threading
from pathlib import Path

from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from benchmarks.browser import headless

WIDTH, HEIGHT = 1400, 1180


def _console_url(lines: queue.Queue[str], limit: float) -> str:
    while True:
        line = lines.get(timeout=limit)
        print(line, end="", flush=True)
        if line.startswith("console: "):
            return line.split()[1]


def _photograph(driver: WebDriver, url: str, output: Path, dark: bool) -> None:
    driver.get(url)
    wait = WebDriverWait(driver, 120, poll_frequency=0.2)
    if dark:
        driver.find_element(By.ID, "theme").click()
    wait.until(
        lambda d: d.find_elements(
            By.CSS_SELECTOR, '#actions tr[data-name="tmp-build-cache"][data-action="delete"]'
        ),
        "the policy's deletions in the last actions",
    )
    wait.until(
        lambda d: "Ready" in d.find_element(By.CSS_SELECTOR, "#policies tbody tr").text,
        "the policy's status",
    )
    driver.find_element(By.CSS_SELECTOR, '#span button[data-value="hour"]').click()
    mark = wait.until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '#chart .mark[data-category="restart"]'),
        "the cron restarts on the timeline",
    )[0]
    mark.click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#cell li"), "the mark's objects")
    driver.find_element(By.CSS_SELECTOR, "#cell li button").click()
    wait.until(lambda d: len(d.find_element(By.CSS_SELECTOR, "#cell pre").text) > 20, "explain")
    driver.execute_script("document.activeElement.blur()")
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(WIDTH, height + 140)  # the whole page: the window has a frame
    output.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(output))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.console_screenshot", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--output", type=Path, default=Path("docs/console.png"))
    parser.add_argument("--dark", action="store_true", help="the dark theme")
    args = parser.parse_args(argv)
    command = [sys.executable, "-m", "lifecycle_controller", "demo", "--nodes", "0"]
    command += ["--duration", "150", "--console", "--no-browser"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as demo:
        lines: queue.Queue[str] = queue.Queue()

        def read() -> None:
            assert demo.stdout is not None
            with contextlib.suppress(ValueError):  # closed when the demo is done
                for line in demo.stdout:
                    lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        try:
            url = _console_url(lines, limit=600)
            driver = headless(WIDTH, HEIGHT)
            try:
                _photograph(driver, url, args.output, args.dark)
            finally:
                driver.quit()
        finally:
            demo.terminate()
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
