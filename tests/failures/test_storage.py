"""Where kept logs are stored (docs/failures.md §Storage): a directory by default (`make run`, CI),
an S3-compatible bucket in production (TRAINYARD_LOG_STORAGE=s3, deploy/console/), configured
from the environment and the Secret's files. The storage object is built as Django builds it,
in a process started with those variables; nothing is sent to a bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

# The kept_logs storage a process builds from its environment (django.core.files.storage).
REPORT = """
import json, django
django.setup()
from django.core.files.storage import storages
found = storages["kept_logs"]
names = ("bucket_name", "location", "endpoint_url", "region_name", "access_key", "secret_key",
         "addressing_style", "file_overwrite", "default_acl", "base_location")
print(json.dumps({"class": type(found).__module__ + "." + type(found).__name__}
                 | {n: getattr(found, n) for n in names if hasattr(found, n)}, default=str))
"""


def storage_with(**env: str) -> dict[str, Any]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_LOG_")}
    done = subprocess.run(
        [sys.executable, "-c", REPORT], cwd=settings.BASE_DIR, capture_output=True, text=True,
        env=kept | {"DJANGO_SETTINGS_MODULE": "console.settings"} | env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_it_stores_kept_logs_in_a_directory_under_the_var_dir_by_default(tmp_path: Path) -> None:
    found = storage_with(TRAINYARD_VAR_DIR=str(tmp_path))
    assert found["class"] == "django.core.files.storage.filesystem.FileSystemStorage"
    assert found["base_location"] == str(tmp_path / "kept-logs")


def test_it_stores_them_in_an_s3_bucket_configured_from_the_environment(tmp_path: Path) -> None:
    secret = tmp_path / "s3-secret-access-key"
    secret.write_text("s3cr3t-from-the-secret\n")
    found = storage_with(
        TRAINYARD_VAR_DIR=str(tmp_path),
        TRAINYARD_LOG_STORAGE="s3",
        TRAINYARD_LOG_S3_BUCKET="trainyard-kept-logs",
        TRAINYARD_LOG_S3_ENDPOINT_URL="https://minio.example.org:9000",
        TRAINYARD_LOG_S3_REGION="eu-central-1",
        TRAINYARD_LOG_S3_ADDRESSING_STYLE="path",
        TRAINYARD_LOG_S3_ACCESS_KEY_ID="AKIAEXAMPLE",
        TRAINYARD_LOG_S3_SECRET_ACCESS_KEY_FILE=str(secret),
    )
    assert found["class"] == "storages.backends.s3.S3Storage"
    assert found["bucket_name"] == "trainyard-kept-logs" and found["location"] == "kept-logs"
    assert found["endpoint_url"] == "https://minio.example.org:9000"
    assert found["region_name"] == "eu-central-1" and found["addressing_style"] == "path"
    assert (found["access_key"], found["secret_key"]) == ("AKIAEXAMPLE", "s3cr3t-from-the-secret")
    assert found["file_overwrite"] is True and found["default_acl"] is None


def test_it_leaves_the_credentials_to_boto3_when_none_are_given(tmp_path: Path) -> None:
    found = storage_with(
        TRAINYARD_VAR_DIR=str(tmp_path), TRAINYARD_LOG_STORAGE="s3",
        TRAINYARD_LOG_S3_BUCKET="logs",
    )  # fmt: skip
    assert found["bucket_name"] == "logs" and found["endpoint_url"] is None
    # django-storages then reads AWS_* settings, boto3 its environment or a role
    assert not found["access_key"] and not found["secret_key"]


def test_it_refuses_s3_without_a_bucket(tmp_path: Path) -> None:
    kept = {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_LOG_")}
    done = subprocess.run(
        [sys.executable, "-c", REPORT], cwd=settings.BASE_DIR, capture_output=True, text=True,
        env=kept | {"DJANGO_SETTINGS_MODULE": "console.settings", "TRAINYARD_VAR_DIR":
                    str(tmp_path), "TRAINYARD_LOG_STORAGE": "s3"}, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "needs TRAINYARD_LOG_S3_BUCKET" in done.stderr
