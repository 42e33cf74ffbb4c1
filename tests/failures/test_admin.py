"""The admin of failure signatures (issue 34, item 4): an operator's RE2 pattern is checked on
save (no backreferences, no lookaround: a pattern that could backtrack catastrophically is not
RE2) and tried on a pasted log; kept logs and findings are read-only; staff who are not
operators see none of it (kept logs are diagnostics: spec §Pod and Worker status)."""

from __future__ import annotations

import gzip
import html
from typing import Any

from django.contrib.auth.models import Permission, User
from django.core.files.base import ContentFile
from django.test import Client

from console.models import AuditEvent
from failures.models import Finding, KeptLog, Signature

LOG = (
    "step 12 loss 0.4\n"
    "RuntimeError: NCCL communicator was aborted on rank 3: watchdog timeout\n"
    "step 13 loss 0.4\n"
)
FIELDS = {
    "code": "aborted_comm", "label": "Communicator aborted", "label_zh": "通信器中止",
    "failure_class": "network/collective", "advice": "Look at rank 3.", "advice_zh": "",
    "enabled": "on",
}  # fmt: skip


def admin_of(user: User) -> Client:
    """Staff; olga is an operator (the group "operators"), bob is not."""
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def add(client: Client, **fields: Any) -> Any:
    return client.post("/admin/failures/signature/add/", {**FIELDS, **fields}, follow=True)


def test_it_refuses_a_pattern_re2_cannot_run(olga: User) -> None:
    response = add(admin_of(olga), pattern=r"(a+)\1")
    assert response.status_code == 200 and not Signature.objects.exists()
    assert "Not a valid RE2 pattern" in html.unescape(response.content.decode())


def test_it_saves_a_pattern_and_shows_what_it_matches_in_a_pasted_log(olga: User) -> None:
    response = add(admin_of(olga), pattern=r"communicator was aborted", sample=LOG)
    text = html.unescape(response.content.decode())
    assert "The pattern matches these lines of the log pasted:" in text
    assert (
        "<pre>RuntimeError: NCCL communicator was aborted on rank 3: watchdog timeout</pre>" in text
    )
    saved = Signature.objects.get()
    assert (saved.code, saved.created_by) == ("aborted_comm", olga)


def test_it_says_when_the_pattern_matches_nothing(olga: User) -> None:
    response = add(admin_of(olga), pattern=r"Xid \d+", sample=LOG)
    assert "The pattern matches no line of the log pasted." in html.unescape(
        response.content.decode()
    )


def test_it_shows_kept_logs_and_findings_read_only(olga: User) -> None:
    client = admin_of(olga)
    assert client.get("/admin/failures/keptlog/").status_code == 200
    assert client.get("/admin/failures/finding/").status_code == 200
    assert client.get("/admin/failures/keptlog/add/").status_code == 403
    assert client.get("/admin/failures/finding/add/").status_code == 403


def test_it_shows_staff_who_are_not_operators_nothing(bob: User) -> None:
    models = (Signature, KeptLog, Finding)
    codes = [f"{verb}_{model._meta.model_name}" for model in models for verb in ("view", "add")]
    bob.user_permissions.add(*Permission.objects.filter(codename__in=codes))
    client = admin_of(bob)
    for page in ("signature/", "signature/add/", "keptlog/", "finding/"):
        assert client.get(f"/admin/failures/{page}").status_code == 403, page
    assert "failures" not in client.get("/admin/").content.decode().lower()


def test_a_new_signature_starts_disabled_to_be_tried_before_it_judges(olga: User) -> None:
    """Issue 34 audit, item 7: the test box tries a pattern saved disabled; it judges no run
    until enabled."""
    client = admin_of(olga)
    page = client.get("/admin/failures/signature/add/").content.decode()
    assert 'name="enabled"' in page and 'name="enabled" checked' not in page
    disabled = {key: value for key, value in FIELDS.items() if key != "enabled"}
    response = client.post("/admin/failures/signature/add/",
                           {**disabled, "pattern": "communicator was aborted", "sample": LOG},
                           follow=True)  # fmt: skip
    assert "The pattern matches these lines" in html.unescape(response.content.decode())
    assert not Signature.objects.get().enabled


def test_the_list_shows_a_stored_pattern_re2_refuses_as_invalid(olga: User) -> None:
    """Issue 34 audit, item 5: judgements leave such a pattern out; the admin says so."""
    Signature.objects.create(code="bad", label="bad", failure_class="user code", pattern=r"(a)\1")
    Signature.objects.create(code="good", label="good", failure_class="user code", pattern="x")
    page = admin_of(olga).get("/admin/failures/signature/").content.decode()
    rows = {code: row for row in page.split("<tr")[1:] for code in ("bad", "good")
            if f">{code}</a>" in row}  # fmt: skip
    icons = {code: [a.split('"')[0] for a in row.split('alt="')[1:]] for code, row in rows.items()}
    assert icons == {"bad": ["False", "True", "False"], "good": ["False", "True", "True"]}


def test_an_operator_tries_a_pattern_on_a_pasted_log_and_nothing_is_saved(olga: User) -> None:
    """Issue 34 audit, item 7: the test box before saving: no signature is made, none goes live."""
    client = admin_of(olga)
    listing = client.get("/admin/failures/signature/").content.decode()
    assert 'href="/admin/failures/signature/try/"' in listing
    page = client.post("/admin/failures/signature/try/",
                       {"pattern": r"communicator was \w+", "sample": LOG})  # fmt: skip
    text = html.unescape(page.content.decode())
    assert page.status_code == 200 and "The pattern matches these lines of the log pasted:" in text
    assert '<pre id="matched">RuntimeError: NCCL communicator was aborted on rank 3' in text
    refused = client.post("/admin/failures/signature/try/", {"pattern": r"(a)\1", "sample": LOG})
    assert "Not a valid RE2 pattern" in html.unescape(refused.content.decode())
    assert not Signature.objects.exists()


def test_only_operators_may_try_a_pattern(bob: User) -> None:
    assert Client().get("/admin/failures/signature/try/").status_code == 302  # to the login
    assert admin_of(bob).get("/admin/failures/signature/try/").status_code == 403


def _kept_of_a_deleted_job(tmp_path: Any, settings: Any, project: Any) -> KeptLog:
    """A kept log whose Job was deleted (TRAINYARD_LOG_KEEP_AFTER_DELETE_DAYS): no Job page."""
    from datetime import timedelta

    from django.utils import timezone

    from failures import store

    settings.STORAGES = {**settings.STORAGES, "kept_logs": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path)},
    }}  # fmt: skip
    name = store.storage().save("1/9/uid/main-2.log.gz", ContentFile(gzip.compress(LOG.encode())))
    return KeptLog.objects.create(
        project=project, job=None, job_name="grpo", run=1, pod_name="grpo-worker-3",
        pod_uid="uid", container="main", attempt=2, why="delete", name=name,
        delete_after=timezone.now() + timedelta(days=7),
    )  # fmt: skip


def test_operators_read_and_download_a_deleted_jobs_kept_log_audited(
    olga: User, tmp_path: Any, settings: Any, project: Any
) -> None:
    kept = _kept_of_a_deleted_job(tmp_path, settings, project)
    client = admin_of(olga)
    page = client.get(f"/admin/failures/keptlog/{kept.pk}/change/").content.decode()
    assert f"/admin/failures/keptlog/{kept.pk}/text/?download=1" in page
    shown = client.get(f"/admin/failures/keptlog/{kept.pk}/text/")
    assert shown.status_code == 200 and shown.content.decode() == LOG
    assert shown["Content-Type"].startswith("text/plain")
    got = client.get(f"/admin/failures/keptlog/{kept.pk}/text/?download=1")
    assert got["Content-Disposition"] == 'attachment; filename="grpo-grpo-worker-3-main-2.log"'
    trail = AuditEvent.objects.filter(action="kept_log.read").order_by("pk")
    assert [(e.actor, e.target, e.detail) for e in trail] == [
        (olga, "grpo/grpo-worker-3/main#2", f"kept log {kept.pk}"),
        (olga, "grpo/grpo-worker-3/main#2", f"kept log {kept.pk}, downloaded"),
    ]


def test_nobody_else_reads_a_kept_log_in_the_admin(
    bob: User, alice: User, tmp_path: Any, settings: Any, project: Any
) -> None:
    kept = _kept_of_a_deleted_job(tmp_path, settings, project)
    staff = admin_of(bob)  # staff, a member of the project, not an operator
    assert staff.get(f"/admin/failures/keptlog/{kept.pk}/text/").status_code == 404
    member = Client()
    member.force_login(alice)  # not staff: the admin's login page
    assert member.get(f"/admin/failures/keptlog/{kept.pk}/text/").status_code == 302
    assert Client().get(f"/admin/failures/keptlog/{kept.pk}/text/").status_code == 302
    assert not AuditEvent.objects.filter(action="kept_log.read").exists()
