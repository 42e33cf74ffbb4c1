"""`manage.py demo_user`, which `make run` runs on every start: the banner names the real port,
and a restart keeps the demo password and every open session."""

from __future__ import annotations

from io import StringIO

from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from console.demo import DEMO_JOBS, DEMO_WORKFLOWS
from console.management.commands.demo_cluster import Command as DemoCluster
from console.models import Membership, Project
from simcluster.server import SimCluster


def run() -> str:
    out = StringIO()
    call_command("demo_user", stdout=out)
    return out.getvalue()


def test_it_prints_the_url_of_the_port_the_web_server_listens_on(db: None, settings) -> None:
    settings.TRAINYARD_PORT = 8123
    assert "Trainyard is starting at http://127.0.0.1:8123/" in run()


def test_it_creates_an_operator_who_is_a_member_of_the_demo_project(db: None) -> None:
    assert "Log in as  demo / trainyard-demo" in run()
    demo = User.objects.get(username="demo")
    assert demo.is_staff and demo.is_superuser and demo.check_password("trainyard-demo")
    assert Membership.objects.filter(user=demo, project__name="demo").exists()


def test_it_keeps_the_open_sessions_of_the_demo_user_on_a_restart(db: None, client: Client) -> None:
    run()
    assert client.login(username="demo", password="trainyard-demo")
    assert client.get("/").status_code == 200
    run()
    assert client.get("/").status_code == 200


def test_it_keeps_a_changed_demo_password_on_a_restart(db: None) -> None:
    run()
    demo = User.objects.get(username="demo")
    demo.set_password("chosen-by-the-team")
    demo.save()
    output = run()
    demo.refresh_from_db()
    assert demo.check_password("chosen-by-the-team")
    assert "trainyard-demo" not in output and "the password you set" in output


def test_the_demo_project_may_use_the_demo_cluster_and_gets_its_jobs(
    db: None, settings, tmp_path
) -> None:
    """`make run`: demo_user, then demo_cluster registers `demo` and seeds the demo jobs in the
    project `demo`, which may use that cluster (Project.clusters); a restart keeps it so."""
    settings.VAR_DIR = tmp_path
    run()
    with SimCluster(nodes=1, gpus_per_node=1) as sim:
        DemoCluster(stdout=StringIO()).register(sim, seed=True)
    project = Project.objects.get(name="demo")
    assert list(project.clusters.values_list("name", flat=True)) == ["demo"]
    children = sum(len(workflow["jobs"]) for workflow in DEMO_WORKFLOWS)
    assert project.jobs.filter(cluster__name="demo").count() == len(DEMO_JOBS) + children
    run()
    assert list(project.clusters.values_list("name", flat=True)) == ["demo"]
