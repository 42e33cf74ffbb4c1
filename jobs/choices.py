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


class DrainState(models.TextChoices):
    """A node drain (issue 36): it never says drained while a pod that must go remains."""

    RUNNING = "running", _("Running")
    DRAINED = "drained", _("Drained")
    PARTLY_DRAINED = "partly_drained", _("Partly drained")
    FAILED = "failed", _("Failed")
    STOPPED = "stopped", _("Stopped")


DRAIN_TERMINAL = frozenset(
    {DrainState.DRAINED, DrainState.PARTLY_DRAINED, DrainState.FAILED, DrainState.STOPPED}
)


class DrainPodStatus(models.TextChoices):
    """One pod of a drain: what the drain did with it, and what became of it."""

    PENDING = "pending", _("Pending")
    EVICTING = "evicting", _("Evicting")
    BLOCKED = "blocked", _("Blocked")
    EVICTED = "evicted", _("Evicted")
    SKIPPED = "skipped", _("Skipped")
    FAILED = "failed", _("Failed")


class DrainAction(models.TextChoices):
    """What a drain's preview says it will do with a pod."""

    EVICT = "evict", _("Will be evicted")
    SKIP = "skip", _("Skipped")
    BLOCKED = "blocked", _("Blocked")


class DrainReason(models.TextChoices):
    """Why a pod is skipped, blocked or failed (kubectl drain's filters, the Eviction API's
    answers)."""

    DAEMONSET = "daemonset", _("Managed by a DaemonSet: its controller would put it back")
    MIRROR = "mirror", _("A mirror pod of a static pod: its kubelet would post it again")
    EMPTY_DIR = "emptydir", _("Uses emptyDir data that eviction deletes (not consented)")
    NO_CONTROLLER = "no_controller", _("Declares no controller: nothing would re-create it")
    BUDGET = "budget", _("A PodDisruptionBudget allows no disruption now")
    SEVERAL_BUDGETS = "several_budgets", _("Several PodDisruptionBudgets select it")
    EVICTION_ERROR = "eviction_error", _("The Eviction API refused it")
    TIMEOUT = "timeout", _("Still present when the drain's time ran out")


class AddonPhase(models.TextChoices):
    """Spec §Node and Addon status (the vocabulary of console.models.Addon)."""

    PENDING = "Pending", _("Pending")
    INSTALLING = "Installing", _("Installing")
    READY = "Ready", _("Ready")
    FAILED = "Failed", _("Failed")
    UPGRADING = "Upgrading", _("Upgrading")
