"""The lifecycle policy CRDs on the test control plane, for the tests that need policies.

One place installs them: the ``policy_crds`` fixture (tests/integration/conftest.py) calls
:func:`install_policy_crds`. Once installed they stay for the session, so every controller
of a later test sees policies on (an empty set, unless a test creates some).
"""

from __future__ import annotations

from typing import Any

from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CRDS, POLICIES
from tests.integration.support import eventually

__all__ = ["install_policy_crds"]


def _crd(plural: str, kind: str, scope: str) -> dict[str, Any]:
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.lifecycle.cezary.dev"},
        "spec": {
            "group": "lifecycle.cezary.dev",
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": open_object, "status": open_object},
                        }
                    },
                }
            ],
        },
    }


async def install_policy_crds(kube: KubeClient) -> None:
    """Both policy CRDs (minimal schemas), established."""
    for plural, kind, scope in (
        ("clusterlifecyclepolicies", "ClusterLifecyclePolicy", "Cluster"),
        ("lifecyclepolicies", "LifecyclePolicy", "Namespaced"),
    ):
        name = f"{plural}.lifecycle.cezary.dev"
        try:
            await kube.get(CRDS, None, name)
        except NotFound:
            await kube.create(CRDS, None, _crd(plural, kind, scope))

        async def established(name: str = name) -> bool:
            crd = await kube.get(CRDS, None, name)
            conditions = (crd.get("status") or {}).get("conditions") or []
            return any(
                c.get("type") == "Established" and c.get("status") == "True" for c in conditions
            )

        await eventually(established, within=30, what=f"{name} established")

    async def served() -> bool:
        try:
            await kube.list_objects(POLICIES, limit=1)
        except NotFound:
            return False
        return True

    await eventually(served, within=30, what="lifecycle policies served")
