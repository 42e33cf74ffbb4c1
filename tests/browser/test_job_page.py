"""The job page in a real browser at 1400 px and 390 px (spec §Pod and Worker status, §Task
status): open Worker rows stay open and current while the page refreshes, a stopped Job reads
Stopped down to its Worker rows, and wide tables scroll inside their own box while long
messages wrap in their cell. Screenshots of the running, stopped, crash-looping and phone
pages, in English and Chinese, go to the screenshots folder
(`make screenshots` refreshes docs/screenshots/)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from console.models import Cluster, Membership
from jobs.operations import create_job, create_workflow
from jobs.spec import JobSpec, TaskSpec, WorkflowJobSpec, WorkflowSpec
from tests.browser import conftest
from tests.browser.conftest import Syncer, shoot
from tests.conftest import make_operator, open_project

pytestmark = pytest.mark.browser

LIVE = 60_000  # an upper bound for a busy machine; every wait ends at the event it waits for
WIDE: ViewportSize = {"width": 1400, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture
def olga(transactional_db: None) -> User:
    """An operator and member of the project: she sees the instance history too."""
    user = make_operator(User.objects.create_user("olga", password="a-long-password"))
    project = open_project("vision")
    Membership.objects.create(user=user, project=project)
    return user


def log_in(page: Page, base: str) -> None:
    conftest.log_in(page, base, "olga", landing="/jobs/")


def watch_htmx_errors(page: Page) -> list[str]:
    """htmx:targetError and friends, as the browser reports them."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if "htmx" in message.text
            and message.type == "error" else None)  # fmt: skip
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def count_target_errors(page: Page) -> None:
    page.evaluate("""() => { window.targetErrors = 0;
        document.body.addEventListener('htmx:targetError', () => { window.targetErrors += 1; });
    }""")


def task_row(page: Page, role: str) -> Locator:
    return page.locator("tbody.task", has=page.locator(f'th[scope="row"]:text-is("{role}")'))


def open_rows(page: Page, role: str) -> Locator:
    row = task_row(page, role)
    row.locator(".workers-row summary").click()
    workers = row.locator(".workers")
    expect(workers.locator(".workers-table tbody tr").first).to_be_visible(timeout=LIVE)
    return workers


def one_status_poll(page: Page) -> None:
    with page.expect_response(lambda answer: "part=status" in answer.url, timeout=LIVE):
        pass


def no_sideways_page_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    viewport = page.viewport_size
    assert viewport is not None and width <= viewport["width"], f"page is {width} px wide"


def boxes_hold_their_tables(page: Page) -> None:
    """Spec-free layout rule of item 5: every table wider than its box scrolls inside the box
    (overflow-x auto), and no box sticks out of the page."""
    report = page.evaluate("""() => Array.from(document.querySelectorAll('.table-wrap'))
        .filter((wrap) => wrap.offsetParent !== null)
        .map((wrap) => ({
            overflow: getComputedStyle(wrap).overflowX,
            wider: wrap.scrollWidth > wrap.clientWidth + 1,
            right: wrap.getBoundingClientRect().right,
        }))""")
    width = page.evaluate("document.documentElement.clientWidth")
    for box in report:
        assert box["right"] <= width + 1, report
        assert not box["wider"] or box["overflow"] in ("auto", "scroll"), report


def messages_stay_in_their_cells(page: Page) -> None:
    """A long message wraps in its cell: it does not run under the next cell."""
    overlaps = page.evaluate("""() => Array.from(document.querySelectorAll(
            '.workers-table td.message, .instances-table td.reason'))
        .filter((cell) => cell.offsetParent !== null && cell.nextElementSibling)
        .filter((cell) => cell.scrollWidth > cell.clientWidth + 1
            || cell.getBoundingClientRect().right
               > cell.nextElementSibling.getBoundingClientRect().left + 1)
        .map((cell) => cell.textContent.slice(0, 60))""")
    assert overlaps == [], overlaps


def cells_are_not_one_word_a_line(page: Page) -> None:
    narrow = page.evaluate("""() => Array.from(document.querySelectorAll('.workers-table td.pod'))
        .filter((cell) => cell.offsetParent !== null)
        .map((cell) => cell.getBoundingClientRect().width)""")
    assert narrow and min(narrow) > 200, narrow


def keeps_its_sideways_scroll_across_a_refresh(page: Page, workers: Locator) -> None:
    """Item 1: the instance history, scrolled sideways on a phone, is replaced by the next
    refresh of its fragment and comes back scrolled as it was."""
    slot = workers.locator("xpath=ancestor::details[1]").get_attribute("id")
    wrap = f"#{slot} .instances-table"
    page.evaluate(f"""() => {{ const box = document.querySelector('{wrap}').parentElement;
        box.dataset.old = 'yes'; box.scrollLeft = 120; }}""")
    page.wait_for_function(
        f"""() => {{ const box = document.querySelector('{wrap}').parentElement;
        return !box.dataset.old && box.scrollLeft >= 100; }}""",
        timeout=LIVE,
    )


@pytest.fixture
def chinese_page(browser: Browser, live_server: Any) -> Iterator[Page]:
    context = browser.new_context(locale="zh-CN", timezone_id="UTC", viewport=WIDE)
    page = context.new_page()
    yield page
    context.close()


@pytest.mark.django_db(transaction=True)
def test_it_keeps_open_worker_rows_current_and_reads_a_stop_as_stopped(
    page: Page, live_server: Any, olga: User, sim_cluster: Cluster, syncer: Syncer,
    screenshots: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Items 1, 2 and 5: open rows refresh (their "last reported at" moves on, no
    htmx:targetError) and keep their filter; after Stop the Task shows the workload's desired 0
    beside the template's 2 and the rows read gone, counted as no pod. A time a sync confirms
    is shown anew at each age step (console.web), 3 s here instead of 30."""
    monkeypatch.setattr("console.web.AGE_STEP_SECONDS", 3)
    train = TaskSpec(role="worker", replicas=2, image="rlinf/trainer:0.4",
                     command=["sim", "run", "3600"])  # fmt: skip
    broken = TaskSpec(role="actor", replicas=1, image="registry.example.com/rlinf/nonexistent:1")
    job = create_job(olga, JobSpec(name="ppo-math", cluster="sim", tasks=[train, broken]))
    errors = watch_htmx_errors(page)
    page.set_viewport_size(WIDE)
    base = str(live_server)
    log_in(page, base)
    page.goto(f"{base}/jobs/{job.pk}/")
    count_target_errors(page)
    expect(task_row(page, "worker").locator('.badge[data-status="Running"]')).to_be_visible(
        timeout=LIVE
    )

    # 1. The worker rows, open, refresh with the page and keep their filter.
    workers = open_rows(page, "worker")
    expect(workers.locator(".workers-summary")).to_have_text(
        "2 pods in the last report, 2 ready", timeout=LIVE
    )
    reported = workers.locator(".workers-table tbody tr").first.locator("td.nowrap time")
    first_value = reported.get_attribute("datetime")
    expect(reported).not_to_have_attribute("datetime", first_value or "", timeout=LIVE)
    one_status_poll(page)
    expect(task_row(page, "worker").locator("details.workers-details")).to_have_attribute(
        "open", ""
    )
    actor = open_rows(page, "actor")
    expect(actor.locator(".workers-table")).to_contain_text("ImagePullBackOff", timeout=LIVE)
    actor.locator(".worker-filter a").nth(1).click()
    expect(actor.locator('.worker-filter a[aria-current="true"]')).to_contain_text("Not ready")
    reported = actor.locator(".workers-table tbody tr").first.locator("td.nowrap time")
    value = reported.get_attribute("datetime")
    expect(reported).not_to_have_attribute("datetime", value or "", timeout=LIVE)
    expect(actor.locator('.worker-filter a[aria-current="true"]')).to_contain_text("Not ready")
    assert page.evaluate("window.targetErrors") == 0
    assert not errors, errors

    # 5. At 1400 px: every table holds in its box, messages wrap in their cells.
    expect(actor.locator(".instances-table tbody tr").first).to_be_visible()
    boxes_hold_their_tables(page)
    messages_stay_in_their_cells(page)
    no_sideways_page_scroll(page)
    shoot(page, screenshots, "job-page-running.png")

    # 5. At 390 px: the rows stay readable (not one word a line) and the page does not scroll
    # sideways.
    page.set_viewport_size(PHONE)
    cells_are_not_one_word_a_line(page)
    boxes_hold_their_tables(page)
    no_sideways_page_scroll(page)
    keeps_its_sideways_scroll_across_a_refresh(page, actor)
    expect(actor.locator('.worker-filter a[aria-current="true"]')).to_contain_text("Not ready")
    shoot(page, screenshots, "job-page-phone.png")
    page.set_viewport_size(WIDE)

    # 2. Stop: the cycle that applies it shows the Tasks Stopped, desired 0 beside 2.
    syncer.pause()
    page.click("button:has-text('Stop')")
    expect(page.locator(".messages")).to_contain_text("Stop requested")
    count_target_errors(page)  # the stop reloaded the page
    # 3. Until the cluster reports after the stop, Stopped is the console's decision.
    decision = page.locator("#phase-decision")
    expect(decision).to_contain_text("decided by the console")
    expect(decision).to_contain_text("spec.stopped was set to true by olga")
    shoot(page, screenshots, "job-page-stop-decided.png")
    syncer.resume()
    expect(decision).to_have_count(0, timeout=LIVE)
    worker_task = task_row(page, "worker")
    expect(worker_task.locator(".workload-replicas")).to_have_text("0", timeout=LIVE)
    expect(worker_task.locator('td[data-label="Desired (template)"]')).to_have_text("2")
    expect(worker_task.locator('.badge[data-status="Stopped"]')).to_be_visible()
    workers = open_rows(page, "worker")
    expect(workers.locator(".workers-summary")).to_have_text(
        "0 pods in the last report, 0 ready", timeout=LIVE
    )
    gone = workers.locator(".workers-table tbody tr.unreported")
    expect(gone).to_have_count(2)
    expect(gone.first.locator("td.phase")).to_contain_text("gone, last known:")
    expect(worker_task.locator("td.workers-count .reported")).to_have_text("0")
    assert page.evaluate("window.targetErrors") == 0
    shoot(page, screenshots, "job-page-stopped.png")

    page.set_viewport_size(PHONE)
    cells_are_not_one_word_a_line(page)
    no_sideways_page_scroll(page)
    shoot(page, screenshots, "job-page-stopped-phone.png")
    assert not errors, errors


@pytest.mark.django_db(transaction=True)
def test_it_shows_a_crash_loop_and_the_workflow_jobs_in_english_and_chinese(
    page: Page, chinese_page: Page, live_server: Any, olga: User, sim_cluster: Cluster,
    syncer: Syncer, screenshots: Path,
) -> None:  # fmt: skip
    """The crash-looping job page (troubleshooting layer 3, the record) at both widths, in both
    languages; the workflow's jobs table at 390 px stacks instead of being cut mid-word."""
    crash = TaskSpec(role="worker", replicas=1, image="rlinf/trainer:0.4",
                     command=["sim", "crash", "2", "3"])  # fmt: skip
    job = create_job(olga, JobSpec(name="crashy", cluster="sim", tasks=[crash]))
    child = WorkflowJobSpec(
        name="pipe-evaluate-with-a-long-name", cluster="sim", tasks=[crash],
        depends_on=["pipe-prepare-the-dataset-shards"],
    )  # fmt: skip
    first = WorkflowJobSpec(name="pipe-prepare-the-dataset-shards", cluster="sim", tasks=[crash])
    workflow = create_workflow(olga, WorkflowSpec(name="pipe", jobs=[first, child]))
    base = str(live_server)
    page.set_viewport_size(WIDE)
    log_in(page, base)
    page.goto(f"{base}/jobs/{job.pk}/")
    first_wrong = page.locator(".walk li.first-wrong")
    expect(first_wrong).to_contain_text("Crash loop", timeout=LIVE)
    open_rows(page, "worker")
    boxes_hold_their_tables(page)
    messages_stay_in_their_cells(page)
    page.locator("details.record summary").click()
    record = page.locator("details.record textarea")
    expect(record).to_have_value(re.compile("First layer that looks wrong: 3. .* Crash loop"))
    page.click("button.copy-record")
    expect(page.locator(".copy-status")).to_have_text(re.compile("Copied|Selected"))
    expect(record).to_have_value(re.compile(r"Pod crashy-worker-0: node sim-node-\d, IP "))
    shoot(page, screenshots, "job-page-crash-loop.png")
    page.set_viewport_size(PHONE)
    cells_are_not_one_word_a_line(page)
    no_sideways_page_scroll(page)
    shoot(page, screenshots, "job-page-crash-loop-phone.png")

    page.goto(f"{base}/workflows/{workflow.pk}/")
    expect(page.locator("table.workflow-jobs")).to_contain_text("pipe-evaluate-with-a-long-name")
    no_sideways_page_scroll(page)
    cut = page.evaluate("""() => Array.from(document.querySelectorAll('table.workflow-jobs td'))
        .filter((cell) => cell.scrollWidth > cell.clientWidth + 1).length""")
    assert cut == 0
    shoot(page, screenshots, "workflow-phone.png")

    log_in(chinese_page, base)
    chinese_page.goto(f"{base}/jobs/{job.pk}/")
    expect(chinese_page.locator(".walk li.first-wrong")).to_contain_text("反复崩溃", timeout=LIVE)
    open_rows(chinese_page, "worker")
    expect(chinese_page.locator(".workers-summary")).to_contain_text(re.compile("最近一次上报"))
    shoot(chinese_page, screenshots, "zh-job.png")
    chinese_page.set_viewport_size(PHONE)
    cells_are_not_one_word_a_line(chinese_page)
    no_sideways_page_scroll(chinese_page)
    shoot(chinese_page, screenshots, "zh-job-page-phone.png")
