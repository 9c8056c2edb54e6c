"""What ``lifecycle-controller run`` imports before its first request (docs/architecture.md).

Start-up time and memory are mostly imports, so the heavy libraries that only some
configurations need stay out of the common path: kubernetes-asyncio's generated client
(only for kubeconfigs that need its loader), cryptography (only for a self-signed metrics
certificate) and croniter (only once a ``restart-cron`` is evaluated). A fresh interpreter
imports what ``run`` imports and reports which of them got loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

LAZY = ("kubernetes_asyncio.client", "cryptography", "croniter", "cel")


def test_the_run_path_leaves_the_heavy_optional_libraries_unloaded() -> None:
    probe = (
        "import json, sys\n"
        "import lifecycle_controller.cli, lifecycle_controller.app\n"
        f"print(json.dumps([m for m in {list(LAZY)!r} if m in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []


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
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == [True, 9000 * 10**9, True, True]  # 1970-01-01T02:30Z
