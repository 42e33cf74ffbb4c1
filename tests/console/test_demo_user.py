"""`manage.py demo_user`, which `make run` runs on every start: the banner names the real port,
and a restart keeps the demo password and every open session."""

from __future__ import annotations

from io import StringIO

from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from console.models import Membership


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
