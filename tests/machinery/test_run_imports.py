"""What ``lifecycle-controller run`` imports before its first request (docs/architecture.md).

Start-up time and memory are mostly imports, so the heavy libraries that only some
configurations need stay out of the common path: kubernetes-asyncio's generated client
(only for kubeconfigs that need its loader), cryptography (only for a self-signed metrics
certificate) and croniter (only once a ``restart-cron`` is evaluated), and so do the operator
tools (``plan``, ``status``...: loaded when one is called); rich, which structlog
would import for tracebacks the controller does not print, is hidden from it by the console
script (docs/performance.md#start-up-imports). A fresh interpreter imports what ``run``
imports and reports which of them got loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def fresh_interpreter(probe: str) -> Any:
    """What ``probe`` printed as JSON, run by a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(result.stdout)


LAZY = ("kubernetes_asyncio.client", "cryptography", "croniter", "cel", "rich", "pygments")
TOOLS = (
    "lifecycle_controller.tools.commands",
    "lifecycle_controller.tools.options",
    "lifecycle_controller.tools.breaker",
    "lifecycle_controller.tools.policy_commands",
    "lifecycle_controller.core.tooling.plan",
)


def test_the_run_path_leaves_the_heavy_optional_libraries_unloaded() -> None:
    probe = (
        "import json, sys\n"
        "from lifecycle_controller.entry import import_structlog_without_rich\n"
        "import_structlog_without_rich()\n"
        "import lifecycle_controller.cli, lifecycle_controller.app\n"
        f"print(json.dumps([m for m in {list(LAZY + TOOLS)!r} if m in sys.modules]))\n"
    )
    assert fresh_interpreter(probe) == []


def test_each_tool_loads_when_called_and_every_command_is_listed() -> None:
    probe = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from lifecycle_controller.cli import TOOLS, cli\n"
        "runner = CliRunner()\n"
        "status = runner.invoke(cli, ['status', '--help'])\n"
        "after_status = [m for m in sys.modules if m.startswith('lifecycle_controller.tools.')]\n"
        "listing = runner.invoke(cli, ['--help']).output\n"
        "print(json.dumps([status.exit_code, 'Usage: cli status' in status.output,"
        " sorted(after_status), all(f'  {name} ' in listing for name in TOOLS)]))\n"
    )
    assert fresh_interpreter(probe) == [
        0,
        True,
        [
            "lifecycle_controller.tools.click_shell",
            "lifecycle_controller.tools.commands",
            "lifecycle_controller.tools.options",
        ],
        True,
    ]


def test_the_lazy_libraries_still_load_when_needed() -> None:
    probe = (
        "import json, sys\n"
        "from lifecycle_controller.machinery.tls import self_signed_certificate\n"
        "from datetime import UTC\n"
        "from lifecycle_controller.core.text.cron import cron_next, parse_cron\n"
        "cert, key = self_signed_certificate()\n"
        "due = cron_next(parse_cron('30 2 * * *'), UTC, 0)\n"
        "print(json.dumps([cert.startswith(b'-----BEGIN'), due,"
        " 'cryptography' in sys.modules, 'croniter' in sys.modules]))\n"
    )
    assert fresh_interpreter(probe) == [True, 9000 * 10**9, True, True]  # 1970-01-01T02:30Z


def test_structlog_loads_without_rich_and_rich_still_loads_after() -> None:
    """The console script hides rich from structlog only: structlog then formats console
    tracebacks as plain text, and a later import of rich works."""
    probe = (
        "import json, sys\n"
        "from lifecycle_controller.entry import import_structlog_without_rich\n"
        "import_structlog_without_rich()\n"
        "import structlog.dev\n"
        "before = 'rich' in sys.modules\n"
        "plain = structlog.dev.default_exception_formatter is structlog.dev.plain_traceback\n"
        "import rich\n"
        "print(json.dumps([before, plain, 'rich' in sys.modules]))\n"
    )
    assert fresh_interpreter(probe) == [False, True, True]


def test_the_console_script_runs_the_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lifecycle_controller", "version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.startswith("lifecycle-controller ")
