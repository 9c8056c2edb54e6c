"""Well-known built-in resource types, defined once (Namespaces, Leases, Events, CRDs, …).

:class:`~lifecycle_controller.core.objects.resources.ResourceType` is defined in the core.
"""

from __future__ import annotations

from lifecycle_controller.core.objects.resources import ResourceType

__all__ = [
    "CLUSTER_POLICIES",
    "CONFIGMAPS",
    "CRDS",
    "DEPLOYMENTS",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "PODS",
    "POLICIES",
    "POLICY_GROUP",
    "POLICY_VERSION",
    "REPLICASETS",
    "ResourceType",
]

NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
EVENTS = ResourceType("events.k8s.io", "v1", "events", "Event", namespaced=True)
CRDS = ResourceType(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
REPLICASETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
PODS = ResourceType("", "v1", "pods", "Pod", namespaced=True)

#: The lifecycle policies' API (docs/policies.md): one cluster-scoped and one namespaced kind.
POLICY_GROUP = "lifecycle.cezary.dev"
POLICY_VERSION = "v1alpha1"
CLUSTER_POLICIES = ResourceType(
    POLICY_GROUP,
    POLICY_VERSION,
    "clusterlifecyclepolicies",
    "ClusterLifecyclePolicy",
    namespaced=False,
)
POLICIES = ResourceType(
    POLICY_GROUP, POLICY_VERSION, "lifecyclepolicies", "LifecyclePolicy", namespaced=True
)
