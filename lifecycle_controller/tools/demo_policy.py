"""The demo's policy act: a LifecyclePolicy previewed in dry run, then switched on.

Policies are half of what the controller does, so the demo shows one besides its annotated
samples: ``tmp-configmaps``, a LifecyclePolicy deleting the ConfigMaps named ``tmp-*`` in the
demo namespace 10 s after they were created, applied with ``dry-run: "true"``. The
controller announces each deletion it would make with a ``DryRunDelete`` Event naming the
policy (the demo's narrator prints them) and counts what the policy matches in its status;
once every dry run was announced, the demo removes ``dry-run`` and the controller deletes
them, the ``Deleted`` Events naming the policy too.

The policy kinds need the chart's CRDs, which the demo installs on its own control plane
(:mod:`lifecycle_controller.devcluster.policy_crds`, from the package's copies of them); were
they missing from an install, the act would be skipped and the demo would say so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from lifecycle_controller.core.decision.events import DRY_RUN_DELETE
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CONFIGMAPS, POLICIES

__all__ = ["POLICY", "TEMPORARY", "PolicyAct"]

POLICY = "tmp-configmaps"
#: The unannotated ConfigMaps the policy matches.
TEMPORARY = ("tmp-build-cache", "tmp-test-report")
DELAY = "10s"

_Echo = Callable[[str], None]


def policy_manifest(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": POLICIES.api_version,
        "kind": POLICIES.kind,
        "metadata": {"name": POLICY, "namespace": namespace},
        "spec": {
            "resources": ["configmaps"],
            "names": ["tmp-*"],
            "lifecycle": {"delete-after": DELAY, "dry-run": "true"},
        },
    }


class PolicyAct:
    """The act in ``namespace``; :meth:`saw` is handed every Event the narrator prints."""

    def __init__(self, namespace: str, echo: _Echo) -> None:
        self.namespace = namespace
        self._echo = echo
        self._announced: set[str] = set()
        self._all_announced = asyncio.Event()

    async def apply(self, kube: KubeClient) -> None:
        """The policy, in dry run, and the ConfigMaps it matches."""
        await kube.create(POLICIES, self.namespace, policy_manifest(self.namespace))
        self._echo(
            f"applied LifecyclePolicy {self.namespace}/{POLICY}  (ConfigMaps named tmp-*: "
            f"delete-after={DELAY}, dry-run=true)"
        )
        for name in TEMPORARY:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
            await kube.create(CONFIGMAPS, self.namespace, body)
            self._echo(
                f"applied ConfigMap {self.namespace}/{name}  (no annotations: the policy decides)"
            )

    def saw(self, event: Mapping[str, Any]) -> None:
        """One of the controller's Events: a dry run of a temporary ConfigMap is noted."""
        name = (event.get("regarding") or {}).get("name")
        if event.get("reason") == DRY_RUN_DELETE and name in TEMPORARY:
            self._announced.add(name)
            if len(self._announced) == len(TEMPORARY):
                self._all_announced.set()

    async def switch_on(self, kube: KubeClient) -> None:
        """Once every temporary ConfigMap's dry run was announced, tell what the policy's
        status says and remove ``dry-run`` from the policy."""
        await self._all_announced.wait()
        status = (await kube.get(POLICIES, self.namespace, POLICY)).get("status") or {}
        if "matched" in status:
            self._echo(f"LifecyclePolicy {POLICY} reports matched={status['matched']} (dry run)")
        self._echo(f"switching LifecyclePolicy {POLICY} on: dry-run removed")
        switch = {"spec": {"lifecycle": {"dry-run": None}}}
        await kube.merge_patch(POLICIES, self.namespace, POLICY, switch)

    async def summary(self, kube: KubeClient) -> list[str]:
        """Each temporary ConfigMap, deleted or still there."""
        lines = []
        for name in TEMPORARY:
            try:
                await kube.get(CONFIGMAPS, self.namespace, name)
                lines.append(f"ConfigMap {name}: still there")
            except NotFound:
                lines.append(f"ConfigMap {name}: deleted by LifecyclePolicy {POLICY}")
        return lines
