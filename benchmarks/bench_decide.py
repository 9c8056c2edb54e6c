"""How fast the decision core decides: decisions per second for a realistic mix.

Run: python benchmarks/bench_decide.py [N]
"""

from __future__ import annotations

import sys
import time

from lifecycle_controller.core import DecisionSettings, Ledger, ObjectFacts, ObjectKey, decide
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.text.timestamps import parse_rfc3339

NOW = parse_rfc3339("2026-11-30T12:00:00Z")
MIX: list[tuple[str, dict[str, str]]] = [
    ("ConfigMap", {keys.DELETE_AT: "2026-12-01T00:00:00Z"}),
    ("ConfigMap", {keys.DELETE_AFTER: "2h"}),
    (
        "Deployment",
        {
            keys.RESTART_CRON: "0 3 * * *",
            keys.CRON_TIMEZONE: "Europe/Warsaw",
            keys.LAST_RESTART_TIMESTAMP: "2026-11-30T02:00:00Z",
        },
    ),
    (
        "Deployment",
        {keys.RESTART_EVERY: "6h", keys.LAST_RESTART_TIMESTAMP: "2026-11-30T10:00:00.123456789Z"},
    ),
    ("Deployment", {keys.RESTART_AT: "2026-11-30T11:59:00Z", keys.CATCH_UP: "15m"}),
    ("ConfigMap", {keys.DELETE_AFTER: "bogus"}),
]


def main(count: int) -> None:
    settings = DecisionSettings()
    ledger = Ledger()
    facts = [
        ObjectFacts(
            key=ObjectKey.for_kind(
                group="apps" if kind == "Deployment" else "",
                version="v1",
                kind=kind,
                namespace="bench",
                name=f"obj-{i}",
            ),
            uid=f"uid-{i}",
            resource_version="1",
            has_pod_template=kind == "Deployment",
        )
        for i, (kind, _) in enumerate(MIX)
    ]
    started = time.perf_counter()
    for i in range(count):
        index = i % len(MIX)
        decide(
            annotations=MIX[index][1],
            facts=facts[index],
            now_ns=NOW + i,
            settings=settings,
            ledger=ledger,
        )
    elapsed = time.perf_counter() - started
    print(
        f"{count} decisions in {elapsed:.2f}s: {count / elapsed:,.0f}/s "
        f"({elapsed / count * 1e6:.1f} µs each)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60_000)
