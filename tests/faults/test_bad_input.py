"""Bad input on the real API server (issue 8, fix (a) and part of scenario 6).

A Warning's note is cut at 1,024 bytes on a character boundary
(:func:`lifecycle_controller.controller.events.recorder.truncate_note`): a long multi-byte invalid
value used to make the Event invalid, and the object got no Warning at all.
"""

from __future__ import annotations

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS
from tests.faults.support import controller_kubeconfig
from tests.integration.controller import StartController
from tests.integration.events import list_events
from tests.integration.keys import DELETE_AFTER
from tests.integration.scenario_support import start_for
from tests.integration.support import configmap, eventually


async def test_a_long_multibyte_invalid_value_still_gets_its_warning(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, start_controller: StartController
) -> None:
    await start_for(start_controller, namespace, kubeconfig=controller_kubeconfig(control_plane))
    value = "é€😀" * 1500  # 13,500 bytes of 2-, 3- and 4-byte characters
    await kube.create(CONFIGMAPS, namespace, configmap("bad", **{DELETE_AFTER: value}))

    async def warned() -> bool:
        events = await list_events(kube, namespace, "bad")
        return any(event["type"] == "Warning" for event in events)

    await eventually(warned, within=20, what="the Warning about the invalid value")
    [warning] = [e for e in await list_events(kube, namespace, "bad") if e["type"] == "Warning"]
    note = str(warning["note"])
    assert len(note.encode("utf-8")) <= 1024
    assert note.endswith("...")
    assert "é€😀" in note  # cut on a character boundary: the text is still valid UTF-8
