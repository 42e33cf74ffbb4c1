"""The API never answers 500, whatever arrives: schemathesis generates requests from our own
OpenAPI document (valid and invalid bodies, parameters and ids) and sends them as alice, a member
of the project, with her token.

The suite runs a CI-sized sample. A full run sets TRAINYARD_FUZZ_EXAMPLES (examples per
operation; 14 operations) and prints how many cases it sent, e.g.
`TRAINYARD_FUZZ_EXAMPLES=700 pytest tests/jobs/test_api_fuzz.py -s` for more than 10,000 cases.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from console.models import ApiToken, Cluster
from console.wsgi import application
from jobs.models import Job, Workflow
from jobs.operations import create_job
from jobs.spec import parse_job_spec
from tests.jobs.test_spec import job_data

EXAMPLES = int(os.environ.get("TRAINYARD_FUZZ_EXAMPLES", "12"))
SAMPLE = EXAMPLES <= 12
# The coverage phase sends some fifty boundary cases per operation whatever max_examples is: a
# full run has it, the suite's sample keeps to the examples and fuzzing phases.
CONFIG = SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": not SAMPLE}}})
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application, config=CONFIG)
statuses: Counter[int] = Counter()


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    """How many cases were sent and what came back, for the closing note of a full run."""
    yield
    print(f"\nschemathesis: {statuses.total()} cases, statuses {dict(sorted(statuses.items()))}")


@pytest.fixture(autouse=True)
def keep_the_test_connection() -> Iterator[None]:
    """Requests go through the WSGI handler, which closes the database connection as a request
    starts and ends; Django's test client disconnects that too (the test's transaction is open)."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def token(alice: User, cluster: Cluster) -> str:
    """alice's token; she has a Job that generated ids sometimes point at."""
    create_job(alice, parse_job_spec(job_data(), alice))
    return ApiToken.issue(alice, name="fuzz")[1]


def _aim_at_real_objects(case: schemathesis.Case) -> None:
    """An even generated id becomes a real one: stop, resume, clone and delete then meet an
    existing Job (and a Workflow, once one was created) instead of a 404."""
    params = case.path_parameters or {}
    for name, model in (("job_id", Job), ("workflow_id", Workflow)):
        value = params.get(name)
        real = model.objects.order_by("pk").values_list("pk", flat=True).first()
        if isinstance(value, int) and value % 2 == 0 and real is not None:
            params[name] = real


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=SAMPLE,  # the suite's sample is the same on every run
    suppress_health_check=list(HealthCheck),
)
def test_it_never_answers_500(case: schemathesis.Case, token: str) -> None:
    _aim_at_real_objects(case)
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    statuses[response.status_code] += 1
    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])
