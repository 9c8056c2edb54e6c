"""Logging setup: one structured line per event, JSON in containers, readable on a terminal.

Every module logs through ``structlog.get_logger(__name__)`` with keyword fields; the worker
loop binds ``kind``/``namespace``/``name`` (and friends) into structlog's context variables
around each reconcile, so every line written while handling an object carries them.
:func:`configure_logging` is called once by the CLI, before anything logs.

Decisions (docs/behaviour.md#configuration-logging-and-exit-codes, and
docs/architecture.md#structured-logging for the library):

* **Everything goes to stderr**, in both formats. That is where controller-runtime's zap logger
  writes too, and it keeps stdout clean for the output of the user tools (``plan``,
  ``status``), which may be piped.
* **JSON** is compact (``{"level":"info","msg":...}``, no spaces), names the message ``msg``
  and the level ``level`` like zap does, so log queries written for the reference keep
  working; times are ISO 8601 UTC under ``timestamp``; exceptions are structured
  (``exception`` is a list of frames, not a text blob).
* **console** is structlog's ``ConsoleRenderer`` (colours only when the stream is a TTY), with
  ``kind``/``namespace``/``name`` moved before the message so the object leads each line.
* **auto** picks console when the stream is a TTY, JSON otherwise.
* Our own logs take structlog's native path (a filtering bound logger writing straight to the
  stream: filtered-out calls cost next to nothing). Third-party libraries that use stdlib
  ``logging`` (aiohttp, asyncio, kubernetes_asyncio) are routed through a
  ``ProcessorFormatter`` so their lines have the same format and the same bound context.
* ``aiohttp.access`` is silenced (probes and scrapes would flood the log), and
  ``kubernetes_asyncio.client.rest`` never logs below INFO: at DEBUG it logs request and
  response bodies, which can hold tokens and Secret data.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog
from structlog.types import EventDict, Processor

from lifecycle_controller.machinery.log_context import merge_item_fields

__all__ = ["LEVELS", "LogFormat", "configure_logging", "resolve_format"]

LogFormat = Literal["json", "console", "auto"]

LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_QUIET_LOGGERS: dict[str, int] = {
    "aiohttp.access": logging.WARNING,
    "kubernetes_asyncio.client.rest": logging.INFO,
}


#: Exceptions as data, WITHOUT local variables (they may hold tokens or Secret data).
_STRUCTURED_TRACEBACKS = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)
_LEADING_KEYS = ("level", "timestamp", "logger", "msg")


def _leading_keys_first(_logger: object, _method: str, event: EventDict) -> EventDict:
    """Put level, time, logger and message first, as zap does; the fields follow."""
    head = {key: event.pop(key) for key in _LEADING_KEYS if key in event}
    head.update(event)
    return head


class _OurHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler installed by :func:`configure_logging` (replaced on reconfigure)."""


def resolve_format(log_format: str, stream: TextIO) -> Literal["json", "console"]:
    """Turn ``auto`` into ``console`` on a TTY and ``json`` otherwise; check the name."""
    if log_format == "auto":
        isatty = getattr(stream, "isatty", None)
        return "console" if callable(isatty) and isatty() else "json"
    if log_format in ("json", "console"):
        return "json" if log_format == "json" else "console"
    raise ValueError(f"unknown log format {log_format!r}; expected json, console or auto")


def _level_number(level: str) -> int:
    try:
        return LEVELS[level.lower()]
    except KeyError:
        names = ", ".join(LEVELS)
        raise ValueError(f"unknown log level {level!r}; expected one of {names}") from None


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        merge_item_fields,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]


def _renderers(fmt: Literal["json", "console"], stream: TextIO) -> list[Processor]:
    if fmt == "json":
        return [
            _STRUCTURED_TRACEBACKS,
            structlog.processors.EventRenamer("msg"),
            _leading_keys_first,
            structlog.processors.JSONRenderer(separators=(",", ":"), default=str),
        ]
    isatty = getattr(stream, "isatty", None)
    return [_console_renderer(colors=callable(isatty) and bool(isatty()))]


#: The object a line is about, shown right after the level on the console.
_OBJECT_KEYS = ("kind", "namespace", "name")


def _console_renderer(*, colors: bool) -> structlog.dev.ConsoleRenderer:
    """structlog's console renderer with kind, namespace and name before the message.

    Its own layout is time, level, message, then the fields sorted by name, which buries the
    object among them; here it is time, level, ``kind= namespace= name=``, message, the rest.
    """
    renderer = structlog.dev.ConsoleRenderer(colors=colors)
    columns = renderer.columns
    default = next(column for column in columns if column.key == "")
    at = next(i for i, column in enumerate(columns) if column.key == "level") + 1
    columns[at:at] = [structlog.dev.Column(key, default.formatter) for key in _OBJECT_KEYS]
    renderer.columns = columns
    return renderer


def _route_stdlib(
    fmt: Literal["json", "console"], level: int, stream: TextIO, shared: list[Processor]
) -> None:
    """Send stdlib ``logging`` records through the same processors, to the same stream."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *_renderers(fmt, stream),
        ],
    )
    handler = _OurHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OurHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name, floor in _QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(max(level, floor))


def configure_logging(
    log_format: str = "auto",
    level: str = "info",
    *,
    stream: TextIO | None = None,
    cache_logger_on_first_use: bool = True,
) -> Literal["json", "console"]:
    """Configure structlog and stdlib logging; return the format actually used.

    ``log_format`` is ``json``, ``console`` or ``auto``; ``level`` is ``debug``, ``info``,
    ``warning`` or ``error`` (case-insensitive). ``stream`` defaults to ``sys.stderr``.
    Raises ValueError for an unknown format or level. Safe to call again (tests do):
    the previous root handler installed here is replaced. Tests pass
    ``cache_logger_on_first_use=False`` so module-level loggers pick up each new setup.
    """
    out = stream if stream is not None else sys.stderr
    fmt = resolve_format(log_format, out)
    number = _level_number(level)
    shared = _shared_processors()
    structlog.configure(
        processors=[*shared, *_renderers(fmt, out)],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        context_class=dict,
        cache_logger_on_first_use=cache_logger_on_first_use,
    )
    _route_stdlib(fmt, number, out, shared)
    return fmt
