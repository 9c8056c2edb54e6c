"""Logging setup: JSON lines with bound context, level filtering, stdlib routing, formats."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from lifecycle_controller.controller.act.accounting import Accounting, NoActionMetrics
from lifecycle_controller.controller.events.recorder import Recorded
from lifecycle_controller.core import Action, DryRun, Ledger, ObjectKey, ObjectRef, Operation, Wait
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.machinery.log_context import LazyFields, item_fields
from lifecycle_controller.machinery.logs import configure_logging
from tests.doubles.fakeapi import CONFIGMAPS


class _NoEvents:
    async def record(self, ref: ObjectRef, event: Event) -> Recorded | None:
        return None


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    quiet = {n: logging.getLogger(n).level for n in ("aiohttp.access", "kubernetes_asyncio")}
    quiet["kubernetes_asyncio.client.rest"] = logging.getLogger(
        "kubernetes_asyncio.client.rest"
    ).level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in quiet.items():
        logging.getLogger(name).setLevel(old)


def setup(level: str = "info", fmt: str = "json") -> io.StringIO:
    stream = io.StringIO()
    configure_logging(fmt, level, stream=stream, cache_logger_on_first_use=False)
    return stream


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_the_bound_object() -> None:
    stream = setup()
    log = structlog.get_logger("lifecycle_controller.controller.reconcile.reconciler")
    with structlog.contextvars.bound_contextvars(kind="ConfigMap", namespace="ns", name="a"):
        log.info("deleting", action="delete", due="2026-01-01T00:00:00Z")
    log.info("outside")
    inside, outside = lines(stream)
    assert inside["msg"] == "deleting"
    assert inside["level"] == "info"
    assert inside["timestamp"].endswith("Z")
    assert (inside["kind"], inside["namespace"], inside["name"]) == ("ConfigMap", "ns", "a")
    assert inside["action"] == "delete"
    assert inside["due"] == "2026-01-01T00:00:00Z"
    assert not {"kind", "namespace", "name"} & outside.keys()


async def test_a_work_item_s_fields_are_on_its_lines_and_its_tasks_lines_only() -> None:
    stream = setup()
    log = structlog.get_logger("lifecycle_controller.controller.work.workers")

    async def background() -> None:
        log.info("event written")

    with item_fields({"kind": "ConfigMap", "namespace": "ns", "name": "a", "reconcile_id": "1f"}):
        log.info("deleting", name="explicit")
        task = asyncio.create_task(background())
    await task
    log.info("outside")
    inside, in_task, outside = lines(stream)
    assert (inside["kind"], inside["namespace"]) == ("ConfigMap", "ns")
    assert inside["reconcile_id"] == "1f"
    assert inside["name"] == "explicit", "a field bound on the line wins over the item's"
    assert (in_task["kind"], in_task["name"]) == ("ConfigMap", "a")
    assert not {"kind", "namespace", "name", "reconcile_id"} & outside.keys()


def test_lazy_item_fields_are_built_only_for_a_line_written() -> None:
    stream = setup(level="info")
    log = structlog.get_logger("lifecycle_controller.controller.work.workers")
    built: list[str] = []

    def build() -> dict[str, str]:
        built.append("built")
        return {"kind": "ConfigMap", "name": "a"}

    with item_fields(LazyFields(build)):
        log.debug("filtered out")
        assert built == [], "no line written: nothing built"
        log.info("written")
        log.info("written again")
    (first, second) = lines(stream)
    assert (first["kind"], second["name"]) == ("ConfigMap", "a")
    assert built == ["built"], "built once, for the first line"


def test_json_is_compact_and_starts_with_level_and_time() -> None:
    stream = setup(level="debug")
    structlog.get_logger().debug("starting manager")
    line = stream.getvalue()
    assert line.startswith('{"level":"debug","timestamp":')
    assert '"msg":"starting manager"' in line


@pytest.mark.parametrize(
    ("level", "shown"),
    [
        ("debug", ["debug", "info", "warning", "error"]),
        ("info", ["info", "warning", "error"]),
        ("WARNING", ["warning", "error"]),
        ("error", ["error"]),
    ],
)
def test_level_filtering(level: str, shown: list[str]) -> None:
    stream = setup(level=level)
    log = structlog.get_logger()
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert [line["level"] for line in lines(stream)] == shown


def test_stdlib_records_share_the_format_and_noisy_loggers_are_quiet() -> None:
    stream = setup(level="debug")
    with structlog.contextvars.bound_contextvars(kind="Deployment", namespace="n", name="d"):
        logging.getLogger("aiohttp.server").warning("bad request from %s", "1.2.3.4")
    logging.getLogger("aiohttp.access").info("GET /healthz 200")
    logging.getLogger("kubernetes_asyncio.client.rest").debug("response body: secret")
    (line,) = lines(stream)
    assert line["logger"] == "aiohttp.server"
    assert line["msg"] == "bad request from 1.2.3.4"
    assert line["level"] == "warning"
    assert line["kind"] == "Deployment"


def test_exceptions_are_structured_without_local_variables() -> None:
    stream = setup()
    secret = "token-value"
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        structlog.get_logger().exception("failed")
    (line,) = lines(stream)
    assert line["exception"][0]["exc_type"] == "RuntimeError"
    assert secret not in stream.getvalue()


def test_auto_picks_console_on_a_tty_and_json_otherwise() -> None:
    assert configure_logging("auto", "info", stream=io.StringIO()) == "json"
    tty = _Tty()
    assert configure_logging("auto", "info", stream=tty, cache_logger_on_first_use=False) == (
        "console"
    )
    structlog.get_logger().info("hello", kind="ConfigMap")
    output = tty.getvalue()
    assert "hello" in output
    assert "kind" in output
    assert not output.startswith("{")


def test_reconfiguring_replaces_the_stdlib_handler() -> None:
    setup()
    setup()
    ours = [h for h in logging.getLogger().handlers if type(h).__name__ == "_OurHandler"]
    assert len(ours) == 1


@pytest.mark.parametrize(("fmt", "level"), [("xml", "info"), ("json", "trace")])
def test_unknown_format_or_level_is_rejected(fmt: str, level: str) -> None:
    with pytest.raises(ValueError, match="unknown log"):
        configure_logging(fmt, level, stream=io.StringIO())


def test_console_lines_lead_with_the_object_then_the_message_then_the_rest() -> None:
    stream = setup(fmt="console")
    log = structlog.get_logger("lifecycle_controller.controller.reconcile.reconciler")
    with structlog.contextvars.bound_contextvars(kind="ConfigMap", namespace="ns", name="a"):
        log.info("decided", action="delete", detail="deleting now")
    log.info("outside", answer=42)
    inside, outside = stream.getvalue().splitlines()
    after_level = inside.split("[info     ] ", 1)[1]
    assert after_level.startswith("kind=ConfigMap namespace=ns name=a decided ")
    assert after_level.split("decided", 1)[1].split() == [
        "action=delete",
        "detail='deleting",
        "now'",
    ]
    assert outside.split("[info     ] ", 1)[1].split() == ["outside", "answer=42"]


@pytest.mark.parametrize("level", ["debug", "info"])
async def test_a_waiting_decision_is_logged_at_debug_only_and_a_dry_run_at_info(level: str) -> None:
    stream = setup(level=level)
    accounting = Accounting(_NoEvents(), Ledger(), lambda: 0, NoActionMetrics())
    ref = ObjectRef(ObjectKey(CONFIGMAPS, "team", "cm"), "uid-1", "1")
    wait = Wait(action=Action.DELETE, due_ns=100 * 10**9, requeue_after_ns=10**9)
    await accounting.decided(ref, wait, wait)
    dry_run = DryRun(action=Action.DELETE, due_ns=100 * 10**9, operation=Operation.DELETE)
    await accounting.decided(ref, dry_run, dry_run)
    logged = [(line["level"], line["decision"]) for line in lines(stream)]
    waits = [("debug", "Wait")] if level == "debug" else []
    assert logged == [*waits, ("info", "DryRun")]
    if level == "debug":
        assert lines(stream)[0]["due"] == "1970-01-01T00:01:40Z"
