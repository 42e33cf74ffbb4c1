"""The image's recipe (Dockerfile, .dockerignore) and the one-machine stack (docker-compose.yml)
say what docs/operations.md, "Deploying", says. No container engine runs here: `make image-check`
(deploy/check_image.py, also run by CI) carries the Dockerfile out in a fresh virtualenv and
starts its web process; these checks are the fast part."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def instructions() -> list[tuple[str, str]]:
    spec = importlib.util.spec_from_file_location("check_image", ROOT / "deploy" / "check_image.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: list[tuple[str, str]] = module.instructions()
    return found


def stages() -> list[list[tuple[str, str]]]:
    split: list[list[tuple[str, str]]] = []
    for instruction, arguments in instructions():
        if instruction == "FROM":
            split.append([])
        split[-1].append((instruction, arguments))
    return split


def test_it_builds_in_one_stage_and_runs_another_on_the_same_python() -> None:
    build, runtime = stages()
    bases = [stage[0][1].split(" AS ")[0] for stage in (build, runtime)]
    assert bases[0] == bases[1] and bases[0].startswith("python:3.12-")  # the venv moves as is
    runs = [arguments for instruction, arguments in build if instruction == "RUN"]
    assert runs == [
        "sh /build/build.sh venv /opt/venv /build/requirements.txt",
        "sh /build/build.sh app /opt/venv /app",
    ]
    assert ("COPY", "--from=build /opt/venv /opt/venv") in runtime
    assert ("COPY", "--from=build /app /app") in runtime


def test_it_runs_as_an_unprivileged_user_with_production_settings() -> None:
    runtime = dict(stages()[1])
    assert runtime["USER"] == "10001:10001"
    assert "--uid 10001" in runtime["RUN"]
    assert json.loads(runtime["CMD"]) == [
        "gunicorn",
        "-c",
        "deploy/gunicorn.conf.py",
        "console.wsgi",
    ]
    env = dict(pair.split("=", 1) for pair in runtime["ENV"].split())
    assert env["TRAINYARD_DEBUG"] == "false"
    assert env["TRAINYARD_STATIC_ROOT"] == "/app/staticfiles"  # not static/, the sources
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")  # writable: an emptyDir


def test_it_leaves_local_state_out_of_the_build_context() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "var", "tests"} <= set(ignored)


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_it_composes_postgresql_redis_migrations_web_one_worker_and_one_beat() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "migrate", "web", "worker", "beat"}
    worker = services["worker"]["command"]
    assert worker[worker.index("-Q") + 1] == "default,sync,reconcile"
    assert services["beat"]["command"][:4] == ["celery", "-A", "console", "beat"]
    assert "deploy" not in services["beat"]  # never scaled
    assert "--appendonly" in services["redis"]["command"]
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    for name in ("web", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert services[name]["environment"]["REDIS_URL"].startswith("redis://redis:")
