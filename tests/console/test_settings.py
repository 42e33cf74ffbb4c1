"""Settings come from the environment; a bad value stops start-up with the variable's name."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet

from console.settings import ConfigError, database_from_url, env_bool, env_int, pod_user, public_url


def start(**environ: str) -> subprocess.CompletedProcess[str]:
    """Loads the settings in a fresh interpreter, as a process start-up would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_")} | environ
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_it_starts_on_the_embedded_defaults() -> None:
    assert start().stdout.strip() == "True"


def test_it_refuses_to_start_without_a_secret_key_when_not_debugging() -> None:
    result = start(TRAINYARD_DEBUG="false")
    assert result.returncode != 0
    assert "TRAINYARD_SECRET_KEY is required" in result.stderr


def test_it_starts_in_production_mode_with_a_secret_key_file(tmp_path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t-" * 8 + "\n")
    keys = tmp_path / "keys"
    keys.write_text(f"{Fernet.generate_key().decode()},{Fernet.generate_key().decode()}\n")
    result = start(
        TRAINYARD_DEBUG="false",
        TRAINYARD_SECRET_KEY_FILE=str(secret),
        TRAINYARD_FIELD_KEYS_FILE=str(keys),
    )
    assert result.stdout.strip() == "False", result.stderr


def test_it_refuses_to_start_in_production_without_field_keys(tmp_path) -> None:
    result = start(TRAINYARD_DEBUG="false", TRAINYARD_SECRET_KEY="s3cr3t-" * 8)
    assert result.returncode != 0
    assert "TRAINYARD_FIELD_KEYS is required" in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TRAINYARD_DEBUG", "yes", "TRAINYARD_DEBUG must be true, false, 1 or 0, not 'yes'"),
        ("TRAINYARD_SYNC_INTERVAL", "ten", "TRAINYARD_SYNC_INTERVAL must be a whole number"),
        ("TRAINYARD_SYNC_INTERVAL", "0", "TRAINYARD_SYNC_INTERVAL must be at least 1"),
        ("DATABASE_URL", "mysql://x/y", "DATABASE_URL must start with postgres:// or sqlite://"),
        (
            "TRAINYARD_DIAGNOSTICS",
            "everyone",
            "TRAINYARD_DIAGNOSTICS must be one of operators, members, not 'everyone'",
        ),
        ("TRAINYARD_FIELD_KEYS", "not-a-key", "TRAINYARD_FIELD_KEYS: key 1 is not a Fernet key"),
        (
            "TRAINYARD_LOG_LEVEL",
            "loud",
            "TRAINYARD_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, not 'loud'",
        ),
        ("TRAINYARD_LOG_DETAIL", "yes", "TRAINYARD_LOG_DETAIL must be true, false, 1 or 0"),
    ],
)
def test_a_bad_value_is_a_clear_startup_error(name: str, value: str, message: str) -> None:
    result = start(**{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_helpers_parse_strictly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "1")
    monkeypatch.setenv("X_COUNT", "12")
    assert env_bool("X_FLAG", False) is True
    assert env_int("X_COUNT", 3) == 12
    monkeypatch.setenv("X_FLAG", "on")
    with pytest.raises(ConfigError):
        env_bool("X_FLAG", False)


def test_database_urls() -> None:
    assert database_from_url("postgres://u:p%40ss@db:5433/ty") | {} == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "ty",
        "USER": "u",
        "PASSWORD": "p@ss",
        "HOST": "db",
        "PORT": "5433",
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }
    assert database_from_url("sqlite:////tmp/x.sqlite3")["NAME"] == "/tmp/x.sqlite3"


def test_it_keeps_a_generated_secret_key_in_the_var_dir_across_restarts(tmp_path) -> None:
    """Sessions outlive a restart of `make run`; the key is the machine's own, not a public one."""
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.SECRET_KEY)"
    )

    def key() -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_")}
        env["TRAINYARD_VAR_DIR"] = str(tmp_path)
        result = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
        )
        return result.stdout.strip()

    first = key()
    assert len(first) >= 50
    assert key() == first == (tmp_path / "secret_key").read_text()
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0
    assert list(tmp_path.glob("secret_key.*")) == []


@pytest.mark.parametrize(
    "value",
    ["console.example", "ftp://console.example", "https://", "https://c.example/?x=1",
     "https://c.example/#top", "https://user:pw@c.example"],
)  # fmt: skip
def test_the_public_url_is_an_absolute_http_url_without_extras(value: str) -> None:
    with pytest.raises(ConfigError, match="TRAINYARD_PUBLIC_URL"):
        public_url(value, debug=True)


def test_the_public_url_defaults_to_the_dev_server_only_when_debugging() -> None:
    assert public_url("", debug=True) == "http://127.0.0.1:8000"
    assert public_url("", debug=False) == ""
    assert (
        public_url("https://console.example/yard/", debug=False) == "https://console.example/yard"
    )


@pytest.mark.parametrize("value", ["0", "-1", "root", "1000x", ""])
def test_the_pod_user_is_an_id_above_zero_image_or_any(value: str) -> None:
    with pytest.raises(ConfigError, match="TRAINYARD_POD_USER"):
        pod_user(value)


def test_the_pod_user_accepts_an_id_image_and_any() -> None:
    assert [pod_user(v) for v in ("1000", "65532", "image", "any")] == [
        "1000", "65532", "image", "any",
    ]  # fmt: skip
