"""An in-memory Kubernetes API server for fast, cluster-free tests of the side-effecting half.

:class:`FakeApiServer` speaks the REST API the controller uses, and the project's real
:class:`~lifecycle_controller.kube.KubeClient` talks to it, so the tests cover the API door
too: in process by default (:class:`InProcessTransport`, the seam below ``KubeClient``: each
request handed to the fake's handler, no socket), or over loopback HTTP when started with
``over_http=True`` (for the tests of the HTTP layer itself). It is a *tiny API server*, not
a mock that answers what it is told: objects, one global resourceVersion, preconditions (409),
absent objects (404), compacted history (410), pagination and watches behave as the real one
does, and faults (any status for the next N matching requests, ``Retry-After``, hung
requests) are armed explicitly. Every request is recorded for assertions.

Why not ``kmock`` (the aiohttp Kubernetes mock by kopf's author)? We looked at 0.8 first. Its
emulator stores objects but gives them no resourceVersion (lists answer ``"..."``), ignores
``metadata.resourceVersion`` in patches and DELETE preconditions, has no pagination, and
its watches replay every object whatever resourceVersion they start from, with no 410 for
compacted history and no bookmarks. Those are exactly the behaviours the controller's
correctness rests on (guarded writes, conflict retries, relists), so a fake that got them
wrong would let the tests pass against bugs. This one is small and keeps them.

The real control plane (``tests/integration``) stays the proof of every scenario; this fake is
for speed, for faults that are hard to provoke on a real server, and for the fake clock.

Typical use::

    clock = FakeClock()
    async with FakeApiServer(now_ns=clock.now_ns) as api:
        api.store.create(CONFIGMAPS, "default", {"metadata": {"name": "x"}})
        api.fail(409, method="PATCH", times=1)
        async with api.client() as kube:
            ...
"""

from lifecycle_controller.kube.resources import CONFIGMAPS, DEPLOYMENTS
from tests.doubles.fakeapi.discovery import (
    DAEMONSETS,
    DEFAULT_RESOURCES,
    PODS,
    SECRETS,
    STATEFULSETS,
    Catalogue,
    ServedResource,
    resource_of,
)
from tests.doubles.fakeapi.faults import Fault, RecordedRequest
from tests.doubles.fakeapi.inprocess import InProcessTransport
from tests.doubles.fakeapi.server import IN_PROCESS_URL, TOKEN, FakeApiServer
from tests.doubles.fakeapi.store import ApiStatus, Store, merge_patch

__all__ = [
    "CONFIGMAPS",
    "DAEMONSETS",
    "DEFAULT_RESOURCES",
    "DEPLOYMENTS",
    "IN_PROCESS_URL",
    "PODS",
    "SECRETS",
    "STATEFULSETS",
    "TOKEN",
    "ApiStatus",
    "Catalogue",
    "FakeApiServer",
    "Fault",
    "InProcessTransport",
    "RecordedRequest",
    "ServedResource",
    "Store",
    "merge_patch",
    "resource_of",
]
