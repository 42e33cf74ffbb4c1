"""The standard-library client of docs/api.md ("Signals") works as printed, over HTTP, against
a live console, with only the variables a pod is given."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from console.models import Cluster
from jobs.models import Job, Signal
from jobs.signals import signal_token

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return next(block for block in blocks if "TRAINYARD_SIGNAL_URL" in block)


@pytest.mark.django_db(transaction=True)
def test_the_documented_python_client_posts_signals(
    alice: User, cluster: Cluster, live_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.clear()
    job = Job.objects.create(
        project=alice.memberships.get().project, cluster=cluster, name="ppo", namespace="default",
        spec={"tasks": []},
    )  # fmt: skip
    for name, value in {
        "TRAINYARD_SIGNAL_URL": f"{live_server.url}/api/v1/jobs/{job.pk}/signals",
        "TRAINYARD_SIGNAL_TOKEN": signal_token(job.pk, job.run),
        "TRAINYARD_POD": "ppo-head-0",
        "TRAINYARD_POD_UID": "uid-0",
    }.items():
        monkeypatch.setenv(name, value)
    exec(compile(example(), "docs/api.md", "exec"), {})  # the documented code, as printed
    kinds = list(Signal.objects.filter(job=job).order_by("seq").values_list("kind", flat=True))
    assert kinds == ["phase", "progress", "completion"]
