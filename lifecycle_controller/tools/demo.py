"""``lifecycle-controller demo``: the controller at work on a local control plane.

Starts etcd, kube-apiserver and kube-controller-manager on loopback, with kube-scheduler, kwok
and three fake Nodes (``--nodes``) so that Pods run (building them all on first use), applies a
few annotated sample objects, and runs the real controller on them, so a deletion and
restarts visibly happen within a minute: each restart replaces the Deployment's Pods, and the
demo names the Pods replaced (tools/demo_pods.py). It installs the chart's policy CRDs and
applies a LifecyclePolicy in dry run, then switches it on (tools/demo_policy.py), so the
policy's announced deletions and then its real ones show too. It narrates what happens and
keeps running for ``--duration`` seconds (default: until Ctrl-C), printing how to point
kubectl at the cluster to experiment further. With ``--console`` it also serves the web
console (tools/console/) on the demo's namespace and opens a browser on it, so the timeline
fills and empties as the samples' actions come and go.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import signal
from collections.abc import Callable
from typing import Any

from lifecycle_controller.app import Controller
from lifecycle_controller.config import RawFlags, Settings, build_settings
from lifecycle_controller.core.objects.keys import PREFIX
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import CRD_DIR, install_policy_crds
from lifecycle_controller.kube import EVENTS, KubeClient, NotFound, ResourceType
from lifecycle_controller.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, PODS
from lifecycle_controller.machinery.logs import configure_logging
from lifecycle_controller.tools.demo_pods import DemoPods
from lifecycle_controller.tools.demo_policy import POLICY, PolicyAct

NAMESPACE = "lifecycle-demo"
DEFAULT_NODES = 3
"""Fake Nodes the demo starts by default (``--nodes``); 0 leaves Pods Pending."""
REPLICAS = 2
"""Replicas of each sample Deployment."""

Echo = Callable[[str], None]


def _rfc3339(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sample_objects(now: datetime.datetime) -> list[tuple[ResourceType, dict[str, Any]]]:
    """The demo's objects: a short-lived ConfigMap and two Deployments to restart."""
    labels = {"app": "web"}
    template = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
    }

    def deployment(name: str, annotations: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": {**labels, "demo": name}},
                "template": {
                    **template,
                    "metadata": {"labels": {**labels, "demo": name}},
                },
            },
        }

    return [
        (
            CONFIGMAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "preview-env-config",
                    "annotations": {PREFIX + "delete-after": "20s"},
                },
                "data": {"purpose": "deleted by the controller 20 s after it is applied"},
            },
        ),
        (
            DEPLOYMENTS,
            deployment(
                "web",
                {PREFIX + "restart-at": _rfc3339(now + datetime.timedelta(seconds=15))},
            ),
        ),
        (
            DEPLOYMENTS,
            deployment(
                "worker",
                {
                    PREFIX + "restart-cron": "* * * * *",
                    PREFIX + "cron-timezone": "Europe/Warsaw",
                },
            ),
        ),
    ]


async def _apply_samples(kube: KubeClient, echo: Echo) -> None:
    await kube.create(
        NAMESPACES,
        None,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    for resource, body in sample_objects(datetime.datetime.now(datetime.UTC)):
        await kube.create(resource, NAMESPACE, body)
        annotations = ", ".join(f"{k}={v}" for k, v in body["metadata"]["annotations"].items())
        echo(f"applied {body['kind']} {NAMESPACE}/{body['metadata']['name']}  ({annotations})")


async def _narrate(
    kube: KubeClient, pods: DemoPods, echo: Echo, act: PolicyAct | None = None
) -> None:
    """Print each Event the controller records in the demo namespace, as it appears (and hand
    it to the policy act), and each restart's Pods once they have all been replaced."""
    seen: set[str] = set()
    while True:
        listing = await kube.request("GET", PODS.collection_path(NAMESPACE))
        for line in pods.observe(listing["items"]):
            echo(f"[{_rfc3339(datetime.datetime.now(datetime.UTC))[11:19]}] {line}")
        listing = await kube.request("GET", EVENTS.collection_path(NAMESPACE))
        for event in sorted(listing["items"], key=lambda e: e.get("eventTime") or ""):
            uid = event["metadata"]["uid"]
            if uid in seen or event.get("reportingController") != "lifecycle-controller":
                continue
            seen.add(uid)
            if act is not None:
                act.saw(event)
            regarding = event.get("regarding", {})
            echo(
                f"[{event.get('eventTime', '')[11:19]}] {regarding.get('kind')} "
                f"{regarding.get('name')}: {event['reason']}: {event.get('note', '')}"
            )
        await asyncio.sleep(1)


async def _summary(kube: KubeClient, pods: DemoPods, echo: Echo, act: PolicyAct | None) -> None:
    try:
        await kube.get(CONFIGMAPS, NAMESPACE, "preview-env-config")
        echo("ConfigMap preview-env-config: still there")
    except NotFound:
        echo("ConfigMap preview-env-config: deleted")
    if act is not None:
        for line in await act.summary(kube):
            echo(line)
    pods.observe((await kube.request("GET", PODS.collection_path(NAMESPACE)))["items"])
    for name in ("web", "worker"):
        for line in pods.summary(name):
            echo(line)


#: The kubectl command the demo suggests for watching Pods being replaced.
KUBECTL_PODS = (
    f"kubectl -n {NAMESPACE} get pods -o 'custom-columns=POD:.metadata.name,"
    "DEPLOYMENT:.metadata.labels.demo,"
    "RESTARTED-AT:.metadata.annotations.lifecycle\\.cezary\\.dev/restartedAt,"
    "READY:.status.containerStatuses[0].ready,NODE:.spec.nodeName'"
)


async def _open_console(
    stack: contextlib.AsyncExitStack,
    kube: KubeClient,
    settings: Settings,
    echo: Echo,
    browser: bool,
) -> None:
    """The web console on the demo's namespace, judged with the demo controller's flags."""
    from lifecycle_controller.tools.console.command import open_console, show
    from lifecycle_controller.tools.options import controller_view

    served = await stack.enter_async_context(
        open_console(
            kube,
            namespace=NAMESPACE,
            controller=controller_view(settings),
            address="127.0.0.1:0",
            title=f"demo, namespace {NAMESPACE}",
        )
    )
    show(served.url, browser=browser, echo=echo)


async def _run(
    plane: ControlPlane,
    *,
    duration: float | None,
    echo: Echo,
    policies: bool,
    console: bool = False,
    browser: bool = True,
) -> None:
    pods = DemoPods()
    settings = build_settings(
        RawFlags(
            kubeconfig=str(plane.admin_kubeconfig),
            watch_resource=("configmaps", "deployments.apps"),
            watch_namespace=(NAMESPACE,),
            health_probe_bind_address="127.0.0.1:0",
            log_format="console",
            log_level="warning",
        )
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with await KubeClient.connect(str(plane.admin_kubeconfig)) as kube:
        controller = Controller(settings, kube)
        running = asyncio.create_task(controller.run())
        act = PolicyAct(NAMESPACE, echo) if policies else None
        narrator = asyncio.create_task(_narrate(kube, pods, echo, act))
        switch: asyncio.Task[None] | None = None
        stack = contextlib.AsyncExitStack()
        try:
            if console:
                await _open_console(stack, kube, settings, echo, browser)
            await _apply_samples(kube, echo)
            if act is not None:
                await act.apply(kube)
                switch = asyncio.create_task(act.switch_on(kube))
            echo("")
            echo("The controller is running. Expect within a minute:")
            echo("  - the ConfigMap deleted 20 s after it was applied,")
            echo("  - Deployment web restarted at its restart-at time (15 s after start),")
            echo("  - Deployment worker restarted at the start of every minute (cron),")
            if policies:
                echo(
                    f"  - LifecyclePolicy {POLICY}, in dry run: a DryRunDelete for each tmp-* "
                    "ConfigMap 10 s after it was applied; then the demo switches the policy "
                    "on and they are deleted,"
                )
            if plane.nodes.count:
                echo(f"  - each restart replacing the Deployment's {REPLICAS} Pods, one by one.")
            else:
                echo("  - no Pod replaced: without fake nodes (--nodes 0) Pods stay Pending.")
            echo(f"Try it yourself: export KUBECONFIG={plane.admin_kubeconfig}")
            echo(f"  kubectl -n {NAMESPACE} get deploy,rs,cm,events")
            echo(f"  {KUBECTL_PODS}")
            echo("Ctrl-C stops the demo." if duration is None else f"Stopping in {duration:g}s.")
            echo("")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=duration)
            if running.done():
                running.result()
            echo("")
            await _summary(kube, pods, echo, act)
        finally:
            await stack.aclose()
            tasks = [task for task in (switch, narrator, running) if task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def run_demo(
    *,
    duration: float | None,
    echo: Echo,
    nodes: int = DEFAULT_NODES,
    console: bool = False,
    browser: bool = True,
) -> None:
    """Start the local control plane (with ``nodes`` fake Nodes), the samples and the
    controller; narrate; clean up. ``console``: serve the web console too (``browser``:
    and open it)."""
    configure_logging("console", "warning")
    with ControlPlane(log=echo, nodes=nodes) as plane:
        policies = install_policy_crds(plane)
        if not policies:
            echo(f"(the chart's policy CRDs are not in {CRD_DIR}: the policy part is skipped)")
        asyncio.run(
            _run(
                plane,
                duration=duration,
                echo=echo,
                policies=policies,
                console=console,
                browser=browser,
            )
        )
    echo("control plane stopped")
