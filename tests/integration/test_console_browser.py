"""The console in a real browser (headless chromium) against the real API server.

``lifecycle-controller console`` runs as a user runs it (a process of its own, the admin's
kubeconfig, one namespace); the page is read the way a person reads it, by what it draws:
the marks of the timeline, the rows of the last actions and of the policies. Every wait is
on a condition of the page (Selenium's ``WebDriverWait``) or of the cluster, never a fixed
sleep. The browser is Debian's chromium (``tox -e browser`` installs it): these tests do not
skip without it, they fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from benchmarks.browser import console_process, headless, missing
from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AFTER, DELETE_AT
from tests.integration.policy_tools import (
    create_configmap,
    labelled,
    namespaced_policy,
    tool_json,
)
from tests.integration.scenario_support import create
from tests.integration.support import CONFIGMAPS, configmap, eventually

pytestmark = pytest.mark.integration

#: Seconds a page condition may take: a look every 0.5 s, then a fetch and a draw.
PAGE = 30.0


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    assert not missing(), f"{missing()} not installed: run `tox -e browser` (docs/development.md)"
    driver = headless()
    try:
        yield driver
    finally:
        driver.quit()


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def until(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    """Wait on the page (in a thread: the controller under test shares this event loop); an
    element the page redrew while it was read is read again at the next poll."""
    wait = WebDriverWait(
        driver, PAGE, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )
    return await asyncio.to_thread(wait.until, condition, what)


async def click(
    driver: WebDriver,
    find: Callable[[WebDriver], WebElement | None],
    read: Callable[[WebElement], str | None],
    what: str,
) -> str | None:
    """Find an element, read it and click it in one look at the page, and return what was
    read: a redraw between the find and the click (a new version of the data, or the span
    just changed) fails the click as stale, and the next poll finds the new element."""

    def look(d: WebDriver) -> tuple[str | None] | None:
        element = find(d)
        if element is None:
            return None
        seen = read(element)
        element.click()
        return (seen,)

    seen: tuple[str | None] = await until(driver, look, what)
    return seen[0]


def marks(driver: WebDriver, category: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, f'#chart .mark[data-category="{category}"]')


def mark_at(driver: WebDriver, category: str, due: str) -> WebElement | None:
    """The mark of ``category`` whose bucket holds the instant ``due``."""
    due_ms = parse_rfc3339(due) // 1_000_000
    for mark in marks(driver, category):
        start, end = (
            int(mark.get_attribute("data-start-ms") or 0),
            int(mark.get_attribute("data-end-ms") or 0),
        )
        if start <= due_ms < end:
            return mark
    return None


def page_ready(driver: WebDriver) -> bool:
    return driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"


def console_args(namespace: str) -> tuple[str, ...]:
    return ("-n", namespace, "--watch-resource", "configmaps", "--interval", "0.5")


async def test_the_timeline_shows_an_action_at_its_time_and_follows_annotations_live(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, browser: WebDriver
) -> None:
    now = datetime.now(UTC)
    due = rfc3339(now + timedelta(minutes=20))
    await create(kube, CONFIGMAPS, namespace, configmap("preview", **{DELETE_AT: due}))
    await create(kube, CONFIGMAPS, namespace, configmap("plain"))
    with console_process(control_plane.admin_kubeconfig, *console_args(namespace)) as console:
        browser.get(console.url)
        await until(browser, page_ready, "the page's first draw")
        browser.find_element(By.CSS_SELECTOR, '#span button[data-value="hour"]').click()
        group = await click(
            browser,
            lambda d: mark_at(d, "delete", due),
            lambda mark: mark.get_attribute("data-group"),
            f"a deletion at {due}",
        )
        assert group == namespace
        said = await click(
            browser,
            lambda d: next(
                iter(d.find_elements(By.CSS_SELECTOR, '#cell li[data-name="preview"] button')),
                None,
            ),
            lambda button: button.find_element(By.XPATH, "./ancestor::li").text,
            "the selected mark's objects",
        )
        assert said is not None
        assert "from its own annotations" in said
        await until(
            browser,
            lambda d: "delete-at" in d.find_element(By.CSS_SELECTOR, "#cell pre").text,
            "explain's text",
        )
        version = browser.find_element(By.TAG_NAME, "body").get_attribute("data-version")

        # kubectl annotate, no reload: the page follows
        moved = rfc3339(now + timedelta(minutes=45))
        await kube.merge_patch(
            CONFIGMAPS, namespace, "preview", {"metadata": {"annotations": {DELETE_AT: moved}}}
        )
        await kube.merge_patch(
            CONFIGMAPS,
            namespace,
            "plain",
            {"metadata": {"annotations": {"lifecycle.cezary.dev/restart-at": moved}}},
        )
        await until(
            browser, lambda d: mark_at(d, "delete", moved), f"the deletion moved to {moved}"
        )
        assert mark_at(browser, "delete", due) is None
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-version") != version
        assert page_ready(browser)  # the same page: never reloaded


async def test_last_actions_show_a_deletion_the_controller_made(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    browser: WebDriver,
    start_controller: StartController,
) -> None:
    await start_controller(watch_resource=["configmaps"], watch_namespace=[namespace])
    with console_process(control_plane.admin_kubeconfig, *console_args(namespace)) as console:
        browser.get(console.url)
        await until(browser, page_ready, "the page's first draw")
        await create(kube, CONFIGMAPS, namespace, configmap("short-lived", **{DELETE_AFTER: "1s"}))
        # The row's text is read in the same look that finds it: the page redraws the table
        # when a new version of the data arrives, which would leave a found row stale.
        texts = await until(
            browser,
            lambda d: [
                row.text
                for row in d.find_elements(
                    By.CSS_SELECTOR,
                    '#actions tbody tr[data-name="short-lived"][data-action="delete"]',
                )
            ],
            "the deletion in the last actions",
        )
        assert f"ConfigMap/{namespace}/short-lived" in texts[0]


async def test_a_policys_counts_match_the_policies_command_and_it_filters_the_timeline(
    policy_crds: None,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    browser: WebDriver,
    start_controller: StartController,
) -> None:
    policy = namespaced_policy(
        "cache",
        namespace,
        resources=["configmaps"],
        selector={"matchLabels": {"tier": "cache"}},
        lifecycle={"delete-after": "48h"},
    )
    await create(kube, POLICIES, namespace, policy)
    for name in ("a", "b", "c"):
        await create_configmap(kube, namespace, labelled(name, {"tier": "cache"}))
    later = rfc3339(datetime.now(UTC) + timedelta(hours=30))
    await create_configmap(kube, namespace, labelled("own", {"tier": "web"}, **{DELETE_AT: later}))
    await start_controller(watch_resource=["configmaps"], watch_namespace=[namespace])
    ref = f"LifecyclePolicy/{namespace}/cache"

    async def reported() -> bool:
        rows = tool_json(control_plane, "policies", "-n", namespace)
        return bool(rows) and rows[0]["matched"] == 3

    await eventually(reported, within=60, what="the controller's status of the policy")
    (row,) = tool_json(control_plane, "policies", "-n", namespace)
    with console_process(control_plane.admin_kubeconfig, *console_args(namespace)) as console:
        browser.get(console.url)
        await until(browser, page_ready, "the page's first draw")
        cells = {
            cell.get_attribute("data-count"): cell.text
            for cell in browser.find_elements(
                By.CSS_SELECTOR, f'#policies tr[data-ref="{ref}"] td[data-count]'
            )
        }
        assert cells == {
            "matched": str(row["matched"]),
            "overlapped": str(row["overlapped"]),
            "protected": str(row["status"]["protected"]),
            "held": str(row["status"]["held"]),
        }
        conditions = browser.find_element(By.CSS_SELECTOR, f'#policies tr[data-ref="{ref}"]').text
        assert all(condition in conditions for condition in row["conditions"])

        browser.find_element(By.CSS_SELECTOR, '#span button[data-value="week"]').click()
        browser.find_element(By.CSS_SELECTOR, '#by button[data-value="policy"]').click()
        await until(
            browser,
            lambda d: (
                {m.get_attribute("data-group") for m in marks(d, "delete")}
                == {ref, "(own annotations)"}
            ),
            "both groups",
        )
        browser.find_element(By.CSS_SELECTOR, f'#policies tr[data-ref="{ref}"] button').click()
        await until(
            browser,
            lambda d: {m.get_attribute("data-group") for m in marks(d, "delete")} == {ref},
            "the timeline filtered to the policy",
        )
        assert browser.find_element(By.ID, "filter-name").text == ref
