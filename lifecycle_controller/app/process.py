"""The process around one :class:`Controller`: connection, signals, grace period, exit codes.

Shutdown (SIGTERM/SIGINT, or ``--run-for``): the workers stop taking keys and the reconciles
in flight finish (their writes, and the Events still pending) for at most
:data:`SHUTDOWN_GRACE_SECONDS`; then the leader's work is cancelled, the Lease is released
and the servers close (docs/reliability.md#shutdown). A second signal skips the wait.
Losing the Lease stops the work at once and exits non-zero, as controller-runtime does. A
probe or metrics address that cannot be listened on exits 1 with one log line naming its flag.
"""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from lifecycle_controller.app.controller import Controller, controller_metrics
from lifecycle_controller.config import Settings
from lifecycle_controller.controller.leadership.elector import LeadershipLost
from lifecycle_controller.controller.watch.discovery import DiscoveryFatal
from lifecycle_controller.kube import ConnectionConfigError, KubeClient
from lifecycle_controller.machinery.logs import configure_logging
from lifecycle_controller.serving.metrics import Metrics
from lifecycle_controller.serving.server import ListenError

_log = structlog.get_logger(__name__)
EXIT_OK = 0
EXIT_FAILURE = 1
#: How long a SIGTERM waits for reconciles in flight (inside Kubernetes' default 30 s).
SHUTDOWN_GRACE_SECONDS = 10.0


@asynccontextmanager
async def _connected(settings: Settings, metrics: Metrics) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.connect(
        settings.kubeconfig, observe=metrics.observe_request, in_cluster_first=True
    )
    try:
        yield kube
    finally:
        await kube.close()


async def run_async(settings: Settings, *, grace: float = SHUTDOWN_GRACE_SECONDS) -> int:
    """Run until a signal, ``--run-for`` or a fatal error; return the process exit code.

    A first SIGTERM/SIGINT drains (at most ``grace`` s), then cancels; a second cancels."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    stopping = False
    running: Controller | None = None
    draining: asyncio.Task[None] | None = None

    async def drain_then_cancel(controller: Controller) -> None:
        try:
            async with asyncio.timeout(grace):
                await controller.drain()
        except TimeoutError:
            _log.warning("reconciles still in flight at the end of the grace period", grace=grace)
        main.cancel()

    def stop() -> None:
        nonlocal stopping, draining
        if stopping:
            if draining is not None and not draining.done():
                _log.info("second signal: not waiting for reconciles in flight")
                draining.cancel()
                main.cancel()
            return
        stopping = True
        _log.info("shutting down")
        if running is None:
            main.cancel()
        else:
            draining = loop.create_task(drain_then_cancel(running), name="shutdown")

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    if settings.run_for is not None:
        loop.call_later(settings.run_for, stop)
    metrics = controller_metrics(settings)
    try:
        async with _connected(settings, metrics) as kube:
            running = Controller(settings, kube, metrics=metrics)
            await running.run()
    except asyncio.CancelledError:
        if stopping:
            _log.info("stopped")
            return EXIT_OK
        raise
    except (DiscoveryFatal, ConnectionConfigError, ListenError) as error:
        _log.error("controller cannot run", error=str(error))
        return EXIT_FAILURE
    except LeadershipLost as error:
        _log.error("leader election lost", error=str(error))
        return EXIT_FAILURE
    return EXIT_OK


def run_controller(settings: Settings) -> int:
    """Entry of ``lifecycle-controller run``: logging, then the event loop."""
    configure_logging(settings.log_format, settings.log_level)
    # Everything imported so far lives as long as the process: moved out of the collector's
    # reach, it is no longer scanned by every full collection (one took 30-45 ms during the
    # initial lists, all of it spent on the modules; docs/reliability.md#event-loop).
    gc.freeze()
    gc.enable()  # the CLI turns it off while the controller's modules load
    try:
        return asyncio.run(run_async(settings))
    except KeyboardInterrupt:
        return EXIT_OK
