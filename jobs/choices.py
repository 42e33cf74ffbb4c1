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


# Each vocabulary's class name is its schema's name in the OpenAPI document: a second "Phase"
# would overwrite the first there (Node phases listed as Addon phases).
class NodePhase(models.TextChoices):
    """Spec §Node status: Ready True is Online, anything else Offline; `unschedulable` apart."""

    ONLINE = "Online", _("Online")
    OFFLINE = "Offline", _("Offline")


class AddonPhase(models.TextChoices):
    """Spec §Addon status: Ready means the desired version is reached, nothing more."""

    PENDING = "Pending", _("Pending")
    INSTALLING = "Installing", _("Installing")
    READY = "Ready", _("Ready")
    FAILED = "Failed", _("Failed")
    UPGRADING = "Upgrading", _("Upgrading")


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


# The workload states a chart shades as spells (jobs.status.spells).
SPELL_STATES = frozenset(
    {WorkloadState.STALLED, WorkloadState.UNRESPONSIVE, WorkloadState.DEGRADED}
)


class FailureClass(models.TextChoices):
    """What kind of failure a signature names (issue 34, jobs.status.failure)."""

    USER_CODE = "user code", _("user code")
    OUT_OF_MEMORY = "out of memory", _("out of memory")
    HARDWARE = "hardware", _("hardware")
    NETWORK = "network/collective", _("network/collective")
    RAY_MEMBERSHIP = "Ray membership", _("Ray membership")
    INFRASTRUCTURE = "infrastructure", _("infrastructure")
    CONFIGURATION = "configuration", _("configuration")


# The workload states that need a look: first in the dashboard's attention list.
WORKLOAD_ATTENTION = frozenset(
    {
        WorkloadState.STALLED,
        WorkloadState.UNRESPONSIVE,
        WorkloadState.DEGRADED,
        WorkloadState.FAILED,
    }
)


class Problem(models.TextChoices):
    """What the engine observed that looks wrong (spec §Troubleshooting): the troubleshooting
    panel's findings (jobs.status.troubleshoot, whose ADVICE says what to do about each); the
    pod problems among them are decided by jobs.status.problems.classify alone."""

    APPLY_ERROR = "apply_error", _("Apply error")
    TASK_FAILED = "task_failed", _("Task failed")
    CLUSTER_UNREACHABLE = "cluster_unreachable", _("Cluster unreachable")
    CLUSTER_STALE = "cluster_stale", _("Cluster data is stale")
    NO_MATCHING_NODE = "no_matching_node", _("No node matches")
    UNSCHEDULABLE = "unschedulable", _("Unschedulable")
    NO_PODS = "no_pods", _("No pods reported")
    NODE_OFFLINE = "node_offline", _("Node offline")
    CRASH_LOOP = "crash_loop", _("Crash loop")
    CONTAINER_EXITED = "container_exited", _("Container exited with an error")
    RESTARTED = "restarted", _("Restarted after an error")
    POD_FAILED = "pod_failed", _("Pod failed")
    NOT_READY = "not_ready", _("Not ready")
    NOT_IN_LAST_REPORT = "not_in_last_report", _("Not in the last report")
    IMAGE_PULL = "image_pull", _("Image cannot be pulled")
    OUT_OF_MEMORY = "out_of_memory", _("Out of memory (OOMKilled)")
    EVICTED = "evicted", _("Evicted")
    CONFIG_ERROR = "config_error", _("Container configuration error")
    OTHER_REASON = "other_reason", _("Other Kubernetes reason")


# What jobs.status.problems.classify can say about one pod (the rest are a Task's, a cluster's,
# or a Worker row's absence from the last report).
POD_PROBLEMS = frozenset(
    {
        Problem.NODE_OFFLINE,
        Problem.EVICTED,
        Problem.UNSCHEDULABLE,
        Problem.IMAGE_PULL,
        Problem.CONFIG_ERROR,
        Problem.OUT_OF_MEMORY,
        Problem.CRASH_LOOP,
        Problem.POD_FAILED,
        Problem.OTHER_REASON,
        Problem.CONTAINER_EXITED,
        Problem.RESTARTED,
        Problem.NOT_READY,
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
    GRACE_PERIOD = "grace_period", _("Not gone within its grace period after its eviction")


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
