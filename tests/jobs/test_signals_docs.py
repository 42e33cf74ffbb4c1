"""The standard-library client of docs/api.md ("Signals") works as printed, over HTTP, against
a live console, with only the variables a pod is given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobs.models import Job, Signal

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return next(block for block in blocks if "TRAINYARD_SIGNAL_URL" in block)


@pytest.mark.django_db(transaction=True)
def test_the_documented_python_client_posts_signals(signalling_job: Job) -> None:
    exec(compile(example(), "docs/api.md", "exec"), {})  # the documented code, as printed
    kinds = list(
        Signal.objects.filter(job=signalling_job).order_by("seq").values_list("kind", flat=True)
    )
    assert kinds == ["phase", "progress", "completion"]
