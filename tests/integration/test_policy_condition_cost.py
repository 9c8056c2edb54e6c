"""What a condition may cost, in time, on the real control plane (docs/policies.md#condition-cost).

The CEL library compiles a ``matches()`` pattern again on every call, and the cost estimate
did not count it: the issue's 1,022-character condition, compiling ``\\w{200}`` 493 times per
object, was accepted at an estimated 6,903 steps and then held the event loop for tens of
seconds per evaluation: ``/healthz`` stopped answering (a kubelet restarts such a Pod, which
loops) and every other object waited. Now the estimate counts the compilation per call, so the
policy is ``Invalid`` when it is read; it holds the object it names and nothing else, and the
controller keeps answering and deleting on time meanwhile.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from lifecycle_controller.core.objects import keys
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_tools import invalid_message, namespaced_policy
from tests.integration.scenario_support import create, read, start_for, wait_gone
from tests.integration.support import CONFIGMAPS, configmap, eventually

#: The issue's condition: ``[0,0,...,0].exists(x, 'a'.matches('\\w{200}'))``, 1,022 characters.
REGEX_BOMB = "[" + ",".join(["0"] * 493) + "].exists(x, 'a'.matches('\\\\w{200}'))"
#: How long /healthz may take to answer, at most.
HEALTHZ_WITHIN = 1.0


@contextmanager
def probing(running: RunningController) -> Iterator[list[tuple[float, str]]]:
    """Ask /healthz every 100 ms from a thread of its own (the controller runs on the test's
    event loop: a stalled loop could not notice its own stall); yields the answers so far,
    as (seconds taken, status or error)."""
    probes = running.controller.probes
    assert probes is not None
    url = f"http://127.0.0.1:{probes.port}/healthz"
    answers: list[tuple[float, str]] = []
    stop = threading.Event()

    def ask() -> None:
        while not stop.wait(0.1):
            started = time.monotonic()
            try:
                with urllib.request.urlopen(url, timeout=HEALTHZ_WITHIN * 5) as response:
                    outcome = str(response.status)
            except OSError as error:
                outcome = repr(error)
            answers.append((time.monotonic() - started, outcome))

    thread = threading.Thread(target=ask, name="healthz-probe", daemon=True)
    thread.start()
    try:
        yield answers
    finally:
        stop.set()
        thread.join(timeout=HEALTHZ_WITHIN * 10)


async def test_a_regex_heavy_condition_neither_stalls_the_controller_nor_delays_others(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    policy = namespaced_policy(
        "regex-bomb",
        namespace,
        resources=["configmaps"],
        names=["target"],
        condition=REGEX_BOMB,
        lifecycle={"delete-after": "1s"},
    )
    await create(kube, POLICIES, namespace, policy)
    running = await start_for(start_controller, namespace)
    with probing(running) as answers:
        await create(kube, CONFIGMAPS, namespace, configmap("target"))
        await create(
            kube, CONFIGMAPS, namespace, configmap("unrelated", **{keys.DELETE_AFTER: "3s"})
        )
        # Due 3 s after its creation: on time is within a few seconds of that.
        await wait_gone(kube, CONFIGMAPS, namespace, "unrelated", within=15)
        message = await invalid_message(kube, POLICIES, namespace, "regex-bomb")

        async def probed() -> bool:
            return len(answers) >= 5

        await eventually(probed, within=10, what="/healthz asked a few times")
    assert message.startswith("spec.condition: has an estimated cost of "), message
    assert "matches() compiles its pattern again on every call" in message
    slow = [(took, outcome) for took, outcome in answers if took > HEALTHZ_WITHIN]
    assert not slow, f"/healthz answered late: {slow}"
    assert {outcome for _, outcome in answers} == {"200"}, answers
    assert await read(kube, CONFIGMAPS, namespace, "target") is not None  # held, not deleted
