"""console.lookups: `any_of` selects the rows `__in` selects, with the list as one parameter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db.models import Q

from console.lookups import array_literal
from console.models import Cluster, Node, Project
from jobs.models import Job, Task

pytestmark = pytest.mark.django_db
AT = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
ODD_NAMES = ['quote"d', "apos'trophe", "back\\slash", "\\", '\\"', "NULL", "", " pad ",
             "{braced}", "a,b", "ünï€", "new\nline"]  # fmt: skip


def _job(project: Project, cluster: Cluster, n: int) -> Job:
    return Job.objects.create(
        project=project, cluster=cluster, name=f"j{n}", namespace="rl", spec={"tasks": []}
    )


def test_it_selects_what_in_selects_by_key_and_through_a_relation(
    project: Project, cluster: Cluster
) -> None:
    jobs = [_job(project, cluster, n) for n in range(5)]
    for job in jobs:
        Task.objects.create(job=job, role="worker", kind="StatefulSet", template={})
    wanted = {jobs[0].pk, jobs[3].pk, 10**9}
    by_pk = Job.objects.filter(pk__any_of=wanted).values_list("pk", flat=True)
    by_key = Task.objects.filter(job_id__any_of=wanted).values_list("job_id", flat=True)
    through = Task.objects.filter(job__name__any_of=["j0", "j3"]).values_list("job_id", flat=True)
    expected = sorted(Job.objects.filter(pk__in=wanted).values_list("pk", flat=True))
    assert sorted(by_pk) == sorted(by_key) == sorted(through) == expected
    assert not Job.objects.filter(pk__any_of=[]).exists()
    either = Job.objects.filter(Q(pk__any_of=[]) | Q(name="j1")).values_list("name", flat=True)
    assert list(either) == ["j1"]


def test_an_empty_list_asks_the_database_nothing(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        assert list(Job.objects.filter(pk__any_of=set())) == []


def test_it_sends_one_parameter_whatever_the_length() -> None:
    def compiled(values: list[int]) -> tuple[str, tuple[object, ...]]:
        query = Job.objects.filter(pk__any_of=values).values_list("pk").query
        return query.get_compiler(using="default").as_sql()

    (short, short_params), (long, long_params) = compiled([1, 2]), compiled([*range(1, 900)])
    assert short == long
    assert len(short_params) == len(long_params) == 1


def test_it_matches_strings_as_they_are(cluster: Cluster) -> None:
    for name in ODD_NAMES:
        Node.objects.create(cluster=cluster, name=name, observed_at=AT)
    found = Node.objects.filter(name__any_of=ODD_NAMES[:6]).values_list("name", flat=True)
    assert sorted(found) == sorted(ODD_NAMES[:6])
    assert set(Node.objects.filter(name__any_of=ODD_NAMES).values_list("name", flat=True)) == set(
        ODD_NAMES
    )
    assert not Node.objects.filter(name__any_of=["quote", "back"]).exists()


@pytest.mark.parametrize("values", [[True], [None], [1.5], "abc", 7])
def test_it_refuses_anything_but_a_collection_of_ints_or_strings(values: object) -> None:
    with pytest.raises(TypeError):
        Job.objects.filter(pk__any_of=values)


def test_the_array_literal_quotes_as_postgresql_reads_it() -> None:
    assert array_literal([1, 22, 333]) == "{1,22,333}"
    assert array_literal(["a", 'b"c', "d\\e"]) == '{"a","b\\"c","d\\\\e"}'
    # a control character JSON would escape (read as a letter in an array literal): the list
    assert array_literal(["new\nline"]) == ["new\nline"]
    assert array_literal(["\\\n"]) == ["\\\n"]
