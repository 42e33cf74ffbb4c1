"""The troubleshooting record: spec §Do not treat Worker rows as a retry history asks whoever
troubleshoots to record the Job, the Task, the data-plane Pod names, nodes, IPs, phases and the
time they looked. This is that record as plain text for a ticket: every fact with its layer and
the time it was observed, the viewing time, and the first layer that looks wrong. The copies of
readers who see diagnostics (jobs.diagnostics; operators) add the instance history by Pod UID
(spec §Where to look: for authorised operators); everyone else's word them as their meaning."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models.functions import Length
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from console.web import HtmxHttpRequest
from jobs.diagnostics import worker_reason
from jobs.messages import render_text
from jobs.models import Job, Operation
from jobs.records import recorded_by
from jobs.status import freshness as status
from jobs.status.troubleshoot import Diagnosis
from jobs.views.jobs.common import ShownTask
from workers.models import PodInstance, Worker

# A record stays pasteable: the Job's first pods, then a count (the Worker rows list them all).
RECORD_PODS = 200
RECORD_INSTANCES = 500


def record_text(request: HtmxHttpRequest, job: Job, context: dict[str, Any]) -> str:
    """The record of what `context` (the job page's) shows, read at `context["now"]`."""
    now: datetime = context["now"]
    lines = [
        _("Troubleshooting record"),
        _("Viewed at: %(time)s by %(user)s") % {"time": utc(now), "user": request.user},
        _("First layer that looks wrong: %(layer)s") % {"layer": first_wrong(context["diagnosis"])},
        "",
        *_job_lines(job, context),
    ]
    rows: Sequence[ShownTask] = context["tasks"]
    workers = _workers_by_task(rows)
    diagnostics: bool = context["diagnostics"]
    for row in rows:
        lines += ["", *_task_lines(job, row, diagnostics)]
        lines += _pod_lines(row, workers.get(row.task.pk, []), job, diagnostics)
    if diagnostics:
        lines += ["", *_instance_lines(rows, job)]
    return "\n".join(lines) + "\n"


def utc(moment: datetime | None) -> str:
    """Times in a ticket are read by people in other zones: UTC, to the second."""
    if moment is None:
        return _("never")
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def first_wrong(diagnosis: Diagnosis) -> str:
    """The layer's number and title and the problems found there, or that none looks wrong."""
    for check in diagnosis.layers:
        if check.layer == diagnosis.first_wrong:
            problems = ", ".join(str(group.problem.label) for group in check.groups)
            return f"{check.layer}. {check.title} — {problems}"
    return _("none (nothing wrong observed)")


def _layer(layer: str) -> str:
    """A value of a layer that has no observation time (the spec, the template)."""
    return f"  [{layer}]"


def _stamp(layer: str, moment: datetime | None) -> str:
    """A value with its layer and the time it was observed or applied ("never" if not)."""
    return f"  [{layer} {utc(moment)}]"


def _job_lines(job: Job, context: dict[str, Any]) -> list[str]:
    head = _(
        "Job %(name)s (#%(pk)s), project %(project)s, cluster %(cluster)s, namespace %(namespace)s"
    ) % {"name": job.name, "pk": job.pk, "project": job.project.name,
         "cluster": job.cluster.name, "namespace": job.namespace}  # fmt: skip
    desired = _("spec.stopped: %(stopped)s, run %(run)s") % {
        "stopped": "true" if job.stopped else "false", "run": job.run,
    }  # fmt: skip
    lines = [head, f"{_layer(_('desired'))} {desired}"]
    decision: Operation | None = context["decision"]
    if decision is not None:
        decided = _("phase %(phase)s (%(action)s by %(user)s); not observed since") % {
            "phase": _(job.phase), "action": decision.get_action_display(),
            "user": recorded_by(decision.user),
        }  # fmt: skip
        lines.append(f"{_stamp(_('decided by the console'), decision.requested_at)} {decided}")
    phase = (
        _("phase not observed since")
        if decision is not None
        else _("phase %(phase)s") % {"phase": _(job.phase)}
    )
    observed = f"{phase}; " + _("message: %(message)s") % {
        "message": render_text(job.message, context["diagnostics"]) or "—"
    }
    lines.append(f"{_stamp(_('observed'), context['observed_at'])} {observed}")
    cluster = context["cluster"]
    reach = _("reachable") if cluster.reachable else _("unreachable")
    stale = f", {_('stale')}" if cluster.stale else ""
    lines.append(f"{_stamp(_('cluster, last sync'), cluster.last_synced_at)} {reach}{stale}")
    return lines


def _task_lines(job: Job, row: ShownTask, diagnostics: bool) -> list[str]:
    task = row.task
    head = _("Task %(role)s (%(name)s, %(kind)s)") % {
        "role": task.role, "name": f"{job.name}-{task.role}", "kind": task.get_kind_display(),
    }  # fmt: skip
    template = _("desired replicas %(count)s") % {"count": task.desired_replicas}
    workload = "—" if task.workload_replicas is None else task.workload_replicas
    observed = _(
        "phase %(phase)s, workload's desired replicas %(workload)s, ready %(ready)s; "
        "message: %(message)s"
    ) % {"phase": _(task.phase), "workload": workload, "ready": task.ready_replicas,
         "message": render_text(task.message, diagnostics) or "—"}  # fmt: skip
    return [
        head,
        f"{_layer(_('template'))} {template}",
        f"{_stamp(_('observed'), row.observed_at)} {observed}",
        f"{_stamp(_('applied'), task.applied_at)} {_applied(task.apply_error, task.applied_at)}",
    ]


def _applied(error: str, applied_at: datetime | None) -> str:
    if error:
        return _("apply error: %(error)s") % {"error": error}
    return _("applied") if applied_at else _("not applied yet")


def _workers_by_task(rows: Sequence[ShownTask]) -> dict[int, list[Worker]]:
    """The Job's first RECORD_PODS Worker rows, by Task, in the order people count (one query
    whatever the number of Tasks)."""
    workers = Worker.objects.filter(task__in=[row.task.pk for row in rows])
    ordered = workers.order_by("task_id", Length("pod_name"), "pod_name")[:RECORD_PODS]
    by_task: dict[int, list[Worker]] = {}
    for worker in ordered:
        by_task.setdefault(worker.task_id, []).append(worker)
    return by_task


def _pod_lines(row: ShownTask, workers: Iterable[Worker], job: Job, diagnostics: bool) -> list[str]:
    lines = []
    for worker in workers:
        missing = status.worker_missing(worker, row.task)
        reported = status.worker_last_reported_at(worker, row.task, job.cluster)
        facts = {
            "pod": worker.pod_name, "node": worker.node_name or "—", "ip": worker.ip or "—",
            "phase": _(worker.phase), "ready": _("yes") if worker.ready else _("no"),
            "reason": worker_reason(worker.reason, worker.message, diagnostics) or "—",
        }  # fmt: skip
        if missing:
            text = _("Pod %(pod)s: gone, last known: node %(node)s, IP %(ip)s, phase %(phase)s, "
                     "ready %(ready)s, reason %(reason)s") % facts  # fmt: skip
            layer = _("not in the last report; last reported")
        else:
            text = _("Pod %(pod)s: node %(node)s, IP %(ip)s, phase %(phase)s, ready %(ready)s, "
                     "reason %(reason)s") % facts  # fmt: skip
            layer = _("observed")
        lines.append(f"{_stamp(layer, reported)} {text}")
    more = row.worker_count + row.unreported_count - len(lines)
    if more > 0:
        lines.append("  " + ngettext(
            "… and %(count)s more pod: see the Worker rows.",
            "… and %(count)s more pods: see the Worker rows.", more,
        ) % {"count": more})  # fmt: skip
    return lines


def _instance_lines(rows: Sequence[ShownTask], job: Job) -> list[str]:
    """With diagnostics: every pod instance (UID) seen, oldest first per pod (the timeline the
    spec says an administrator otherwise builds from UID, creation and termination times)."""
    instances = PodInstance.objects.filter(task__in=[row.task for row in rows])
    recent = list(instances.order_by("-first_seen_at", "-pk")[:RECORD_INSTANCES])
    recent.sort(key=lambda i: (len(i.pod_name), i.pod_name, i.first_seen_at))
    lines = [_("Pod instance history by UID (diagnostics)")]
    for instance in recent:
        seen = status.instance_last_seen_at(instance, job.cluster)
        lines.append("  " + _(
            "%(pod)s uid %(uid)s: node %(node)s, IP %(ip)s, phase %(phase)s, restarts "
            "%(restarts)s, exit code %(code)s, termination reason %(reason)s; first seen "
            "%(first)s, last seen %(last)s, gone since %(gone)s"
        ) % {
            "pod": instance.pod_name, "uid": instance.uid, "node": instance.node_name or "—",
            "ip": instance.ip or "—", "phase": _(instance.phase),
            "restarts": instance.restart_count,
            "code": "—" if instance.last_exit_code is None else instance.last_exit_code,
            "reason": instance.termination_reason or "—", "first": utc(instance.first_seen_at),
            "last": utc(seen), "gone": utc(instance.gone_at) if instance.gone_at else "—",
        })  # fmt: skip
    if len(lines) == 1:
        lines.append("  " + _("No pod instance recorded yet."))
    return lines
