"""The Metrics tab in a browser (issue 35, "Show"): a run with checkpoints, a stall and a
restart drawn, zoomed (the finer points asked for and drawn), a new step appended while the
tab is open (the same charts, asked by cursor), and compared with an earlier run and a clone;
in English and 简体中文 at 1400 px and 390 px, pictures kept and looked at."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from console.models import Membership
from jobs.choices import JobPhase, TaskPhase
from jobs.models import Job, Task
from jobs.operations import create_job
from jobs.spec import parse_job_spec
from jobs.workload.intake import BATCH
from jobs.workload.report import record
from tests.browser.conftest import log_in
from tests.conftest import KUBECONFIG, open_cluster, open_project

pytestmark = pytest.mark.browser

SEQ = count(1)


@pytest.fixture
def alice(transactional_db: None) -> User:
    user = User.objects.create_user("alice", password="a-long-password")
    Membership.objects.create(user=user, project=open_project("vision"))
    return user


def running_job(alice: User, name: str, run: int = 1) -> Job:
    spec = {"name": name, "cluster": "gpu-a",
            "tasks": [{"role": "trainer", "replicas": 1, "image": "rlinf:0.4"}]}  # fmt: skip
    job = create_job(alice, parse_job_spec(spec, alice))
    now = timezone.now()
    Task.objects.filter(job=job).update(phase=TaskPhase.RUNNING, ready_replicas=1, observed_at=now)
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.RUNNING, run=run, started_at=now)
    job.refresh_from_db()
    return job


def say(job: Job, run: int, at: datetime, uid: str, *messages: dict[str, Any]) -> None:
    items = BATCH.validate_python(
        [{"pod": f"{job.name}-trainer-0", "uid": uid, "seq": next(SEQ), **m} for m in messages]
    )
    with time_machine.travel(at, tick=False):
        record(job.pk, run, items)


def train(job: Job, run: int, start: datetime, steps: int, skill: float = 1.0) -> None:
    """A run of `steps` steps 30 s apart: a reward that rises through noise, a loss that falls,
    an entropy that decays; checkpoints every 100 steps; after step 120 ten minutes without a
    step (heartbeats go on: Stalled); at step 200 the pod is re-created (a new UID)."""
    at, uid = start, f"{job.pk}-{run}-a"
    for step in range(steps):
        at += timedelta(seconds=30)
        if step == 121:
            for beat in range(1, 20):
                say(job, run, at + timedelta(seconds=30 * beat), uid, {"kind": "heartbeat"})
            at += timedelta(minutes=10)
        if step == 200:
            uid = f"{job.pk}-{run}-b"
        wobble = math.sin(step / 7) * 0.04 + (0.25 if step == 160 else 0.0)
        metrics = {
            "rollout/reward": round(skill * (1 - math.exp(-step / 90)) + wobble, 4),
            "train/loss": round(2.2 * math.exp(-step / 120) + abs(wobble) / 2, 4),
            "train/entropy": 1.1 - step / 800,  # 1.09125 at step 7: six digits
        }
        say(job, run, at, uid, {"kind": "progress", "step": step, "max_steps": 400,
                                "metrics": metrics})  # fmt: skip
        if step and step % 100 == 0:
            say(job, run, at, uid, {"kind": "checkpoint", "step": step,
                                    "path": f"/out/ckpt/global_step_{step}"})  # fmt: skip


def drag(page: Page, figure: Any, start: float, end: float) -> None:
    """Across the chart from `start` to `end` (fractions of its width), as a reader drags."""
    figure.scroll_into_view_if_needed()
    box = figure.locator(".u-over").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * end, y, steps=6)
    page.mouse.up()


@pytest.mark.django_db(transaction=True)
def test_it_draws_zooms_and_compares_runs_in_both_languages(
    page: Page, live_server: object, alice: User, screenshots: Path
) -> None:
    now = timezone.now()
    open_cluster("gpu-a", kubeconfig=KUBECONFIG, namespace="default", reachable=True,
                 last_synced_at=now, last_attempt_at=now)  # fmt: skip
    job = running_job(alice, "ppo-curves", run=2)
    train(job, 1, now - timedelta(hours=6), 150, skill=0.7)
    train(job, 2, now - timedelta(hours=3, minutes=10), 300)
    clone = running_job(alice, "ppo-curves-lr2")
    Job.objects.filter(pk=clone.pk).update(cloned_from=job)
    train(clone, 1, now - timedelta(hours=3), 260, skill=1.2)
    base = str(live_server)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda line: errors.append(line.text) if line.type == "error" else None)
    log_in(page, base)
    views = (("en", 1400, "en-1400"), ("zh-hans", 390, "zh-390"), ("en", 390, "en-390"),
             ("zh-hans", 1400, "zh-1400"))  # fmt: skip
    for language, width, suffix in views:
        page.context.add_cookies([{"name": "django_language", "value": language, "url": base}])
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{base}/jobs/{job.pk}/")
        page.click("#metrics-tab")
        expect(page.locator("#metrics")).to_have_attribute("data-drawn", "5")
        names = page.locator("figure.metric-chart").evaluate_all(
            "figures => figures.map(f => f.dataset.series)"
        )
        assert names == ["step", "step_rate", "rollout/reward", "train/entropy", "train/loss"]
        events = page.locator(".metrics-events li").all_text_contents()
        assert any("\u2016" in text for text in events)  # the stall's band, in words too
        assert sum("\u25c6" in text for text in events) == 2  # checkpoints at 100 and 200
        assert any("\u21bb" in text for text in events)  # the re-created pod
        page.locator(".metrics-events summary").click()
        page.screenshot(path=str(screenshots / f"metrics-{suffix}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    # the table reads each value as reported, not rounded as the summaries and the axis are
    entropy = page.locator('figure[data-series="train/entropy"]')
    entropy.locator(".table-toggle").click()
    cells = entropy.locator(".metric-table tbody td:nth-child(2)").all_text_contents()
    assert "1.09125" in cells
    assert [float(cell) for cell in cells] == [1.1 - step / 800 for step in range(300)]
    entropy.locator(".table-toggle").click()
    reward = page.locator('figure[data-series="rollout/reward"]')
    drag(page, reward, 0.55, 0.7)
    expect(reward).to_have_attribute("data-zoomed", re.compile(r"^\d+$"))
    assert int(reward.get_attribute("data-zoomed") or 0) > 20
    reward.locator(".table-toggle").click()
    expect(reward.locator(".metric-table tbody tr").first).to_be_visible()
    reward.screenshot(path=str(screenshots / "metrics-zoomed-table-zh-1400.png"))
    reward.locator(".u-over").dblclick()
    expect(reward).not_to_have_attribute("data-zoomed", re.compile(".*"))
    # live: a new step is appended to the charts drawn (the same elements), asked by cursor
    step_chart = page.locator('figure[data-series="step"]')
    step_chart.evaluate("figure => { figure.dataset.kept = 'yes'; }")
    say(job, 2, timezone.now(), f"{job.pk}-2-b", {"kind": "progress", "step": 300})
    appended = page.locator("#metrics")
    expect(appended).to_have_attribute("data-appended", re.compile("."), timeout=15_000)
    expect(step_chart).to_have_attribute("data-kept", "yes")
    # a tab left open keeps a bounded chart: past twice an answer's points a series is thinned
    # back to them, its highest point kept
    start = timezone.now().timestamp() + 60
    burst = {"series": [{"name": "step", "run": 2,
                         "points": [[start + n, 301 + n, 301.0 + n] for n in range(1100)]}],
             "checkpoints": [], "spells": [], "runs": [], "restarts": [],
             "cursor": "2.999999.0.-", "x": "time"}  # fmt: skip
    page.route(f"**/api/v1/jobs/{job.pk}/series?*after=*",
               lambda route: route.fulfill(json=burst))  # fmt: skip
    expect(appended).to_have_attribute("data-appended", "2.999999.0.-", timeout=15_000)
    page.unroute(f"**/api/v1/jobs/{job.pk}/series?*after=*")
    kept = step_chart.evaluate("f => f.chart.lines[0].points.map(p => p[2])")
    assert len(kept) <= 1000 and max(kept) == 1400.0
    for language, width, suffix in (("en", 1400, "en-1400"), ("zh-hans", 390, "zh-390")):
        page.context.add_cookies([{"name": "django_language", "value": language, "url": base}])
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{base}/jobs/{job.pk}/metrics/?x=since&runs=all&compare={clone.pk}")
        expect(page.locator("#metrics")).to_have_attribute("data-drawn", "5")
        legend = page.locator('figure[data-series="rollout/reward"] .u-legend').inner_text()
        assert "ppo-curves \u00b7" in legend and "ppo-curves-lr2 \u00b7" in legend
        # the marks of every Job and run compared, each naming its Job and run
        events = page.locator(".metrics-events li").all_text_contents()
        for who in ("ppo-curves \u00b7 ", "ppo-curves-lr2 \u00b7 "):
            assert any(text.startswith(who) and "\u25c6" in text for text in events)
            assert any(text.startswith(who) and "\u21bb" in text for text in events)
        assert sum("\u25c6" in text for text in events) == 1 + 2 + 2  # run 1, run 2, the clone
        page.locator(".metrics-events summary").click()
        page.screenshot(path=str(screenshots / f"metrics-compare-{suffix}.png"), full_page=True)
    # a click on a legend entry hides that series
    reward = page.locator('figure[data-series="rollout/reward"]')
    reward.locator(".u-legend .u-series").nth(1).click()
    expect(reward.locator(".u-legend .u-series").nth(1)).to_have_class(re.compile("u-off"))
    assert reward.evaluate("f => f.chart.plot.series.map(s => s.show)") == [True, False, True, True]
    # a compared Job that is live is asked for what is new too
    say(clone, 1, timezone.now(), f"{clone.pk}-1-b", {"kind": "progress", "step": 260})
    expect(page.locator("#metrics")).to_have_attribute("data-appended", re.compile("."),
                                                       timeout=15_000)  # fmt: skip
    last = page.locator('figure[data-series="step"]').evaluate(
        "f => f.chart.lines.filter(l => l.label.startsWith('ppo-curves-lr2'))"
        ".map(l => l.points[l.points.length - 1][1])"
    )
    assert last == [260]
    assert errors == []
