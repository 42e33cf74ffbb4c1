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
