"""The status vocabularies of the spec (status-and-lifecycle, every status table), exactly."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class JobPhase(models.TextChoices):
    """Spec §Job status."""

    PENDING = "Pending", _("Pending")
    RUNNING = "Running", _("Running")
    SUCCEEDED = "Succeeded", _("Succeeded")
    FAILED = "Failed", _("Failed")
    STOPPED = "Stopped", _("Stopped")


class TaskPhase(models.TextChoices):
    """Spec §Task status."""

    PENDING = "Pending", _("Pending")
    RUNNING = "Running", _("Running")
    SUCCEEDED = "Succeeded", _("Succeeded")
    FAILED = "Failed", _("Failed")
    STOPPED = "Stopped", _("Stopped")


class PodPhase(models.TextChoices):
    """Spec §Pod and Worker status: four phases, no Stopped."""

    PENDING = "Pending", _("Pending")
    RUNNING = "Running", _("Running")
    SUCCEEDED = "Succeeded", _("Succeeded")
    FAILED = "Failed", _("Failed")


class WorkflowPhase(models.TextChoices):
    """Spec §Workflow status."""

    PENDING = "Pending", _("Pending")
    RUNNING = "Running", _("Running")
    SUCCEEDED = "Succeeded", _("Succeeded")
    FAILED = "Failed", _("Failed")


class TaskKind(models.TextChoices):
    """The web console creates StatefulSet Tasks; the Task API may also create batch Jobs."""

    STATEFULSET = "StatefulSet", _("StatefulSet")
    JOB = "Job", _("Job")


class Action(models.TextChoices):
    CREATE = "create", _("Create")
    STOP = "stop", _("Stop")
    RESUME = "resume", _("Resume")
    CLONE = "clone", _("Clone")
    DELETE = "delete", _("Delete")


JOB_TERMINAL = frozenset({JobPhase.SUCCEEDED, JobPhase.FAILED})
TASK_TERMINAL = frozenset({TaskPhase.SUCCEEDED, TaskPhase.FAILED})
POD_TERMINAL = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
WORKFLOW_TERMINAL = frozenset({WorkflowPhase.SUCCEEDED, WorkflowPhase.FAILED})


class SignalSource(models.TextChoices):
    """Where a workload's word came from (issue: workload truth): posted by its pods, read from
    a container's termination message, or read from its log lines."""

    SIGNAL = "signal", _("signal")
    TERMINATION_LOG = "termination-log", _("termination log")
    LOGS = "logs", _("logs")


class WorkloadState(models.TextChoices):
    """What the workload says about itself, beside (never instead of) the Kubernetes phase:
    derived at read time from its signals and the Kubernetes facts (jobs.status.workload)."""

    SILENT = "Silent", _("Silent")
    STARTING = "Starting", _("Starting")
    PROGRESSING = "Progressing", _("Progressing")
    STALLED = "Stalled", _("Stalled")
    UNRESPONSIVE = "Unresponsive", _("Unresponsive")
    DEGRADED = "Degraded", _("Degraded")
    SUCCEEDED = "Succeeded", _("Succeeded")
    FAILED = "Failed", _("Failed")
    LOST = "Lost", _("Lost")


# The workload states that need a look: first in the dashboard's attention list.
WORKLOAD_ATTENTION = frozenset(
    {
        WorkloadState.STALLED,
        WorkloadState.UNRESPONSIVE,
        WorkloadState.DEGRADED,
        WorkloadState.FAILED,
    }
)


class UsageClass(models.TextChoices):
    """What a second of a pod's GPUs was spent on (the GPU-hours ledger, docs/usage.md): the
    pod's Kubernetes facts and the workload's word at that second (jobs.status.usage)."""

    STARTING = "starting", _("starting")
    PROGRESSING = "progressing", _("progressing")
    SILENT = "silent", _("silent")
    STALLED = "stalled", _("stalled")
    UNRESPONSIVE = "unresponsive", _("unresponsive")
    DEGRADED = "degraded", _("degraded")
    FINISHED = "finished", _("finished")
    FAILED = "failed", _("failed")
    STOPPING = "stopping", _("stopping")
    UNKNOWN = "unknown", _("unknown")


# The classes whose every second is wasted (`starting` is wasted only past its grace period).
WASTED_CLASSES = frozenset(
    {UsageClass.STALLED, UsageClass.UNRESPONSIVE, UsageClass.FINISHED, UsageClass.FAILED}
)
