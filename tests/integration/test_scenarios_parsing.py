"""Scenarios AS-1 … AS-9 (docs/acceptance-scenarios.md): value grammars through the real controller.

Invalid durations, timestamps, cron expressions, zones, dry-run and catch-up values reach the
user only as Warning Events, so each scenario applies objects to the real API server, waits
for the exact Event the contract names, and then checks that nothing was written and nothing
requeued. Valid values are checked by what the controller writes (or when it acts). The
change to AS-6 (repeated warnings once per object and value,
docs/behaviour.md#repeated-warnings) is tested here.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from tests.integration.controller import RunningController, StartController
from tests.integration.events import list_events, wait_event
from tests.integration.keys import (
    CATCH_UP,
    CRON_TIMEZONE,
    DELETE_AFTER,
    DELETE_AT,
    DRY_RUN,
    MANAGED_BY,
    RESTART_AFTER,
    RESTART_AT,
    RESTART_CRON,
    RESTART_EVERY,
    RESTARTED_AT,
)
from tests.integration.scenario_support import (
    annotations_of,
    create,
    lifecycle_annotations,
    next_action,
    patch,
    read,
    requeues,
    start_for,
    wait_for,
    wait_gone,
    written_by_controller,
)
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, deployment, eventually
from tests.integration.timestamps import FAR, PAST, deadline_in, epoch, stamp

LAYOUT = '"2006-01-02T15:04:05Z07:00"'


async def expect_only_warning(
    kube: KubeClient, namespace: str, name: str, reason: str, message: str
) -> None:
    """Wait for the Warning, then require it to be the only Event about the object."""
    events = await wait_event(kube, namespace, name, reason)
    assert events == [("Warning", reason, message)], name


async def assert_untouched(
    running: RunningController,
    namespace: str,
    expected: dict[str, tuple[Any, dict[str, str], str]],
) -> None:
    """Each object still has exactly its annotations and was never written by the controller.

    ``expected`` maps a name to (resource, annotations, resourceVersion or "" when other
    writers, such as kube-controller-manager for Deployments, may bump it).
    """
    for name, (resource, wanted, version) in expected.items():
        obj = await read(running.kube, resource, namespace, name)
        lifecycle = lifecycle_annotations(obj)
        assert lifecycle == wanted, name
        assert not written_by_controller(obj), name
        if version:
            assert obj is not None
            assert obj["metadata"]["resourceVersion"] == version, name


# --------------------------------------------------------------------------- AS-1, AS-2


INVALID_DURATIONS = {
    "0": 'invalid duration format: "0"',
    "0s": "duration must be positive",
    "0d": "duration must be positive",
    "-1h": "duration must be positive and unsigned",
    "+1h": "duration must be positive and unsigned",
    "1d2h": 'invalid duration format: "1d2h"',
    "1.5h": 'invalid duration format: "1.5h"',
    "500ms": 'invalid duration format: "500ms"',
    "1w": 'invalid duration format: "1w"',
    " 1d": 'invalid duration format: " 1d"',
    "106752d": "number of days is too large: 106752d",
    "9223372037s": 'time: invalid duration "9223372037s"',
    "2562048h": 'time: invalid duration "2562048h"',
}


async def test_as_01_invalid_durations_warn_and_do_nothing(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, "configmaps", "deployments.apps")
    kube = running.kube
    expected: dict[str, tuple[Any, dict[str, str], str]] = {}
    warnings: dict[str, tuple[str, str]] = {}
    for index, (value, error) in enumerate(INVALID_DURATIONS.items()):
        name = f"after-{index}"
        created = await create(
            kube, CONFIGMAPS, namespace, configmap(name, **{DELETE_AFTER: value})
        )
        expected[name] = (CONFIGMAPS, {DELETE_AFTER: value}, created["metadata"]["resourceVersion"])
        warnings[name] = (
            "InvalidAnnotation",
            f"Invalid format for delete-after annotation: {error}",
        )
    every = "Invalid duration for restart-every: "
    workloads = {
        "restart-after": (
            {RESTART_AFTER: "1d2h"},
            'Invalid format for restart-after annotation: invalid duration format: "1d2h"',
        ),
        "every-59s": ({RESTART_EVERY: "59s"}, every + "duration must be at least 1m0s"),
        "every-0s": ({RESTART_EVERY: "0s"}, every + "duration must be positive"),
        "every-1h30m": ({RESTART_EVERY: "1h30m"}, every + 'invalid duration format: "1h30m"'),
    }
    for name, (values, message) in workloads.items():
        await create(kube, DEPLOYMENTS, namespace, deployment(name, values))
        expected[name] = (DEPLOYMENTS, values, "")
        warnings[name] = ("InvalidAnnotation", message)

    for name, (reason, message) in warnings.items():
        await expect_only_warning(kube, namespace, name, reason, message)
    await assert_untouched(running, namespace, expected)
    assert requeues(running) == 0


async def test_as_02_valid_durations_convert_to_whole_seconds(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    durations = {"1d": 86_400, "25h": 90_000, "5m": 300, "106751d": 106_751 * 86_400}
    durations["9223372036s"] = 9_223_372_036
    before = int(time.time())
    for index, value in enumerate(durations):
        await create(kube, CONFIGMAPS, namespace, configmap(f"d-{index}", **{DELETE_AFTER: value}))
    written: dict[str, str] = {}
    for index, value in enumerate(durations):
        obj = await wait_for(
            kube,
            CONFIGMAPS,
            namespace,
            f"d-{index}",
            lambda o: DELETE_AT in annotations_of(o),
            what=f"delete-at for {value}",
        )
        written[value] = annotations_of(obj)[DELETE_AT]  # epoch() checks the exact format
    after = int(time.time())
    for value, seconds in durations.items():
        assert before + seconds <= epoch(written[value]) <= after + seconds, value
    assert written["106751d"].startswith(stamp(before + durations["106751d"])[:4])


# --------------------------------------------------------------------------- AS-3


async def test_as_03_timestamps_are_strict_rfc3339(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, "configmaps", "deployments.apps")
    kube = running.kube
    invalid = {
        "2026-10-10T03:00:00": 'cannot parse "" as "Z07:00"',
        "2026-10-10 03:00:00Z": 'cannot parse " 03:00:00Z" as "T"',
        "2026-10-10T03:00:00+0000": 'cannot parse "+0000" as "Z07:00"',
        "2026-10-10": 'cannot parse "" as "T"',
        "garbage": 'cannot parse "garbage" as "2006"',
    }
    expected: dict[str, tuple[Any, dict[str, str], str]] = {}
    for index, (value, tail) in enumerate(invalid.items()):
        name = f"bad-{index}"
        created = await create(kube, CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: value}))
        expected[name] = (CONFIGMAPS, {DELETE_AT: value}, created["metadata"]["resourceVersion"])
        await expect_only_warning(
            kube,
            namespace,
            name,
            "InvalidAnnotation",
            f'Invalid format for delete-at annotation: parsing time "{value}" as {LAYOUT}: {tail}',
        )
    await create(kube, DEPLOYMENTS, namespace, deployment("web", {RESTART_AT: "2026-10-10"}))
    expected["web"] = (DEPLOYMENTS, {RESTART_AT: "2026-10-10"}, "")
    await expect_only_warning(
        kube,
        namespace,
        "web",
        "InvalidAnnotation",
        'Invalid format for restart-at annotation: parsing time "2026-10-10" as '
        f'{LAYOUT}: cannot parse "" as "T"',
    )
    await assert_untouched(running, namespace, expected)

    # Valid offsets and fractions are absolute instants.
    now = int(time.time())
    # The wall clock reads 90 minutes ahead at +02:00: the instant is 30 minutes ago.
    east = time.strftime("%Y-%m-%dT%H:%M:%S+02:00", time.gmtime(now + 90 * 60))
    # The wall clock reads 30 minutes ago at -02:00: the instant is 90 minutes ahead.
    west = time.strftime("%Y-%m-%dT%H:%M:%S-02:00", time.gmtime(now - 30 * 60))
    fraction = stamp(now + 3600).replace("Z", ".75Z")
    for name, value in (("east", east), ("west", west), ("fraction", fraction)):
        await create(kube, CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: value}))
    await wait_gone(kube, CONFIGMAPS, namespace, "east")
    assert await wait_event(kube, namespace, "east", "Deleted") == [
        ("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {east}")
    ]

    async def earliest_is_fraction() -> bool:
        return next_action(running, "delete", "ConfigMap", namespace) == now + 3600.75

    await eventually(earliest_is_fraction, within=5, what="the wait for the fractional deadline")
    await kube.delete(CONFIGMAPS, namespace, "fraction")

    async def then_west() -> bool:
        return next_action(running, "delete", "ConfigMap", namespace) == now + 90 * 60

    await eventually(then_west, within=5, what="the wait for the -02:00 deadline")
    assert annotations_of(await read(kube, CONFIGMAPS, namespace, "west")) == {DELETE_AT: west}


# --------------------------------------------------------------------------- AS-4, AS-5


async def test_as_04_invalid_cron_writes_no_anchor(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, "deployments.apps")
    kube = running.kube
    expressions = {
        "0 0 * * * *": "expected exactly 5 fields, found 6: [0 0 * * * *]",
        "@daily": "parser does not accept descriptors: @daily",
        "@every 1s": "parser does not accept descriptors: @every 1s",
        "60 * * * *": "end of range (60) above maximum (59): 60",
        "0 0 31 2 *": "cron expression has no future occurrence",
    }
    expected: dict[str, tuple[Any, dict[str, str], str]] = {}
    for index, expression in enumerate(expressions):
        await create(
            kube, DEPLOYMENTS, namespace, deployment(f"cron-{index}", {RESTART_CRON: expression})
        )
        expected[f"cron-{index}"] = (DEPLOYMENTS, {RESTART_CRON: expression}, "")
    for index, error in enumerate(expressions.values()):
        await expect_only_warning(
            kube,
            namespace,
            f"cron-{index}",
            "InvalidAnnotation",
            f"Invalid cron expression for restart-cron: {error}",
        )
    await assert_untouched(running, namespace, expected)
    assert requeues(running) == 0


async def test_as_05_invalid_timezone(start_controller: StartController, namespace: str) -> None:
    running = await start_for(start_controller, namespace, "deployments.apps")
    kube = running.kube
    annotations = {RESTART_CRON: "0 3 * * *", CRON_TIMEZONE: "Invalid/Timezone"}
    await create(kube, DEPLOYMENTS, namespace, deployment("web", annotations))
    await expect_only_warning(
        kube,
        namespace,
        "web",
        "InvalidTimezone",
        "Invalid timezone 'Invalid/Timezone' for restart-cron, taking no action.",
    )
    await assert_untouched(running, namespace, {"web": (DEPLOYMENTS, annotations, "")})
    assert requeues(running) == 0


# ------------------------------------------------------------------- AS-6, repeated warnings

IGNORED = (
    "Warning",
    "IgnoredAnnotation",
    "Ignoring lifecycle.cezary.dev/cron-timezone because lifecycle.cezary.dev/restart-cron "
    "is not set.",
)


async def test_as_06_stray_cron_timezone_warns_once_and_the_delete_proceeds(
    start_controller: StartController, namespace: str
) -> None:
    # docs/behaviour.md#repeated-warnings changes AS-6: the warning is sent once per object
    # and value, not on every reconcile (here: the conversion pass and the delete pass).
    running = await start_for(start_controller, namespace)
    kube = running.kube
    await create(
        kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AFTER: "1s", CRON_TIMEZONE: "UTC"})
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "cm")
    events = await wait_event(kube, namespace, "cm", "Deleted")
    assert events[0] == IGNORED
    assert [reason for _, reason, _ in events] == ["IgnoredAnnotation", "Deleted"]
    assert all(e.get("series") is None for e in await list_events(kube, namespace, "cm"))


async def test_spec_2_9_ignored_annotation_once_per_object_and_value(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    await create(
        kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: FAR, CRON_TIMEZONE: "UTC"})
    )
    await expect_only_warning(kube, namespace, "cm", IGNORED[1], IGNORED[2])

    async def reconcile_with(annotations: dict[str, str], deadline: str) -> None:
        await patch(
            kube,
            CONFIGMAPS,
            namespace,
            "cm",
            {"metadata": {"annotations": {**annotations, DELETE_AT: deadline}}},
        )

        async def waiting_for_it() -> bool:
            return next_action(running, "delete", "ConfigMap", namespace) == epoch(deadline)

        await eventually(waiting_for_it, within=5, what=f"a reconcile of delete-at {deadline}")

    # More reconciles with the same value: still the one Event, no repeat counted.
    await reconcile_with({}, "2998-01-01T00:00:00Z")
    await reconcile_with({}, "2997-01-01T00:00:00Z")
    (event,) = await list_events(kube, namespace, "cm")
    assert event.get("series") is None
    # A new value warns again (the same text, so the Event's series counts it).
    await reconcile_with({CRON_TIMEZONE: "Europe/Warsaw"}, "2996-01-01T00:00:00Z")

    async def warned_again() -> bool:
        (event,) = await list_events(kube, namespace, "cm")
        return (event.get("series") or {}).get("count") == 2

    await eventually(warned_again, within=5, what="the warning about the new value")
    await reconcile_with({}, "2995-01-01T00:00:00Z")
    (event,) = await list_events(kube, namespace, "cm")
    assert event["series"]["count"] == 2
    assert (event["type"], event["reason"], event["note"]) == IGNORED


# --------------------------------------------------------------------------- AS-7

TRUE_SPELLINGS = ("1", "t", "T", "TRUE", "true", "True")
FALSE_SPELLINGS = ("0", "f", "F", "FALSE", "false", "False")
INVALID_BOOLEANS = ("", "yes", "TRUE ", "on")


async def test_as_07_dry_run_spellings(start_controller: StartController, namespace: str) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    expected: dict[str, tuple[Any, dict[str, str], str]] = {}
    for group, values in (("on", TRUE_SPELLINGS), ("off", FALSE_SPELLINGS)):
        for index, value in enumerate(values):
            body = configmap(f"{group}-{index}", **{DELETE_AT: PAST, DRY_RUN: value})
            await create(kube, CONFIGMAPS, namespace, body)
    for index, value in enumerate(INVALID_BOOLEANS):
        annotations = {DELETE_AT: PAST, DRY_RUN: value}
        created = await create(
            kube, CONFIGMAPS, namespace, configmap(f"bad-{index}", **annotations)
        )
        expected[f"bad-{index}"] = (CONFIGMAPS, annotations, created["metadata"]["resourceVersion"])

    for index in range(len(FALSE_SPELLINGS)):
        await wait_gone(kube, CONFIGMAPS, namespace, f"off-{index}")
    for index in range(len(TRUE_SPELLINGS)):
        events = await wait_event(kube, namespace, f"on-{index}", "DryRunDelete")
        assert events == [("Normal", "DryRunDelete", "Dry-run: Resource would be deleted now.")]
        assert await read(kube, CONFIGMAPS, namespace, f"on-{index}") is not None
    for index, value in enumerate(INVALID_BOOLEANS):
        await expect_only_warning(
            kube,
            namespace,
            f"bad-{index}",
            "InvalidAnnotationValue",
            f'invalid value "{value}" for lifecycle.cezary.dev/dry-run: expected a boolean; '
            "taking no action",
        )
    await assert_untouched(running, namespace, expected)
    assert requeues(running) == 0


async def test_as_07_invalid_dry_run_clears_the_never_arm(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, delete_catch_up="never")
    kube = running.kube
    ledger = running.controller.ledger
    deadline = stamp(deadline_in(4))
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: deadline}))

    async def armed() -> bool:
        return len(ledger) == 1

    await eventually(armed, within=5, what="the never arm for the future delete-at")
    await patch(
        kube, CONFIGMAPS, namespace, "cm", {"metadata": {"annotations": {DRY_RUN: "maybe"}}}
    )
    await wait_event(kube, namespace, "cm", "InvalidAnnotationValue")
    assert len(ledger) == 0
    # The race this test is about: the arm was cleared while the occurrence was still ahead.
    assert time.time() < epoch(deadline), "the invalid value came after the deadline"
    # Fixed after the deadline: the occurrence was not observed by an arm, so it is skipped.
    await asyncio.sleep(max(0.0, epoch(deadline) - time.time()) + 0.1)
    await patch(kube, CONFIGMAPS, namespace, "cm", {"metadata": {"annotations": {DRY_RUN: None}}})
    events = await wait_event(kube, namespace, "cm", "ActionSkipped")
    assert events[-1] == (
        "Normal",
        "ActionSkipped",
        f"Skipped delete scheduled at {deadline} under the catch-up policy.",
    )
    obj = await read(kube, CONFIGMAPS, namespace, "cm")
    assert DELETE_AT not in annotations_of(obj)
    assert annotations_of(obj)[MANAGED_BY] == "lifecycle-controller"


# --------------------------------------------------------------------------- AS-8, AS-9


async def test_as_08_invalid_catch_up_blocks_every_action(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, "configmaps", "deployments.apps")
    kube = running.kube
    details = {
        "": 'invalid duration format: ""',
        "Always": 'invalid duration format: "Always"',
        "0s": "duration must be positive",
        "1h30m": 'invalid duration format: "1h30m"',
        "-5m": "duration must be positive and unsigned",
    }
    expected: dict[str, tuple[Any, dict[str, str], str]] = {}
    messages: dict[str, str] = {}
    for index, (value, detail) in enumerate(details.items()):
        annotations = {DELETE_AFTER: "1s", CATCH_UP: value}
        created = await create(kube, CONFIGMAPS, namespace, configmap(f"cm-{index}", **annotations))
        expected[f"cm-{index}"] = (CONFIGMAPS, annotations, created["metadata"]["resourceVersion"])
        messages[f"cm-{index}"] = (
            f'invalid catch-up policy "{value}": expected always, never, or a positive '
            f"duration: {detail} for lifecycle.cezary.dev/catch-up; taking no action"
        )
    bad = messages["cm-1"]  # the "Always" text
    others: dict[str, tuple[Any, dict[str, str]]] = {
        "past-delete": (CONFIGMAPS, {DELETE_AT: PAST, CATCH_UP: "Always"}),
        # Checked before the kind: InvalidAnnotation, not UnsupportedRestartKind.
        "restart-cm": (CONFIGMAPS, {RESTART_AT: PAST, CATCH_UP: "Always"}),
        "recurring": (DEPLOYMENTS, {RESTART_EVERY: "1m", CATCH_UP: "Always"}),
        "due-restart": (DEPLOYMENTS, {RESTART_AT: PAST, CATCH_UP: "Always"}),
    }
    for name, (resource, annotations) in others.items():
        if resource is CONFIGMAPS:
            created = await create(kube, CONFIGMAPS, namespace, configmap(name, **annotations))
            version = created["metadata"]["resourceVersion"]
        else:
            await create(kube, DEPLOYMENTS, namespace, deployment(name, annotations))
            version = ""
        expected[name] = (resource, annotations, version)
        messages[name] = bad
    for name, message in messages.items():
        await expect_only_warning(kube, namespace, name, "InvalidAnnotation", message)
    await assert_untouched(running, namespace, expected)
    for name in ("recurring", "due-restart"):
        obj = await read(kube, DEPLOYMENTS, namespace, name)
        assert obj is not None
        assert RESTARTED_AT not in (obj["spec"]["template"]["metadata"].get("annotations") or {})
    assert requeues(running) == 0


async def test_as_09_invalid_catch_up_flags_exit_non_zero(control_plane: ControlPlane) -> None:
    kubeconfig = str(control_plane.admin_kubeconfig)
    cases = [
        (["--delete-catch-up=bogus"], {}, '--delete-catch-up: invalid catch-up policy "bogus"'),
        (["--restart-catch-up=0s"], {}, '--restart-catch-up: invalid catch-up policy "0s"'),
        ([], {"LIFECYCLE_RESTART_CATCH_UP": "Always"}, 'invalid catch-up policy "Always"'),
    ]
    for flags, env, message in cases:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "lifecycle_controller",
            "run",
            f"--kubeconfig={kubeconfig}",
            "--health-probe-bind-address=0",
            *flags,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**_environment(), **env},
        )
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
        assert process.returncode == 1, (flags, env, stderr)
        lines = stderr.decode().strip().splitlines()
        assert len(lines) == 1, lines
        assert message in lines[0], lines


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LIFECYCLE_")}
