"""Scenario 9: security (issue 8, docs/reliability.md#secret-data).

1. Secret data never reaches the process. The audit log (``Metadata`` level) does not record
   the ``Accept`` header, so the controller runs through the loopback recording proxy
   (:mod:`tests.faults.proxy`): every request it makes for Secrets and ConfigMaps asks for
   ``PartialObjectMetadata`` (or ``PartialObjectMetadataList``), and the bytes that came back
   for Secrets are far fewer than the Secrets' data (20 Secrets of 4 KiB each; the same list
   in full, read by the test, is the control). The audit log shows the verbs: list, watch
   and the due delete (exactly one, with one ``Deleted`` Event), never a ``get`` of a Secret.
   A policy whose condition reads a Secret's data (or any field of it beyond metadata) is
   ``Invalid``, and the requests for Secrets stay metadata-only.
2. The chart's default RBAC grants nothing on Secrets (they are not in the default watch
   list); RBAC has no metadata-only verb, so watching Secrets necessarily grants reading
   their data (documented in docs/operator-guide.md and docs/reliability.md).
3. The container: the image runs as a numeric non-root user; the rendered chart sets
   ``runAsNonRoot``, a read-only root filesystem, no privilege escalation, every capability
   dropped and the RuntimeDefault seccomp profile.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from pathlib import Path
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES, ResourceType
from tests.chart.conftest import helm
from tests.chart.support import Helm, manager_container, of_kind, rules
from tests.faults.proxy import FaultProxy
from tests.faults.quiet import queue_idle, wait_quiet
from tests.faults.support import (
    CONTROLLER_USER,
    controller_kubeconfig,
    event_reasons,
    requests_of,
    writes,
)
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AT
from tests.integration.policy_crds import install_policy_crds
from tests.integration.policy_tools import namespaced_policy
from tests.integration.scenario_support import start_for
from tests.integration.support import eventually
from tests.integration.timestamps import PAST

__all__ = ["helm"]

SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
SECRET_COUNT = 20
SECRET_BYTES = 4096
ROOT = Path(__file__).resolve().parents[2]


def secret(name: str, **annotations: str) -> dict[str, Any]:
    data = base64.b64encode(bytes(range(256)) * (SECRET_BYTES // 256)).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "annotations": annotations},
        "data": {"payload": data},
    }


async def test_requests_for_secrets_are_metadata_only(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    tmp_path: Path,
) -> None:
    for i in range(SECRET_COUNT):
        annotations = {DELETE_AT: PAST} if i == 0 else {}
        await kube.create(SECRETS, namespace, secret(f"s-{i:02d}", **annotations))
    upstream = Path(controller_kubeconfig(control_plane))
    async with FaultProxy(upstream) as proxy:
        running = await start_for(
            start_controller,
            namespace,
            "configmaps",
            "secrets",
            kubeconfig=proxy.kubeconfig(tmp_path / "proxied.kubeconfig"),
        )

        async def deleted() -> bool:
            names = {
                item["metadata"]["name"]
                for item in (await kube.list_metadata(SECRETS, namespace=namespace))["items"]
            }
            return "s-00" not in names

        await eventually(deleted, within=30, what="the due Secret deleted")
        await wait_quiet(control_plane, queue_idle(running))  # a doubled delete or Event
        await running.stop()  # before the proxy goes away
        records = list(proxy.records)
        # A streaming list is one long watch, recorded only when it ends: count its bytes live.
        streamed = dict(proxy.bytes_streamed)
    full = await kube.request("GET", SECRETS.collection_path(namespace))
    assert len(full["items"]) >= SECRET_COUNT - 1
    watched = [r for r in records if re.search(r"/(secrets|configmaps)(\?|$|/)", r.path)]
    reads = [r for r in watched if r.method == "GET"]
    arrived = [a for a in proxy.arrived if re.search(r"/(secrets|configmaps)(\?|$|/)", a[1])]
    watches = [a for a in arrived if a[0] == "GET" and "watch=" in a[1]]
    assert watches, arrived
    for method, path, accept in arrived:
        if method == "GET":
            assert "as=PartialObjectMetadata" in accept, (path, accept)
            assert "g=meta.k8s.io" in accept, (path, accept)
    secret_bytes = sum(size for path, size in streamed.items() if "/secrets" in path)
    data_bytes = (SECRET_COUNT - 1) * SECRET_BYTES
    assert 0 < secret_bytes < data_bytes / 4, (secret_bytes, data_bytes)
    verbs = {
        str(event.get("verb"))
        for event in requests_of(control_plane, CONTROLLER_USER)
        if (event.get("objectRef") or {}).get("resource") == "secrets"
        and (event.get("objectRef") or {}).get("namespace") == namespace
    }
    assert verbs <= {"list", "watch", "delete"}, verbs
    # Every delete of a Secret, whatever its answer: exactly one, for the due one.
    deletes = writes(control_plane, verb="delete", resource="secrets", namespace=namespace)
    assert deletes == {"s-00": [200]}
    assert (await event_reasons(kube, namespace)).get("Deleted") == Counter({"s-00": 1})
    print(
        f"[faults] 9 secret reads: {len(reads)} completed requests, {len(watches)} watches, "
        f"{secret_bytes} bytes back for "
        f"{SECRET_COUNT} Secrets holding {SECRET_COUNT * SECRET_BYTES} bytes of data; "
        f"verbs {verbs}; "
        f"Accept {sorted({a[2] for a in arrived if a[0] == 'GET'})}"
    )


async def test_a_policy_reading_secret_data_is_invalid_and_no_secret_data_is_listed(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    tmp_path: Path,
) -> None:
    """Policies over Secrets whose conditions read their data or type are ``Invalid``
    (docs/policies.md#what-a-condition-reads): every request for Secrets still asks for
    metadata only, and no Secret is deleted."""
    install_policy_crds(control_plane)
    for i in range(SECRET_COUNT):
        await kube.create(SECRETS, namespace, secret(f"s-{i:02d}"))
    conditions = {"by-data": "has(object.data.payload)", "by-type": 'object.type == "Opaque"'}
    for name, condition in conditions.items():
        body = namespaced_policy(
            name, namespace, resources=["secrets"], condition=condition,
            lifecycle={"delete-after": "1s"},
        )  # fmt: skip
        await kube.create(POLICIES, namespace, body)
    upstream = Path(controller_kubeconfig(control_plane))
    async with FaultProxy(upstream) as proxy:
        running = await start_for(
            start_controller,
            namespace,
            "secrets",
            kubeconfig=proxy.kubeconfig(tmp_path / "proxied.kubeconfig"),
        )

        async def invalid() -> bool:
            for name in conditions:
                status = (await kube.get(POLICIES, namespace, name)).get("status") or {}
                found = [c for c in status.get("conditions") or [] if c["type"] == "Invalid"]
                if not found or found[0]["status"] != "True":
                    return False
            return True

        await eventually(invalid, within=30, what="both policies reported Invalid")
        await running.stop()  # before the proxy goes away
        streamed = dict(proxy.bytes_streamed)
    arrived = [a for a in proxy.arrived if re.search(r"/secrets(\?|$|/)", a[1])]
    assert [a for a in arrived if a[0] == "GET" and "watch=" in a[1]], arrived
    for method, path, accept in arrived:
        if method == "GET":
            assert "as=PartialObjectMetadata" in accept, (path, accept)
    secret_bytes = sum(size for path, size in streamed.items() if "/secrets" in path)
    assert 0 < secret_bytes < SECRET_COUNT * SECRET_BYTES / 4, secret_bytes
    assert writes(control_plane, verb="delete", resource="secrets", namespace=namespace) == {}


def test_chart_default_rbac_grants_nothing_on_secrets(helm: Helm) -> None:
    docs = helm.render()
    roles = of_kind(docs, "ClusterRole") + of_kind(docs, "Role")
    assert roles
    for role in roles:
        for rule in rules(role):
            resources = set(rule.get("resources") or [])
            assert "secrets" not in resources, role["metadata"]["name"]
            assert "*" not in resources, role["metadata"]["name"]


def test_container_runs_non_root_read_only_without_capabilities(helm: Helm) -> None:
    docs = helm.render()
    [deployment] = of_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = manager_container(docs)
    context = container["securityContext"]
    pod_context = pod.get("securityContext") or {}
    assert pod_context.get("runAsNonRoot") is True or context.get("runAsNonRoot") is True
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert not context["capabilities"].get("add")
    assert context.get("privileged", False) is False
    seccomp = context.get("seccompProfile") or pod_context.get("seccompProfile") or {}
    assert seccomp.get("type") == "RuntimeDefault"
    # The image: a numeric, non-root USER (runAsNonRoot can only verify a numeric one).
    users = re.findall(r"^USER\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert users, "the Dockerfile sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), users
    assert int(uid) != 0, users
