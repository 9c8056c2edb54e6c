"""The only package that talks to the Kubernetes API (and the only user of kubernetes-asyncio).

It returns plain dicts and raises the small error tree of :mod:`.errors`.
"""

from lifecycle_controller.kube.client import (
    ACCEPT_AGGREGATED_DISCOVERY,
    ACCEPT_METADATA,
    ACCEPT_METADATA_LIST,
    MERGE_PATCH,
    ClusterConfig,
    ConnectionConfigError,
    KubeClient,
    Timeouts,
    load_configuration,
)
from lifecycle_controller.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    Unprocessable,
)
from lifecycle_controller.kube.exchanges import EventFilter, is_added_event
from lifecycle_controller.kube.resources import CRDS, EVENTS, LEASES, NAMESPACES, ResourceType
from lifecycle_controller.kube.watch_lines import RestingFilter

__all__ = [
    "ACCEPT_AGGREGATED_DISCOVERY",
    "ACCEPT_METADATA",
    "ACCEPT_METADATA_LIST",
    "CRDS",
    "EVENTS",
    "LEASES",
    "MERGE_PATCH",
    "NAMESPACES",
    "AlreadyExists",
    "ApiError",
    "ClusterConfig",
    "Conflict",
    "ConnectionConfigError",
    "EventFilter",
    "Forbidden",
    "Gone",
    "KubeClient",
    "KubeError",
    "NotFound",
    "ResourceType",
    "RestingFilter",
    "ServerError",
    "Timeouts",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "Unprocessable",
    "is_added_event",
    "load_configuration",
]
