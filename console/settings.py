"""Trainyard settings: one file, read from the environment, with embedded defaults.

Project variables are named TRAINYARD_* (or DATABASE_URL / REDIS_URL): the Celery CLI would read
any CELERY_* variable as one of its own options.
"""

import base64
import binascii
import ipaddress
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse, urlsplit

from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent


class ConfigError(Exception):
    """A bad environment value: raised at start-up with the variable's name."""


def env(name: str, default: str = "") -> str:
    """The value of NAME, or of the file named by NAME_FILE (for secrets), or the default."""
    if f"{name}_FILE" in os.environ:
        return Path(os.environ[f"{name}_FILE"]).read_text().strip()
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    value = env(name, "true" if default else "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise ConfigError(f"{name} must be true, false, 1 or 0, not {value!r}")
    return value in ("true", "1")


def env_int(name: str, default: int, minimum: int = 0) -> int:
    value = env(name, str(default))
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, not {number}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env(name, default)
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def prometheus_url(value: str) -> str:
    """TRAINYARD_PROMETHEUS_URL: empty (no utilisation), or an http(s) URL of a Prometheus."""
    if value and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
        raise ConfigError(f"TRAINYARD_PROMETHEUS_URL must be an http:// or https:// URL: {value!r}")
    return value.rstrip("/")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The loggers that write a line for every Celery task received and done, every beat tick, every
# reconcile and every request to the development server (runserver): per-task and per-request
# detail, held at WARNING so that their warnings and errors (a failed task, a 4xx, a 5xx) are
# still logged. urllib3 warns of each retried connection to a cluster, which the sync's summary
# of that cycle says in the console's words: held at ERROR.
DETAIL_LOGGERS = {
    "celery.worker.strategy": "WARNING",
    "celery.app.trace": "WARNING",
    "celery.beat": "WARNING",
    "console.engine.one_job": "WARNING",
    "django.server": "WARNING",
    "urllib3.connectionpool": "ERROR",
}


def log_level(value: str) -> str:
    """TRAINYARD_LOG_LEVEL: a level name of Python's logging, in either case."""
    if value.upper() not in LOG_LEVELS:
        raise ConfigError(
            f"TRAINYARD_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, not {value!r}"
        )
    return value.upper()


def detail_loggers(detail: bool, level: str) -> dict[str, dict[str, Any]]:
    """The detail loggers held back, or let through from INFO (DEBUG at that level).

    Django's own loggers are sent to the root's handler (and its format: JSON lines too)
    instead of the handlers Django gives them, which this configuration removes: the
    development server's, and the one that printed each of Django's lines a second time while
    debugging."""
    shown = "DEBUG" if level == "DEBUG" else "INFO"
    config: dict[str, dict[str, Any]] = {
        name: {"level": shown if detail else held} for name, held in DETAIL_LOGGERS.items()
    }
    config["django.server"]["propagate"] = True
    config["django"] = {"level": "INFO"}  # as Django sets it: no SQL statements at DEBUG
    return config


def proxy_networks(value: str) -> list[str]:
    """TRAINYARD_TRUSTED_PROXIES: addresses or networks (CIDR) of the reverse proxies whose
    X-Forwarded-For is believed; each is checked here."""
    networks = [item.strip() for item in value.split(",") if item.strip()]
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ConfigError(
                f"TRAINYARD_TRUSTED_PROXIES: {network!r} is not an IP address or network"
            ) from None
    return networks


def notify_networks(value: str) -> list[str]:
    """TRAINYARD_NOTIFY_ALLOWED_NETWORKS: CIDRs that notification requests may reach although
    private or loopback (notify.outbound); each is checked here."""
    networks = [item.strip() for item in value.split(",") if item.strip()]
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ConfigError(
                f"TRAINYARD_NOTIFY_ALLOWED_NETWORKS: {network!r} is not an IP network"
            ) from None
    return networks


def mailers(url: str) -> dict[str, dict[str, Any]]:
    """Django 6.1's MAILERS from TRAINYARD_EMAIL_URL: `smtp://user:password@host:port`, or
    `smtps://...` for TLS from the first byte. Unset: Django's old default, the SMTP server of
    localhost, which the e-mail channels do not use (they say mail is not configured)."""
    parts = urlsplit(url or "smtp://localhost:25")
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ConfigError(
            "TRAINYARD_EMAIL_URL must be smtp://user:password@host:port or smtps://..."
        )
    secure = parts.scheme == "smtps"
    options = {
        "host": parts.hostname,
        "port": parts.port or (465 if secure else 25),
        "username": unquote(parts.username or ""),
        "password": unquote(parts.password or ""),
        "use_ssl": secure,
        "timeout": 10,
    }
    return {
        "default": {"BACKEND": "django.core.mail.backends.smtp.EmailBackend", "OPTIONS": options}
    }


def public_url(value: str, debug: bool) -> str:
    """TRAINYARD_PUBLIC_URL: how pods reach the console (their signals go to it). An absolute
    http(s) URL without query or fragment. In debug mode the development server's address is
    the default; out of it, unset means pods are given no signal URL (docs/decisions.md)."""
    if not value:
        return "http://127.0.0.1:8000" if debug else ""
    parts = urlparse(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"TRAINYARD_PUBLIC_URL must be an http(s) URL with a host, not {value!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(
            f"TRAINYARD_PUBLIC_URL must have no query, fragment or credentials, not {value!r}"
        )
    return value.rstrip("/")


def pod_user(value: str) -> str:
    """TRAINYARD_POD_USER: the user a Job's containers run as (console.kube.manifests.security).
    A user ID (default 1000), `image` (the image's own user, which must not be root), or `any`
    (root allowed: the pods then meet only the "baseline" Pod Security level)."""
    if value in ("image", "any") or (value.isdigit() and int(value) > 0):
        return value
    raise ConfigError(f"TRAINYARD_POD_USER must be a user ID above 0, image or any, not {value!r}")


def proxy_ssl_header(value: str) -> tuple[str, str] | None:
    """TRAINYARD_SECURE_PROXY_SSL_HEADER names the header by which the proxy says the request
    came over HTTPS (e.g. X-Forwarded-Proto); its value must then be `https`."""
    if not value:
        return None
    if not re.fullmatch(r"[A-Za-z0-9-]+", value):
        raise ConfigError(f"TRAINYARD_SECURE_PROXY_SSL_HEADER must be a header name, not {value!r}")
    return ("HTTP_" + value.upper().replace("-", "_"), "https")


def database_from_url(url: str) -> dict[str, object]:
    """DATABASE_URL as postgres://user:pass@host:port/name or sqlite:///path."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute/path.db, as dj-database-url reads them.
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": parsed.path[1:] or ":memory:"}
    if parsed.scheme not in ("postgres", "postgresql"):
        raise ConfigError(f"DATABASE_URL must start with postgres:// or sqlite://, not {url!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parsed.path.lstrip("/"),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


def fernet_key() -> str:
    """A new key for TRAINYARD_FIELD_KEYS: 32 random bytes, URL-safe base64 (Fernet's form)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def field_keys(value: str) -> list[str]:
    """TRAINYARD_FIELD_KEYS: comma-separated Fernet keys, newest first, each checked here."""
    keys = [key.strip() for key in value.split(",") if key.strip()]
    for position, key in enumerate(keys, 1):
        try:
            valid = len(base64.urlsafe_b64decode(key.encode())) == 32
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise ConfigError(
                f"TRAINYARD_FIELD_KEYS: key {position} is not a Fernet key (32 bytes in URL-safe "
                "base64; make one with `manage.py rotate_keys --new-key`)"
            )
    return keys


def secret_key_in(path: Path, make: Callable[[], str] = lambda: secrets.token_urlsafe(50)) -> str:
    """The key kept in PATH, made on first start: sessions and signed values outlive a restart.

    Written to a file of its own and linked into place, so that processes starting together all
    read one complete key (a reader never sees a half-written file, and the first link wins).
    """
    if not path.exists():
        draft = path.with_name(f"{path.name}.{os.getpid()}")
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(make())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


VAR_DIR = Path(env("TRAINYARD_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("TRAINYARD_DEBUG", True)
SECRET_KEY = env("TRAINYARD_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ConfigError("TRAINYARD_SECRET_KEY is required when TRAINYARD_DEBUG is false")
    SECRET_KEY = secret_key_in(VAR_DIR / "secret_key")
# Credentials at rest (console/encryption.py): the first key encrypts, every key decrypts.
TRAINYARD_FIELD_KEYS = field_keys(env("TRAINYARD_FIELD_KEYS"))
if not TRAINYARD_FIELD_KEYS:
    if not DEBUG:
        raise ConfigError("TRAINYARD_FIELD_KEYS is required when TRAINYARD_DEBUG is false")
    TRAINYARD_FIELD_KEYS = [secret_key_in(VAR_DIR / "field_key", fernet_key)]
ALLOWED_HOSTS = [
    h for h in env("TRAINYARD_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h
]
CSRF_TRUSTED_ORIGINS = [o for o in env("TRAINYARD_CSRF_TRUSTED_ORIGINS").split(",") if o]
# The port of `make run`'s web server (Procfile.dev), which its start-up banner prints.
TRAINYARD_PORT = env_int("TRAINYARD_PORT", 8000, minimum=1)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # serves Swagger UI's files for /api/v1/docs itself (no CDN)
    "console",
    "jobs",
    "workers",
    "notify",
    "failures",
    "usage",
    "simcluster",
]

# --- HTTPS, proxies, cookies (docs/operations.md "Security settings") ----------------------
# Safe by default once TRAINYARD_DEBUG is false; each can be changed by its variable.
SECURE_SSL_REDIRECT = env_bool("TRAINYARD_SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("TRAINYARD_SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TRAINYARD_SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("TRAINYARD_SECURE_HSTS_PRELOAD", not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("TRAINYARD_SECURE_COOKIES", not DEBUG)
SECURE_PROXY_SSL_HEADER = proxy_ssl_header(env("TRAINYARD_SECURE_PROXY_SSL_HEADER"))
TRAINYARD_TRUSTED_PROXIES = proxy_networks(env("TRAINYARD_TRUSTED_PROXIES"))
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy: nothing inline, nothing from elsewhere (templates need neither).
SECURE_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}

# Sessions: an idle timeout and an absolute one (console/sessions.py); background polling
# extends neither.
TRAINYARD_SESSION_IDLE_TIMEOUT = env_int("TRAINYARD_SESSION_IDLE_TIMEOUT", 8 * 3600, minimum=60)
TRAINYARD_SESSION_MAX_AGE = env_int("TRAINYARD_SESSION_MAX_AGE", 7 * 86400, minimum=60)
SESSION_COOKIE_AGE = TRAINYARD_SESSION_MAX_AGE
SESSION_ENGINE = "console.session_store"

# Failed logins allowed per account, and per client address (logins and API tokens), within
# the window (seconds), before attempts are refused (console/ratelimit.py).
TRAINYARD_LOGIN_FAILURES = env_int("TRAINYARD_LOGIN_FAILURES", 10, minimum=1)
TRAINYARD_LOGIN_FAILURES_PER_IP = env_int("TRAINYARD_LOGIN_FAILURES_PER_IP", 30, minimum=1)
TRAINYARD_LOGIN_WINDOW = env_int("TRAINYARD_LOGIN_WINDOW", 900, minimum=1)

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "console.audit.origin_middleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "console.sessions.session_timeout_middleware",
    "console.middleware.timezone_middleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.template.context_processors.tz",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.roles",
                "console.context_processors.poll",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'trainyard.sqlite3'}"))
}
if str(DATABASES["default"]["ENGINE"]).endswith("sqlite3"):
    # Several processes (web, worker, beat) share the file: WAL lets readers go on while one
    # writes, and writers wait for the lock instead of failing.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    }
    # A file, not memory, so that the tests' Celery worker process can open the same database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

# Celery: Redis when REDIS_URL is set, otherwise the embedded broker (console/broker.py): kombu's
# SQLAlchemy transport on a SQLite file under the var dir.
REDIS_URL = env("REDIS_URL")
CELERY_BROKER_URL = REDIS_URL or f"sqlite:///{VAR_DIR / 'broker.sqlite3'}"
CELERY_BROKER_TRANSPORT = None if REDIS_URL else "console.broker:Transport"
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
TRAINYARD_SYNC_INTERVAL = env_int("TRAINYARD_SYNC_INTERVAL", 10, minimum=1)
# A cluster whose last successful sync is older than this many intervals is shown as stale.
TRAINYARD_STALE_AFTER = env_int("TRAINYARD_STALE_AFTER", 3 * TRAINYARD_SYNC_INTERVAL, minimum=1)
TRAINYARD_KUBE_CONNECT_TIMEOUT = env_int("TRAINYARD_KUBE_CONNECT_TIMEOUT", 5, minimum=1)
TRAINYARD_KUBE_READ_TIMEOUT = env_int("TRAINYARD_KUBE_READ_TIMEOUT", 30, minimum=1)
# A cycle watches every stream for this long (seconds, the API's timeoutSeconds); the periodic
# relist compares everything with the cluster again (console.engine.observe).
TRAINYARD_WATCH_SECONDS = env_int("TRAINYARD_WATCH_SECONDS", 1, minimum=1)
TRAINYARD_RELIST_SECONDS = env_int("TRAINYARD_RELIST_SECONDS", 600, minimum=1)
# Who sees restart counts, exit codes and termination reasons (spec §Pod and Worker status: for
# authorised operators): "operators", or "members" to open them to the members of a Job's
# project too (jobs.diagnostics).
TRAINYARD_DIAGNOSTICS = env_choice("TRAINYARD_DIAGNOSTICS", "operators", ("operators", "members"))
# Signals from training pods (jobs.workload.intake, docs/api.md "Signals"): where pods post them,
# how many requests a pod may send per second, the largest body, and how long an exact duplicate is
# recognised after compaction may have removed its row.
TRAINYARD_PUBLIC_URL = public_url(env("TRAINYARD_PUBLIC_URL"), DEBUG)
# Notifications (docs/notifications.md): the networks their requests may reach although private,
# and the mail server of the e-mail channels.
TRAINYARD_NOTIFY_ALLOWED_NETWORKS = notify_networks(env("TRAINYARD_NOTIFY_ALLOWED_NETWORKS"))
# How long a job.failed message waits for the run's failure to be judged from the logs kept
# when it turned Failed (console.engine.keep_logs), so that it names it; then it goes without.
TRAINYARD_NOTIFY_FAILURE_WAIT_SECONDS = env_int("TRAINYARD_NOTIFY_FAILURE_WAIT_SECONDS", 60)
TRAINYARD_EMAIL_URL = env("TRAINYARD_EMAIL_URL")
TRAINYARD_EMAIL_FROM = env("TRAINYARD_EMAIL_FROM", "trainyard@localhost")
MAILERS = mailers(TRAINYARD_EMAIL_URL)
DEFAULT_FROM_EMAIL = TRAINYARD_EMAIL_FROM
TRAINYARD_SIGNAL_RATE = env_int("TRAINYARD_SIGNAL_RATE", 10, minimum=1)
TRAINYARD_SIGNAL_MAX_BYTES = env_int("TRAINYARD_SIGNAL_MAX_BYTES", 65_536, minimum=1024)
TRAINYARD_SIGNAL_PROGRESS_POINTS = env_int("TRAINYARD_SIGNAL_PROGRESS_POINTS", 8000, minimum=10)
TRAINYARD_SIGNAL_KEEP_SECONDS = env_int("TRAINYARD_SIGNAL_KEEP_SECONDS", 600, minimum=1)
# The extended resources counted as GPUs in a pod's requests and a Node's capacity (the GPU-hours
# ledger, docs/usage.md), comma-separated.
TRAINYARD_GPU_RESOURCES = tuple(
    name.strip()
    for name in env(
        "TRAINYARD_GPU_RESOURCES", "nvidia.com/gpu,amd.com/gpu,huawei.com/Ascend910"
    ).split(",")
    if name.strip()
)
# GPU utilisation from NVIDIA's DCGM exporter through Prometheus (docs/usage.md "Prometheus"):
# the server for every cluster that names none of its own (Cluster.prometheus_url), the range
# query's step and timeout in seconds, and the utilisation (percent) from which a progressing
# second counts as busy rather than low-utilisation.
TRAINYARD_PROMETHEUS_URL = prometheus_url(env("TRAINYARD_PROMETHEUS_URL"))
TRAINYARD_PROMETHEUS_STEP = env_int("TRAINYARD_PROMETHEUS_STEP", 15, minimum=1)
TRAINYARD_PROMETHEUS_TIMEOUT = env_int("TRAINYARD_PROMETHEUS_TIMEOUT", 5, minimum=1)
TRAINYARD_GPU_BUSY_PERCENT = env_int("TRAINYARD_GPU_BUSY_PERCENT", 30, minimum=1)
# How often the head pod's log of a Job with `progress_from_logs` is read for RLinf's progress.
TRAINYARD_LOG_PROGRESS_SECONDS = env_int("TRAINYARD_LOG_PROGRESS_SECONDS", 60, minimum=5)
# The pods' security context: the Pod Security "restricted" level unless `any` (docs/operations.md
# "Pod Security").
TRAINYARD_POD_USER = pod_user(env("TRAINYARD_POD_USER", "1000"))

# What a person reads by default: the console's own lines (a summary per sync cycle, a relist),
# every warning and error. A line for every Celery task, beat tick, reconcile and development-
# server request is detail, logged with TRAINYARD_LOG_DETAIL (docs/operations.md, "Logs").
TRAINYARD_LOG_LEVEL = log_level(env("TRAINYARD_LOG_LEVEL", "INFO"))
TRAINYARD_LOG_DETAIL = env_bool("TRAINYARD_LOG_DETAIL", TRAINYARD_LOG_LEVEL == "DEBUG")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": TRAINYARD_LOG_LEVEL},
    "loggers": detail_loggers(TRAINYARD_LOG_DETAIL, TRAINYARD_LOG_LEVEL),
}

# Logs kept before Kubernetes loses them (failures/, docs/failures.md): the newest KiB of each
# container run, for so many days, at most so many MiB (compressed) per project, the oldest evicted
# first; a deleted Job's kept logs go with it unless kept this many days after.
TRAINYARD_LOG_KEEP_KIB = env_int("TRAINYARD_LOG_KEEP_KIB", 1024, minimum=1)
TRAINYARD_LOG_KEEP_DAYS = env_int("TRAINYARD_LOG_KEEP_DAYS", 30, minimum=1)
TRAINYARD_LOG_KEEP_PROJECT_MIB = env_int("TRAINYARD_LOG_KEEP_PROJECT_MIB", 1024, minimum=1)
TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS = env_int("TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS", 0)


def kept_logs_storage(var_dir: Path) -> dict[str, Any]:
    """Where kept logs are stored (TRAINYARD_LOG_STORAGE): a directory under TRAINYARD_VAR_DIR
    (`make run`, CI: one machine), or an S3-compatible bucket (production: every web and worker
    pod reads what any of them wrote, and it outlives them), through django-storages. The
    credentials may come from files (a Secret); left out, boto3 finds its own (a role)."""
    if env_choice("TRAINYARD_LOG_STORAGE", "filesystem", ("filesystem", "s3")) == "filesystem":
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(var_dir / "kept-logs")},
        }
    bucket = env("TRAINYARD_LOG_S3_BUCKET")
    if not bucket:
        raise ConfigError("TRAINYARD_LOG_STORAGE=s3 needs TRAINYARD_LOG_S3_BUCKET, a bucket name")
    options = {
        "bucket_name": bucket,
        "location": env("TRAINYARD_LOG_S3_PREFIX", "kept-logs"),
        "endpoint_url": env("TRAINYARD_LOG_S3_ENDPOINT_URL") or None,
        "region_name": env("TRAINYARD_LOG_S3_REGION") or None,
        "addressing_style": env_choice(
            "TRAINYARD_LOG_S3_ADDRESSING_STYLE", "auto", ("auto", "path", "virtual")
        ),
        "access_key": env("TRAINYARD_LOG_S3_ACCESS_KEY_ID") or None,
        "secret_key": env("TRAINYARD_LOG_S3_SECRET_ACCESS_KEY") or None,
        "default_acl": None,  # the bucket's own: private
        "file_overwrite": True,  # failures.store names each run's text itself
    }
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}


KEPT_LOGS_STORAGE = kept_logs_storage(VAR_DIR)

CELERY_BEAT_SCHEDULE = {
    "sync-clusters": {
        "task": "console.tasks.sync_all_clusters",
        "schedule": float(TRAINYARD_SYNC_INTERVAL),
    },
    # The notifications' outbox (notify.deliver): retries become due, a digest's window frees.
    "notify-drain": {
        "task": "notify.tasks.drain_outbox",
        "schedule": 5.0,
        "options": {"expires": 5.0},
    },
    "resume-drains": {"task": "console.tasks.resume_drains", "schedule": 30.0},
    "observe-addons": {"task": "console.tasks.observe_addons", "schedule": 30.0},
    "evict-kept-logs": {"task": "console.tasks.evict_kept_logs", "schedule": 3600.0},
    "progress-from-logs": {
        "task": "console.tasks.read_progress_from_logs",
        "schedule": float(TRAINYARD_LOG_PROGRESS_SECONDS),
        "options": {"expires": float(TRAINYARD_LOG_PROGRESS_SECONDS)},
    },
}


# === Production: Celery under faults, probes, metrics, structured logs ============================
# Each setting of this block is explained in docs/operations.md (§Celery under faults, §Health and
# metrics, §Logs); tests/console/test_production_settings.py holds the two together.

# The longest one call to a cluster may take: connect, then read.
_KUBE_CALL_SECONDS = TRAINYARD_KUBE_CONNECT_TIMEOUT + TRAINYARD_KUBE_READ_TIMEOUT
# A sync (or a reconcile, a part of what a sync does) is asked to stop once it has run as long as
# the sync lease lasts (console.engine.cycle.lease_seconds: a few intervals and two slow calls
# and watches) ...
TRAINYARD_TASK_SOFT_TIME_LIMIT = 3 * TRAINYARD_SYNC_INTERVAL + 2 * (
    _KUBE_CALL_SECONDS + TRAINYARD_WATCH_SECONDS
)
# ... and killed if it has not, one more call later (time to release the lease on its way out).
TRAINYARD_TASK_TIME_LIMIT = TRAINYARD_TASK_SOFT_TIME_LIMIT + _KUBE_CALL_SECONDS
# A message a worker took comes back to the queue if not acknowledged within this time: above the
# longest a live worker can hold it (wait for one task in its process to end, then run its own).
TRAINYARD_BROKER_VISIBILITY_TIMEOUT = 2 * TRAINYARD_TASK_TIME_LIMIT

CELERY_TASK_DEFAULT_QUEUE = "default"
# Named routing keys: queues sharing one would each receive every message.
CELERY_TASK_QUEUES = [Queue(name, routing_key=name) for name in ("default", "sync", "reconcile")]
CELERY_TASK_ROUTES = {
    "console.tasks.sync_cluster": {"queue": "sync"},
    "console.tasks.reconcile_job": {"queue": "reconcile"},
}
_IDEMPOTENT_TASK = {
    "acks_late": True,
    "soft_time_limit": TRAINYARD_TASK_SOFT_TIME_LIMIT,
    "time_limit": TRAINYARD_TASK_TIME_LIMIT,
}
TRAINYARD_TICK_TIME_LIMIT = max(30, 3 * TRAINYARD_SYNC_INTERVAL)
CELERY_TASK_ANNOTATIONS = {
    "console.tasks.sync_cluster": _IDEMPOTENT_TASK,
    "console.tasks.reconcile_job": _IDEMPOTENT_TASK,
    # The tick only queues one message per cluster; a limit of a few intervals (at least 30 s)
    # ends one stuck on a broker that does not answer, without failing a slow first tick.
    "console.tasks.sync_all_clusters": {
        "soft_time_limit": TRAINYARD_TICK_TIME_LIMIT,
        "time_limit": 2 * TRAINYARD_TICK_TIME_LIMIT,
    },
    # A pass reads one bounded log tail per Job; one that hangs is ended like a sync, and a pass
    # that overlaps the next records nothing twice (jobs.workload.fallbacks).
    "console.tasks.read_progress_from_logs": {
        "soft_time_limit": TRAINYARD_TASK_SOFT_TIME_LIMIT,
        "time_limit": TRAINYARD_TASK_TIME_LIMIT,
    },
}
CELERY_BEAT_SCHEDULE["sync-clusters"]["options"] = {"expires": float(TRAINYARD_SYNC_INTERVAL)}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 3,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}
if REDIS_URL:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": TRAINYARD_BROKER_VISIBILITY_TIMEOUT,
        "unacked_restore_interval": 10,
        "unacked_restore_throttle": 1,
        "socket_connect_timeout": 5,
        "socket_timeout": 30,
        "health_check_interval": 10,
        "retry_on_timeout": True,
    }
# PostgreSQL: values bound by the server, and a statement run TRAINYARD_DB_PREPARE_THRESHOLD
# times on one connection prepared there, so the server plans it once per connection instead of
# on every request (a page poll's statements cost the server 1.5 ms of CPU, 0.3 ms prepared:
# docs/operations.md, "Configuration"). 0 turns preparing off: needed behind a pooler in
# transaction mode (PgBouncer before 1.21), where a connection's prepared statements vanish.
TRAINYARD_DB_PREPARE_THRESHOLD = env_int("TRAINYARD_DB_PREPARE_THRESHOLD", 5)
if str(DATABASES["default"]["ENGINE"]).endswith("postgresql"):
    DATABASES["default"]["OPTIONS"] = {
        "connect_timeout": 5,
        "server_side_binding": True,
        "prepare_threshold": TRAINYARD_DB_PREPARE_THRESHOLD or None,
    }

# /healthz, /readyz and /metrics are answered before any other middleware (console/health.py);
# request latency is measured around everything else (console/metrics.py).
MIDDLEWARE = [
    "console.health.endpoints_middleware",
    "console.metrics.latency_middleware",
    *MIDDLEWARE,
]
# A scrape of /metrics must carry `Authorization: Bearer <this>`; unset, /metrics is open and a
# network policy must guard it (docs/operations.md, "Health and metrics").
TRAINYARD_METRICS_TOKEN = env("TRAINYARD_METRICS_TOKEN")

TRAINYARD_LOG_FORMAT = env_choice("TRAINYARD_LOG_FORMAT", "text", ("text", "json"))
if (
    TRAINYARD_LOG_FORMAT == "json"
):  # one JSON object per line and event (console/structured_logging.py)
    LOGGING["formatters"] = {"json": {"()": "console.structured_logging.JsonFormatter"}}
    LOGGING["handlers"]["console"]["formatter"] = "json"  # type: ignore[index]

# Static files are served by the web process itself (whitenoise), from a directory the image
# fills at build time (`collectstatic`); out of debug mode under hashed names, cached for good.
STATIC_ROOT = Path(env("TRAINYARD_STATIC_ROOT", str(STATIC_ROOT)))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns of a missing one
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
    "whitenoise.middleware.WhiteNoiseMiddleware",
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
    "kept_logs": KEPT_LOGS_STORAGE,
}
