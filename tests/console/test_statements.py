"""console.statements: a query compiled once answers as the ORM does, for every value."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore as DjangoSessionStore
from django.db.models import Q
from django.utils import timezone

from console.models import Cluster, Membership, Project
from console.session_store import SessionStore
from console.statements import Statement
from jobs.models import Job, WorkloadReport

pytestmark = pytest.mark.django_db


def test_it_answers_as_the_orm_for_each_value_converting_as_the_orm_does(
    project: Project, cluster: Cluster
) -> None:
    now = timezone.now()
    jobs = [
        Job.objects.create(project=project, cluster=cluster, name=f"j{n}", namespace="rl",
                           spec={"tasks": [], "n": n}, run=n + 1)
        for n in range(3)
    ]  # fmt: skip
    WorkloadReport.objects.create(
        job=jobs[1], run=2, first_received_at=now, last_received_at=now, latest={"a": [1]}
    )
    fields = ("pk", "name", "run", "spec", "created_at", "stopped", "cluster__name")
    by_pk = Statement(lambda pk: Job.objects.filter(pk=pk).values_list(*fields), int)
    by_name = Statement(
        lambda name, run: Job.objects.filter(name=name, run__gte=run).values_list("pk"), str, int
    )
    report = Statement(
        lambda pk: WorkloadReport.objects.filter(job_id=pk).values_list(
            "latest", "last_received_at"
        ),
        int,
    )
    for job in jobs:
        assert by_pk.rows(job.pk) == list(Job.objects.filter(pk=job.pk).values_list(*fields))
        assert by_name.first(job.name, job.run) == (job.pk,)
        assert by_name.first(job.name, job.run + 1) is None
        assert report.rows(job.pk) == list(
            WorkloadReport.objects.filter(job_id=job.pk).values_list("latest", "last_received_at")
        )
    assert report.first(jobs[1].pk) == ({"a": [1]}, now)
    assert by_pk.rows(0) == []


def test_it_passes_a_datetime_as_the_orm_does(project: Project, cluster: Cluster) -> None:
    jobs = [
        Job.objects.create(project=project, cluster=cluster, name=f"j{n}", namespace="rl",
                           spec={"tasks": []})
        for n in range(3)
    ]  # fmt: skip
    created = Statement(
        lambda project_id, moment: (
            Job.objects.filter(project_id=project_id, created_at__lte=moment)
            .order_by("pk")
            .values_list("pk")
        ),
        int,
        datetime,
    )
    for job in jobs:
        assert created.rows(project.pk, job.created_at) == list(
            Job.objects.filter(created_at__lte=job.created_at).order_by("pk").values_list("pk")
        )
    assert created.rows(project.pk, jobs[0].created_at - timedelta(microseconds=1)) == []


def test_it_passes_a_list_as_any_of_does_and_an_empty_one_matches_nothing(
    project: Project, cluster: Cluster
) -> None:
    jobs = [
        Job.objects.create(project=project, cluster=cluster, name=f"j{n}", namespace="rl",
                           spec={"tasks": []})
        for n in range(3)
    ]  # fmt: skip
    among = Statement(
        lambda project_id, pks, names: (
            Job.objects.filter(project_id=project_id, pk__any_of=pks)
            .exclude(name__any_of=names)
            .order_by("pk")
            .values_list("pk")
        ),
        int,
        list[int],
        list[str],
    )
    assert among.rows(project.pk, {jobs[0].pk, jobs[2].pk}, ["j2", 'a "quoted" name']) == [
        (jobs[0].pk,)
    ]
    assert among.rows(project.pk, [job.pk for job in jobs], []) == [(job.pk,) for job in jobs]
    assert among.rows(project.pk, [], ["j0"]) == []
    either = Statement(
        lambda pks, name: Job.objects.filter(Q(pk__any_of=pks) | Q(name=name)).values_list("pk"),
        list[int],
        str,
    )
    assert either.rows([], "j1") == [(jobs[1].pk,)]  # as the ORM drops an empty any_of there
    assert sorted(either.rows([jobs[0].pk], "j1")) == [(jobs[0].pk,), (jobs[1].pk,)]


def test_it_keeps_the_query_s_own_constants(alice: User, project: Project) -> None:
    roles = Statement(
        lambda user: Membership.objects.filter(user_id=user, role="member").values_list(
            "project_id"
        ),
        int,
    )
    assert roles.rows(alice.pk) == [(project.pk,)]
    Membership.objects.filter(user=alice).update(role="viewer")
    assert roles.rows(alice.pk) == []


def test_it_refuses_a_query_that_changes_a_value_before_the_database_sees_it(db: None) -> None:
    contains = Statement(
        lambda name: Job.objects.filter(name__contains=name).values_list("pk"), str
    )
    with pytest.raises(ValueError, match="every value must reach the query unchanged"):
        contains.rows("j")


def test_its_sessions_are_django_s_and_an_expired_one_is_gone(db: None) -> None:
    session = DjangoSessionStore()
    session["who"] = "alice"
    session.create()
    assert SessionStore(session.session_key).load() == {"who": "alice"}
    expired = SessionStore(session.session_key)
    session.model.objects.filter(session_key=session.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    assert expired.load() == {} and expired.session_key is None
    assert SessionStore("no-such-key").load() == {}
