"""Deploy-time policies in the audit trail: the settings that decide who may see or do what
(diagnostics, the pods' user, session and login limits, trusted proxies, the signal rate, whether
/metrics asks for a token). They change with the environment of a deploy, not in a page, so the
beat process (one per installation) compares them at start with the last recorded ones and adds
a "Policy changed" event naming each change. Values are facts, never secrets: the metrics token
is only "set" or "unset".
"""

from __future__ import annotations

from django.conf import settings

from console import audit
from console.models import AuditEvent

TARGET = "settings"
IN_FORCE = "in force: "
POLICIES = (
    "TRAINYARD_DIAGNOSTICS",
    "TRAINYARD_POD_USER",
    "TRAINYARD_SESSION_IDLE_TIMEOUT",
    "TRAINYARD_SESSION_MAX_AGE",
    "TRAINYARD_LOGIN_FAILURES",
    "TRAINYARD_LOGIN_FAILURES_PER_IP",
    "TRAINYARD_LOGIN_WINDOW",
    "TRAINYARD_TRUSTED_PROXIES",
    "TRAINYARD_SIGNAL_RATE",
)


def in_force() -> dict[str, str]:
    values = {name: getattr(settings, name) for name in POLICIES}
    values["TRAINYARD_TRUSTED_PROXIES"] = ",".join(values["TRAINYARD_TRUSTED_PROXIES"]) or "none"
    values["TRAINYARD_METRICS_TOKEN"] = "set" if settings.TRAINYARD_METRICS_TOKEN else "unset"
    return {name.removeprefix("TRAINYARD_"): str(value) for name, value in values.items()}


def _parse(detail: str) -> dict[str, str]:
    _, _, state = detail.partition(IN_FORCE)
    pairs = (item.partition("=") for item in state.split("; ") if "=" in item)
    return {name: value for name, _, value in pairs}


def record_if_changed() -> AuditEvent | None:
    """The event recorded, or None when the policies are those of the last record."""
    now = in_force()
    last = AuditEvent.objects.filter(action=audit.Action.POLICY_CHANGE, target=TARGET).first()
    before = _parse(last.detail) if last else {}
    if now == before:
        return None
    changes = [
        f"{name}: {before[name]} → {value}"
        for name, value in now.items()
        if name in before and before[name] != value
    ]
    state = "; ".join(f"{name}={value}" for name, value in now.items())
    detail = ("; ".join(changes) + " — " if changes else "") + IN_FORCE + state
    return audit.record(
        audit.Action.POLICY_CHANGE, target=TARGET, detail=detail, actor_name="deploy"
    )
