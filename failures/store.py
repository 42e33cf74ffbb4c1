"""Kept logs at rest: each container run's tail compressed in the `kept_logs` storage (Django's
storage API: a directory under TRAINYARD_VAR_DIR by default, object storage through
django-storages in production, docs/failures.md), one KeptLog row beside it, and the evictions
that keep them within their retention and each project's cap, the oldest first."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.db.models import F, Sum, Window
from django.db.models.functions import Coalesce

from console.models import Project
from failures.models import KeptLog
from jobs.models import Job
from jobs.workload.rlinf_logs import split_stamp


@dataclass(frozen=True)
class Tail:
    """One container run's log as read from the API server (with timestamps)."""

    pod_name: str
    pod_uid: str
    container: str
    attempt: int
    text: str
    cut: bool


def storage() -> Storage:
    return storages["kept_logs"]


def save(job: Job, why: str, tails: Sequence[Tail], now: datetime) -> list[KeptLog]:
    """Each tail stored and its row written; a container run kept again (a later moment has
    more of its log) replaces what was kept of it."""
    kept = [_save_one(job, why, tail, now) for tail in tails if tail.text]
    if kept:
        enforce_cap(job.project_id)
    return kept


def _save_one(job: Job, why: str, tail: Tail, now: datetime) -> KeptLog:
    data = gzip.compress(tail.text.encode(), compresslevel=6)
    name = f"{job.project_id}/{job.pk}/{tail.pod_uid}/{tail.container}-{tail.attempt}.log.gz"
    if storage().exists(name):
        storage().delete(name)
    name = storage().save(name, ContentFile(data))
    lines = tail.text.splitlines()
    row, _ = KeptLog.objects.update_or_create(
        pod_uid=tail.pod_uid, container=tail.container, attempt=tail.attempt,
        defaults={
            "project_id": job.project_id, "job": job, "job_name": job.name, "run": job.run,
            "pod_name": tail.pod_name, "why": why, "kept_at": now, "lines": len(lines),
            "first_line_at": split_stamp(lines[0])[0] if lines else None,
            "last_line_at": split_stamp(lines[-1])[0] if lines else None,
            "text_bytes": len(tail.text.encode()), "stored_bytes": len(data),
            "cut": tail.cut, "name": name,
        },
    )  # fmt: skip
    return row


def read(kept: KeptLog) -> str:
    with storage().open(kept.name, "rb") as stored:
        return gzip.decompress(stored.read()).decode(errors="replace")


def remove(rows: Sequence[KeptLog]) -> int:
    """The rows and their stored texts (a text already gone is no error)."""
    for row in rows:
        storage().delete(row.name)
    KeptLog.objects.filter(pk__in=[row.pk for row in rows]).delete()
    return len(rows)


def enforce_cap(project_id: int) -> int:
    """The project's oldest kept logs removed until the rest fit its cap."""
    cap = settings.TRAINYARD_LOG_KEEP_PROJECT_MIB * 1024 * 1024
    rows = KeptLog.objects.filter(project_id=project_id).annotate(
        newer=Window(Sum("stored_bytes"), order_by=[F("kept_at").desc(), F("pk").desc()])
    )
    over = [row for row in rows if row.newer > cap]
    return remove(over)


def evict(now: datetime) -> int:
    """Past the retention (TRAINYARD_LOG_KEEP_DAYS) or past a deleted Job's `delete_after`."""
    old = now - timedelta(days=settings.TRAINYARD_LOG_KEEP_DAYS)
    due = KeptLog.objects.filter(kept_at__lt=old) | KeptLog.objects.filter(delete_after__lt=now)
    return remove(list(due))


def forget_job(job_id: int, now: datetime) -> int:
    """A deleted Job's kept logs go with it, unless TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS keeps
    them that long (the rows then outlive the Job, `job` empty, `job_name` kept). Called in the
    transaction that deletes the Job row, before it (the rows are found by their Job)."""
    days = settings.TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS
    rows = KeptLog.objects.filter(job_id=job_id)
    if days <= 0:
        return remove(list(rows))
    return rows.update(delete_after=Coalesce(F("delete_after"), now + timedelta(days=days)))


def forget_project(sender: type[Project], instance: Project, **kwargs: object) -> None:
    """A project deleted (its kept-log rows go with it, by cascade): their stored texts too,
    once the delete commits (a delete rolled back keeps them). Connected to Project's
    `pre_delete` (failures.apps), whatever deletes it: the admin, a shell, a script."""
    names = list(KeptLog.objects.filter(project=instance).values_list("name", flat=True))
    if names:
        transaction.on_commit(lambda: _delete_texts(names), robust=True)


def _delete_texts(names: Sequence[str]) -> None:
    for name in names:
        storage().delete(name)
