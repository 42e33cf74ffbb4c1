"""The Usage page, the dashboard's panel of GPUs held by runs that are not progressing, and the
job page's GPU-hours (issue 33, Build 2), as anonymous, outsider, viewer, member and operator,
in English and Chinese."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster, Membership, Project
from jobs.choices import UsageClass
from jobs.models import Job, WorkloadReport
from tests.usage.test_api import NOW, at, held, job_of


@pytest.fixture(autouse=True)
def now() -> Iterator[None]:
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def ledger(
    alice: User, charlie: User, project: Project, other_project: Project, cluster: Cluster
) -> dict[str, Job]:
    """ppo (vision): 2 GPUs stalled since 11:00, asr (speech): 1 GPU progressing since 12:00."""
    ppo = job_of(alice, project, cluster, "ppo")
    held(ppo, UsageClass.PROGRESSING, 2, at(10), at(11))
    held(ppo, UsageClass.STALLED, 2, at(11), None)
    asr = job_of(charlie, other_project, cluster, "asr")
    held(asr, UsageClass.PROGRESSING, 1, at(12), None)
    return {"ppo": ppo, "asr": asr}


def page(client: Client, user: User | None, path: str, language: str = "en") -> str:
    if user is not None:
        client.force_login(user)
    response = client.get(path, headers={"accept-language": language})
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_it_sends_an_anonymous_visitor_to_the_login_page(client: Client) -> None:
    assert client.get("/usage/")["Location"].startswith("/accounts/login/")


def test_it_shows_a_member_her_projects_stacked_by_class(
    client: Client, alice: User, ledger: dict[str, Job]
) -> None:
    html = page(client, alice, "/usage/?period=day&group_by=job")
    assert ">ppo</a>" in html and "asr" not in html
    assert 'class="u-stalled"' in html and "<svg" in html
    assert "5.0000" in html  # 2 GPUs x 1 h progressing + 2 GPUs x 1.5 h stalled
    assert "format=csv" in html


def test_it_shows_an_operator_every_project_and_exports_csv(
    client: Client, olga: User, ledger: dict[str, Job]
) -> None:
    html = page(client, olga, "/usage/?period=week&group_by=project")
    assert "vision" in html and "speech" in html
    response = client.get("/usage/?period=week&group_by=project&format=csv")
    assert response.content.decode().splitlines()[1].startswith("vision,vision,5.000000,3.000000")


def test_it_names_a_bad_period_field(client: Client, alice: User) -> None:
    html = page(client, alice, "/usage/?period=custom&from=soon")
    assert "<code>from</code>" in html


def test_it_speaks_chinese(client: Client, alice: User, ledger: dict[str, Job]) -> None:
    html = page(client, alice, "/usage/?period=day", language="zh-Hans")
    assert "GPU 使用量" in html and "停滞" in html


def test_the_dashboard_lists_gpus_held_by_runs_not_progressing_with_stop_for_members(
    client: Client, alice: User, bob: User, charlie: User, ledger: dict[str, Job]
) -> None:
    html = page(client, alice, "/")
    row = html[html.index('data-held="ppo"') :]
    row = row[: row.index("</tr>")]
    assert ">2<" in row and "stalled" in row and "2026-05-04 11:00" in row
    assert "3.0000" in row  # 2 GPUs x 1.5 h stalled so far
    assert f"/jobs/{ledger['ppo'].pk}/stop/" in row
    assert 'data-held="asr"' not in html  # progressing, and not alice's anyway
    Membership.objects.filter(user=bob).update(role=Membership.Role.VIEWER)
    viewer = page(Client(), bob, "/")
    assert 'data-held="ppo"' in viewer and "/stop/" not in viewer
    assert 'data-held="ppo"' not in page(Client(), charlie, "/")


def test_the_job_page_shows_its_gpu_hours_and_when_the_idle_policy_acts(
    client: Client, alice: User, ledger: dict[str, Job]
) -> None:
    job = ledger["ppo"]
    stalled_at = at(10, 58).isoformat()
    WorkloadReport.objects.create(
        job=job, run=1, first_received_at=at(10), last_received_at=at(12, 29),
        latest={"progress": {"step": 3, "at": stalled_at, "received_at": stalled_at,
                             "advanced_at": stalled_at, "source": "signal"},
                "heartbeat": {"at": at(12, 29).isoformat(), "received_at": at(12, 29).isoformat(),
                              "source": "signal"}},
        steps=[[at(10, 58).timestamp(), 3]],
    )  # fmt: skip
    Job.objects.filter(pk=job.pk).update(
        spec={"tasks": [], "policies": {"stall_after_seconds": 120, "stop_when_idle_minutes": 90}}
    )
    html = page(client, alice, f"/jobs/{job.pk}/")
    section = html[html.index('id="usage"') :]
    assert "5.0000" in section and "3.0000" in section  # this run; wasted
    assert "Will stop at 2026-05-04 12:30 UTC unless a step arrives." in section
    assert 'class="u-progressing"' in section and 'class="u-stalled"' in section
