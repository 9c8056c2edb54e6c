"""The demo's Pods as they come and go: which Pods each restart replaced, and by which.

``lifecycle-controller demo`` runs fake nodes (kube-scheduler and kwok), so a restart does
what it does on a real cluster: the Deployment controller replaces every Pod with one that
carries the new Pod template's ``lifecycle.cezary.dev/restartedAt`` marker. The demo lists
its Pods once a second and hands each listing to :class:`DemoPods`, which remembers every
Pod it saw, says once per restart when all of that restart's Pods serve and the older ones
are gone, and sums it all up per Deployment at the end. Pure: no API call, no clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lifecycle_controller.core.objects.keys import RESTARTED_AT

__all__ = ["DemoPods", "PodSighting"]


@dataclass(frozen=True, slots=True)
class PodSighting:
    """One Pod as last listed: its Deployment (the ``demo`` label), template marker, state."""

    name: str
    deployment: str
    marker: str | None
    serving: bool

    @classmethod
    def of(cls, pod: Mapping[str, Any], *, label: str) -> PodSighting | None:
        """The sighting of a listed Pod; None for a Pod without the ``label``."""
        metadata = pod.get("metadata") or {}
        deployment = (metadata.get("labels") or {}).get(label)
        if not deployment:
            return None
        status = pod.get("status") or {}
        ready = any(
            condition.get("type") == "Ready" and condition.get("status") == "True"
            for condition in status.get("conditions") or []
        )
        serving = ready and status.get("phase") == "Running"
        return cls(
            name=str(metadata.get("name") or ""),
            deployment=str(deployment),
            marker=(metadata.get("annotations") or {}).get(RESTARTED_AT),
            serving=serving and not metadata.get("deletionTimestamp"),
        )


def _clock(marker: str | None) -> str:
    """``HH:MM:SS`` of an RFC 3339 marker (the demo's narration speaks in UTC times)."""
    return (marker or "")[11:19] or "?"


class DemoPods:
    """Every Pod of the demo's Deployments seen so far, grouped by template marker."""

    def __init__(self, label: str = "demo") -> None:
        self._label = label
        #: deployment -> markers in the order first seen, after None (the template before any
        #: restart, whose Pods may not have been seen)
        self._markers: dict[str, list[str | None]] = {}
        #: (deployment, marker) -> Pod names, in the order first seen
        self._pods: dict[tuple[str, str | None], list[str]] = {}
        self._live: dict[str, PodSighting] = {}
        self._announced: set[tuple[str, str]] = set()

    def observe(self, pods: Iterable[Mapping[str, Any]]) -> list[str]:
        """Take one listing of the namespace's Pods; return a line for each restart whose Pods
        have all been replaced since the last listing."""
        sightings = [
            sighting
            for pod in pods
            if (sighting := PodSighting.of(pod, label=self._label)) is not None
        ]
        self._live = {sighting.name: sighting for sighting in sightings}
        for sighting in sightings:
            markers = self._markers.setdefault(sighting.deployment, [None])
            if sighting.marker not in markers:
                markers.append(sighting.marker)
            names = self._pods.setdefault((sighting.deployment, sighting.marker), [])
            if sighting.name not in names:
                names.append(sighting.name)
        lines = []
        for deployment, markers in self._markers.items():
            for previous, marker in itertools.pairwise(markers):
                if marker is None or (deployment, marker) in self._announced:
                    continue
                if self._replaced(deployment, marker):
                    self._announced.add((deployment, marker))
                    lines.append(self._replacement(deployment, previous, marker))
        return lines

    def _replaced(self, deployment: str, marker: str) -> bool:
        """Every live Pod of the Deployment carries ``marker`` and serves."""
        live = [pod for pod in self._live.values() if pod.deployment == deployment]
        return bool(live) and all(pod.marker == marker and pod.serving for pod in live)

    def _replacement(self, deployment: str, previous: str | None, marker: str) -> str:
        old = ", ".join(self._pods.get((deployment, previous), [])) or "none seen"
        new = ", ".join(self._pods[(deployment, marker)])
        return (
            f"Deployment {deployment}: restart of {_clock(marker)} replaced Pods {old} with {new}"
        )

    def summary(self, deployment: str) -> list[str]:
        """What happened to the Deployment's Pods: one line per restart, or why none."""
        markers = self._markers.get(deployment, [None])
        restarts = [marker for marker in markers if marker is not None]
        if not restarts:
            pods = ", ".join(self._pods.get((deployment, None), [])) or "none seen"
            return [f"Deployment {deployment}: not restarted (Pods: {pods})"]
        lines = [f"Deployment {deployment}: {len(restarts)} restart(s)"]
        for previous, marker in itertools.pairwise(markers):
            if marker is None:
                continue
            old = ", ".join(self._pods.get((deployment, previous), [])) or "none seen"
            new = ", ".join(self._pods[(deployment, marker)])
            state = "done" if (deployment, marker) in self._announced else "still rolling out"
            lines.append(f"  {_clock(marker)}: Pods {old} replaced by {new} ({state})")
        return lines
