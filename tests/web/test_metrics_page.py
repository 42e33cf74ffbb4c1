"""The Metrics tab's page (issue 35): the Job's access, the tab beside Status and Logs, and a
comparison that names only Jobs the reader may see (a shared link shows no one else's Job)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from console.models import Cluster, Project
from jobs.models import Job


def make_job(owner: User, project: Project, cluster: Cluster, name: str, **fields: object) -> Job:
    return Job.objects.create(project=project, cluster=cluster, name=name, namespace="default",
                              owner=owner, spec={"tasks": []}, **fields)  # fmt: skip


def page(user: User | None, path: str) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client.get(path)


def setup_of(response: Any) -> Any:
    html = response.content.decode()
    start = html.index('<script id="metrics-setup" type="application/json">') + 51
    return json.loads(html[start : html.index("</script>", start)])


def test_it_follows_job_access_and_sits_beside_status_and_logs(
    alice: User, bob: User, charlie: User, olga: User, project: Project, cluster: Cluster
) -> None:
    job = make_job(alice, project, cluster, "ppo")
    path = f"/jobs/{job.pk}/metrics/"
    assert page(None, path).status_code == 302
    assert page(charlie, path).status_code == 404
    for reader in (alice, bob, olga):
        assert page(reader, path).status_code == 200
    status = page(alice, f"/jobs/{job.pk}/").content.decode()
    assert f'href="/jobs/{job.pk}/metrics/" id="metrics-tab"' in status
    setup = setup_of(page(alice, path))
    url = f"/api/v1/jobs/{job.pk}/series"
    assert setup["sources"] == [{"job": job.pk, "name": "ppo", "url": url, "run": "", "live": True}]


def test_a_comparison_names_only_jobs_the_reader_may_see(
    alice: User, charlie: User, project: Project, other_project: Project, cluster: Cluster
) -> None:
    job = make_job(alice, project, cluster, "ppo")
    clone = make_job(alice, project, cluster, "ppo-lr2", cloned_from=job)
    hidden = make_job(charlie, other_project, cluster, "secret")
    link = f"/jobs/{job.pk}/metrics/?x=step&runs=all&compare={hidden.pk},{clone.pk},{job.pk}"
    response = page(alice, link)
    setup = setup_of(response)
    assert [s["name"] for s in setup["sources"]] == ["ppo", "ppo-lr2"]
    assert all(s["run"] == "all" for s in setup["sources"])
    assert setup["axis"] == "step"
    assert "secret" not in response.content.decode()
    offered = page(alice, f"/jobs/{job.pk}/metrics/").content.decode()
    assert f'name="compare" value="{clone.pk}"' in offered


def test_the_form_compares_every_ticked_and_typed_job(
    alice: User, project: Project, cluster: Cluster
) -> None:
    """The clone checkboxes and the box for other ids are all named `compare`: a ticked clone
    with the box left empty compares the clone, and a ticked clone plus typed ids compares
    each of them once, at most five."""
    job = make_job(alice, project, cluster, "ppo")
    clone = make_job(alice, project, cluster, "ppo-lr2", cloned_from=job)
    others = [make_job(alice, project, cluster, f"other-{n}") for n in range(6)]
    base = f"/jobs/{job.pk}/metrics/"
    ticked = setup_of(page(alice, f"{base}?compare={clone.pk}&compare="))
    assert [s["name"] for s in ticked["sources"]] == ["ppo", "ppo-lr2"]
    typed = ",".join(str(other.pk) for other in others[:2])
    both = setup_of(page(alice, f"{base}?compare={clone.pk}&compare={typed},{clone.pk}"))
    assert [s["name"] for s in both["sources"]] == ["ppo", "ppo-lr2", "other-0", "other-1"]
    many = ",".join(str(other.pk) for other in others)
    capped = setup_of(page(alice, f"{base}?compare={clone.pk}&compare={many}"))
    compared = [s["name"] for s in capped["sources"]][1:]
    assert compared == ["ppo-lr2", "other-0", "other-1", "other-2", "other-3"]
    offered = page(alice, f"{base}?compare={clone.pk}&compare=").content.decode()
    assert f'name="compare" value="{clone.pk}" checked' in offered
