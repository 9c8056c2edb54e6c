"""What a change of the policies ends in the decisions' state: a deleted policy's limit
window, a removed (or invalid) policy's pending actions, logged with how many objects it was
deciding. Which objects are decided again is the requeue rules' (tests/unit/test_requeue.py)."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.policy.decisions import PolicyDecisions, Tally
from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.kube import KubeClient
from tests.core.test_policy_set import CONFIGMAPS, manifest, parsed
from tests.doubles.fakeclock import FakeClock

SPEC = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
INVALID = {"resources": ["configmaps"], "lifecycle": {"delete-after": "soon"}}
P = manifest("p", SPEC, namespace="a")
P_INVALID = manifest("p", INVALID, namespace="a", generation=2)
Q = manifest("q", SPEC)


def _decisions(kube: KubeClient, clock: FakeClock) -> PolicyDecisions:
    store = PolicyStore(kube, clock=clock)
    cache = MetadataCache(policy_views=store)
    return PolicyDecisions(store, cache, ObjectWriter(kube, cache, clock))


@pytest.mark.parametrize(
    ("old", "new", "cancelled", "dropped"),
    [
        # Deleted: its pending actions are cancelled, its window goes.
        ((P, Q), (Q,), ["LifecyclePolicy/a/p"], ["LifecyclePolicy/a/p"]),
        # Made invalid: cancelled, but the window stays (the object is still there).
        ((P,), (P_INVALID,), ["LifecyclePolicy/a/p"], []),
        # An invalid one deleted: nothing was pending, its window goes.
        ((P_INVALID,), (), [], ["LifecyclePolicy/a/p"]),
        # Added, or unchanged: nothing ends.
        ((Q,), (P, Q), [], []),
    ],
)
def test_a_policy_change_ends_what_belonged_to_the_policies_gone(
    kube: KubeClient,
    clock: FakeClock,
    old: tuple[dict[str, object], ...],
    new: tuple[dict[str, object], ...],
    cancelled: list[str],
    dropped: list[str],
) -> None:
    decisions = _decisions(kube, clock)
    before: PolicySet = parsed(*old)
    refs = [p.ref for p in before.valid] + [p.ref for p in before.invalid]
    for ref in refs:
        decisions.limits.pending[ref] = []  # an audit entry list stands for the window
    deciding = {p.ref for p in before.valid}
    for number in range(2):
        key = ObjectKey(CONFIGMAPS, "a", f"cm{number}")
        decisions.tallies[key] = Tally(decided_by=tuple(sorted(deciding, key=str)), overlapped=())
    with capture_logs() as logs:
        decisions.policies_changed(before, parsed(*new))
    lines = [line for line in logs if "pending actions are cancelled" in line["event"]]
    assert [(line["policy"], line["objects"]) for line in lines] == [
        (name, 2) for name in cancelled
    ]
    kept = {str(ref) for ref in decisions.limits.pending}
    assert kept == {str(ref) for ref in refs} - set(dropped)
