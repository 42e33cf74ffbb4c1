"""Platform objects: projects and their members, clusters, nodes, add-ons, API tokens, the
audit trail and the failed logins counted for rate limits."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.fields import KubeconfigField
from jobs.choices import AddonPhase, DrainPodStatus, DrainReason, DrainState, NodePhase


class Project(models.Model):
    """Every Job and Workflow belongs to one; every query of them is scoped by membership.
    Its Jobs may run only on the clusters listed in `clusters`, chosen by operators."""

    name = models.SlugField(_("name"), max_length=63, unique=True)
    clusters: models.ManyToManyField[Cluster, Any] = models.ManyToManyField(
        "Cluster",
        blank=True,
        related_name="projects",
        verbose_name=_("clusters"),
        help_text=_("The clusters this project's jobs may run on."),
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    # The idle policy's default for the project's Jobs (usage.policy; a Job's own wins, 0 there
    # sets it off); None: no default.
    stop_when_idle_minutes = models.PositiveIntegerField(
        _("stop when idle (minutes)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(10_080)],
        help_text=_("Stop a job whose workload was stalled, unresponsive or finished this long."),
    )

    class Meta:
        ordering = ["name"]
        # The global operator role (jobs.access.is_operator), given through the group
        # "operators" (migration console/0003); superusers hold every permission.
        permissions = [
            (
                "operate_platform",
                "Operate the platform: read every project and its diagnostics, manage "
                "projects and their members",
            )
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", _("Member")
        VIEWER = "viewer", _("Viewer")

    project = models.ForeignKey(Project, models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="memberships")
    role = models.CharField(_("role"), max_length=16, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


def validate_http_url(value: str) -> None:
    """An http:// or https:// URL with a host (a cluster-local name without a dot, such as
    `http://prometheus:9090`, is one; Django's URLValidator would refuse it)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(_("Enter an http:// or https:// URL with a host."))


class Cluster(models.Model):
    """A data-plane Kubernetes cluster. Reachability is what the last sync attempt found.

    Its kubeconfig is stored encrypted (console/fields.py), or referenced by a file path read
    at every use (`kubeconfig_path`, which then wins); reading `kubeconfig` gives the text.
    """

    name = models.SlugField(_("name"), max_length=63, unique=True)
    kubeconfig = KubeconfigField(
        _("kubeconfig"), blank=True, help_text=_("Stored encrypted, never shown back.")
    )
    kubeconfig_path = models.CharField(
        _("kubeconfig file"),
        max_length=1024,
        blank=True,
        help_text=_(
            "Instead of the content: the absolute path of a kubeconfig file on the console's "
            "hosts (e.g. a mounted Kubernetes Secret), read at every use."
        ),
    )
    insecure = models.BooleanField(
        _("insecure (TLS not verified)"),
        default=False,
        help_text=_(
            "Allow a kubeconfig that skips TLS verification of the API server "
            "(insecure-skip-tls-verify). Shown on the Clusters page."
        ),
    )
    # When its credentials first skipped TLS verification or spoke plain http (issue 36: shown
    # "for ever after"); a rotation to verified credentials clears `insecure`, never this.
    insecure_since = models.DateTimeField(_("insecure since"), null=True, blank=True)
    context = models.CharField(_("context"), max_length=253, blank=True)
    namespace = models.CharField(_("default namespace"), max_length=63, default="default")
    prometheus_url = models.CharField(
        _("Prometheus URL"),
        max_length=500,
        blank=True,
        validators=[validate_http_url],
        help_text=_(
            "The Prometheus that scrapes this cluster's DCGM exporter, for GPU utilisation. "
            "Empty: TRAINYARD_PROMETHEUS_URL, when set."
        ),
    )
    reachable = models.BooleanField(_("reachable"), default=False)
    message = models.TextField(_("message"), blank=True)
    last_synced_at = models.DateTimeField(_("last successful sync at"), null=True, blank=True)
    last_attempt_at = models.DateTimeField(_("last sync attempt at"), null=True, blank=True)
    # A lease taken by a conditional UPDATE, so overlapping beats never sync a cluster twice.
    sync_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    # Per stream (console.engine.streams), the resourceVersion whose events the stored
    # ObservedObjects include: the next cycle watches from there. Written with the cycle's
    # result, after its rows were committed; {} makes the next cycle relist.
    watch_cursors = models.JSONField(default=dict, blank=True, editable=False)
    relisted_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    # The last connection test (issue 36): the server's version and, per permission the
    # console needs (console.permissions, by key), whether its credentials hold it.
    server_version = models.CharField(_("server version"), max_length=64, blank=True)
    access = models.JSONField(_("permissions"), default=dict, blank=True, editable=False)
    access_checked_at = models.DateTimeField(_("permissions checked at"), null=True, blank=True)
    # When a check was last queued (console.engine.connection.access_due): a slow or unreachable
    # cluster's check is asked again only a period later, never at every beat tick.
    access_asked_at = models.DateTimeField(_("permissions asked at"), null=True, blank=True)
    credentials_rotated_at = models.DateTimeField(
        _("credentials rotated at"), null=True, blank=True
    )
    # Retired: credentials deleted, never synced again, its Jobs' history kept.
    retired_at = models.DateTimeField(_("retired at"), null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """An insecure cluster keeps the time it first was (`insecure_since`)."""
        if self.insecure and self.insecure_since is None:
            self.insecure_since = timezone.now()
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "insecure_since"}
        super().save(*args, **kwargs)

    def clean_fields(self, exclude: Collection[str] | None = None) -> None:
        """The kubeconfig is checked by validate_kubeconfig where it is entered and where it is
        used; reading it here would decrypt it or read its file (which may fail on its own)."""
        super().clean_fields(exclude={*(exclude or ()), "kubeconfig"})


class Node(models.Model):
    """A data-plane node. Online/Offline is its phase; `unschedulable` is a separate flag."""

    # The vocabulary lives with the others (jobs.choices), where the status rules read it.
    Phase: TypeAlias = NodePhase  # noqa: UP040 (a `type` alias has no members at run time)

    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="nodes")
    name = models.CharField(_("name"), max_length=253)
    phase = models.CharField(_("phase"), max_length=16, choices=Phase.choices)
    unschedulable = models.BooleanField(_("unschedulable"), default=False)
    message = models.TextField(_("message"), blank=True)
    cpu_capacity = models.CharField(_("CPU"), max_length=32, blank=True)
    memory_capacity = models.CharField(_("memory"), max_length=32, blank=True)
    gpu_capacity = models.PositiveIntegerField(_("GPUs"), default=0)
    gpu_allocated = models.PositiveIntegerField(_("GPUs requested"), default=0)
    last_heartbeat_at = models.DateTimeField(_("last heartbeat at"), null=True, blank=True)
    observed_at = models.DateTimeField(_("observed at"))

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="one_node_per_name")
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class Addon(models.Model):
    """A cluster add-on. Ready means the desired version is reached, nothing more."""

    Phase: TypeAlias = AddonPhase  # noqa: UP040 (jobs.choices, as Node's)

    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="addons")
    name = models.CharField(_("name"), max_length=253)
    namespace = models.CharField(_("namespace"), max_length=63, default="kube-system")
    workload_kind = models.CharField(_("workload kind"), max_length=32, blank=True)
    desired_version = models.CharField(_("desired version"), max_length=128, blank=True)
    current_version = models.CharField(_("current version"), max_length=128, blank=True)
    phase = models.CharField(
        _("phase"), max_length=16, choices=Phase.choices, default=Phase.PENDING
    )
    message = models.TextField(_("message"), blank=True)
    observed_at = models.DateTimeField(_("observed at"), null=True, blank=True)
    # A registry add-on (issue 36): the console applies its manifests (AddonVersion) by
    # server-side apply; its phase is derived by jobs.status.addons from the attempts and the
    # rollout observed (console.engine.addons), not by the sync's labelled-workload view.
    managed = models.BooleanField(_("managed by the console"), default=False)
    applied_version = models.CharField(_("applied version"), max_length=128, blank=True)
    rollout = models.JSONField(_("rollout"), default=list, blank=True, editable=False)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="one_addon_per_name")
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class NodeCordon(models.Model):
    """Why an operator cordoned a node from the console, who and when: shown beside
    "SchedulingDisabled" while the node is unschedulable. The flag itself is the cluster's
    (`spec.unschedulable`, observed by the sync); this row is the console's word about it."""

    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="cordons")
    node_name = models.CharField(_("node"), max_length=253)
    reason = models.CharField(_("reason"), max_length=500)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    by_name = models.CharField(_("by"), max_length=150)
    at = models.DateTimeField(_("at"), default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "node_name"], name="one_cordon_per_node")
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.node_name}: {self.reason}"


class DrainRun(models.Model):
    """One drain of one node: cordon, then evictions through the Eviction API, followed pod by
    pod (DrainPod) until the node holds no pod that must go, or the timeout (issue 36). Its
    passes run in Celery tasks under a lease, so two workers never evict for the same drain."""

    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="drains")
    node_name = models.CharField(_("node"), max_length=253)
    state = models.CharField(
        _("state"), max_length=16, choices=DrainState.choices, default=DrainState.RUNNING
    )
    message = models.CharField(_("message"), max_length=500, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    requested_by_name = models.CharField(_("requested by"), max_length=150)
    timeout_seconds = models.PositiveIntegerField(_("timeout (seconds)"), default=900)
    delete_emptydir_data = models.BooleanField(_("delete emptyDir data"), default=False)
    skip_blocked = models.BooleanField(_("skip blocked pods"), default=False)
    started_at = models.DateTimeField(_("started at"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    last_pass_at = models.DateTimeField(_("last pass at"), null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-started_at", "-pk"]
        indexes = [models.Index(fields=["cluster", "node_name", "-started_at"], name="drain_node")]

    def __str__(self) -> str:
        return f"drain {self.pk} of {self.cluster_id}/{self.node_name} ({self.state})"


class DrainPod(models.Model):
    """One pod of a drain, as the drain last left it: the row the page follows live."""

    drain = models.ForeignKey(DrainRun, models.CASCADE, related_name="pods")
    namespace = models.CharField(_("namespace"), max_length=63)
    name = models.CharField(_("name"), max_length=253)
    uid = models.CharField(max_length=64)
    status = models.CharField(
        _("status"), max_length=16, choices=DrainPodStatus.choices, default=DrainPodStatus.PENDING
    )
    reason = models.CharField(_("reason"), max_length=32, choices=DrainReason.choices, blank=True)
    detail = models.CharField(_("detail"), max_length=500, blank=True)
    job_id = models.BigIntegerField(null=True, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(_("eviction attempts"), default=0)
    updated_at = models.DateTimeField(_("updated at"), default=timezone.now)

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["drain", "uid"], name="one_drain_row_per_pod")
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}: {self.status}"


class AddonVersion(models.Model):
    """One version of a registry add-on: its manifests (Deployments, DaemonSets), as given."""

    addon = models.ForeignKey(Addon, models.CASCADE, related_name="versions")
    version = models.CharField(_("version"), max_length=128)
    manifest = models.TextField(_("manifest"))
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["addon", "created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["addon", "version"], name="one_addon_version")
        ]

    def __str__(self) -> str:
        return f"{self.addon_id} {self.version}"


class AddonAttempt(models.Model):
    """One install, upgrade or rollback of a registry add-on: who, which versions, when, the
    outcome and the apply's answer. Running under a lease its passes renew: an attempt whose
    lease ran out (its worker died) reads Failed, never Installing for ever."""

    class AttemptKind(models.TextChoices):
        INSTALL = "install", _("Install")
        UPGRADE = "upgrade", _("Upgrade")
        ROLLBACK = "rollback", _("Roll back")

    class AttemptOutcome(models.TextChoices):
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")

    Kind: TypeAlias = AttemptKind  # noqa: UP040
    Outcome: TypeAlias = AttemptOutcome  # noqa: UP040

    addon = models.ForeignKey(Addon, models.CASCADE, related_name="attempts")
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    from_version = models.CharField(_("from version"), max_length=128, blank=True)
    to_version = models.CharField(_("to version"), max_length=128)
    requested_by_name = models.CharField(_("requested by"), max_length=150)
    started_at = models.DateTimeField(_("started at"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    outcome = models.CharField(
        _("outcome"), max_length=16, choices=Outcome.choices, default=Outcome.RUNNING
    )
    applied = models.BooleanField(_("applied"), default=False)
    answer = models.TextField(_("the apply's answer"), blank=True)
    # Why a failed attempt failed, in the console's words (jobs.status.addons reads it).
    reason = models.CharField(_("reason"), max_length=500, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.addon_id} {self.kind} {self.to_version}: {self.outcome}"


class AddonTransition(models.Model):
    """A change of a registry add-on's derived phase, written only on a real change."""

    addon = models.ForeignKey(Addon, models.CASCADE, related_name="transitions")
    phase = models.CharField(_("phase"), max_length=16, choices=Addon.Phase.choices)
    reason = models.CharField(_("reason"), max_length=500, blank=True)
    at = models.DateTimeField(_("at"), default=timezone.now)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.addon_id} {self.phase} at {self.at}"


class ObservedObject(models.Model):
    """One object of a cluster as the API server last reported it: the engine's memory between
    cycles, so that a cycle reads only what changed since the last one (console.engine).

    `data` is the object's JSON without managedFields. `job_id`, `node_name` and `gpus` serve
    the derivations without parsing it: the Job label of the console's objects, the node a pod
    runs on and the GPUs it holds there (0 once it finished)."""

    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="observed_objects")
    stream = models.CharField(max_length=16)
    uid = models.CharField(max_length=64)
    resource_version = models.CharField(max_length=64)
    job_id = models.BigIntegerField(null=True, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    gpus = models.PositiveIntegerField(default=0)  # a running pod's GPUs: a Node's allocation
    data = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "stream", "uid"], name="one_observation_per_uid"
            )
        ]
        indexes = [
            models.Index(fields=["cluster", "job_id"], name="observed_by_job"),
            models.Index(fields=["cluster", "node_name"], name="observed_by_node"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.stream}/{self.uid}"


TOKEN_DAYS = 90


def token_expiry() -> datetime:
    return timezone.now() + timedelta(days=TOKEN_DAYS)


class ApiToken(models.Model):
    """A bearer token for the JSON API. Only its SHA-256 is stored. It opens the API until it
    expires, is revoked by its owner, or its owner's password changes (console/tokens.py)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=100, blank=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    expires_at = models.DateTimeField(_("expires at"), default=token_expiry)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.name or self.pk}"

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def issue(
        cls, user: models.Model, name: str = "", days: int = TOKEN_DAYS
    ) -> tuple[ApiToken, str]:
        """Creates a token and returns it with its plain text, which is shown once."""
        plain = "ty_" + secrets.token_urlsafe(32)
        expires_at = timezone.now() + timedelta(days=days)
        token = cls.objects.create(
            user=user, name=name, token_hash=cls.hash(plain), expires_at=expires_at
        )
        return token, plain


class SyncStats(models.Model):
    """Running totals of sync cycles, per cluster, result and duration bucket: what /metrics
    shows as the sync histogram and counters. Kept in the database because cycles run in worker
    processes (often on other hosts) and the web process answers the scrape; one row is updated
    per cycle (docs/decisions.md, "Metrics across processes")."""

    class Result(models.TextChoices):
        SYNCED = "synced"
        UNREACHABLE = "unreachable"
        SKIPPED = "skipped"
        FAILED = "failed"

    cluster = models.ForeignKey(Cluster, models.CASCADE, related_name="+")
    result = models.CharField(max_length=16, choices=Result.choices)
    # Index into console.metrics.SYNC_BUCKETS of the smallest bound the cycle fits under.
    bucket = models.PositiveSmallIntegerField()
    cycles = models.PositiveBigIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    cpu_seconds = models.FloatField(default=0.0)
    api_requests = models.PositiveBigIntegerField(default=0)
    bytes_received = models.PositiveBigIntegerField(default=0)
    rows_written = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "result", "bucket"], name="one_sync_stats_row_per_bucket"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.result} {self.bucket}: {self.cycles}"


class AuditEvent(models.Model):
    """One entry of the audit trail (console/audit.py writes them): who did what, when (UTC),
    from where, with what result. Never a secret: no token, password or kubeconfig."""

    class AuditAction(models.TextChoices):
        JOB_CREATE = "job.create", _("Job created")
        JOB_CLONE = "job.clone", _("Job cloned")
        JOB_STOP = "job.stop", _("Job stopped")
        JOB_RESUME = "job.resume", _("Job resumed")
        JOB_DELETE = "job.delete", _("Job deleted")
        WORKFLOW_CREATE = "workflow.create", _("Workflow created")
        LOGIN = "login", _("Logged in")
        LOGIN_FAILED = "login.failed", _("Login failed")
        LOGOUT = "logout", _("Logged out")
        SESSION_EXPIRED = "session.expired", _("Session expired")
        TOKEN_ISSUE = "token.issue", _("API token issued")
        TOKEN_REVOKE = "token.revoke", _("API token revoked")
        CLUSTER_CREATE = "cluster.create", _("Cluster registered")
        CLUSTER_CHANGE = "cluster.change", _("Cluster changed")
        CLUSTER_DELETE = "cluster.delete", _("Cluster removed")
        CLUSTER_TEST = "cluster.test", _("Cluster connection tested")
        CLUSTER_ROTATE = "cluster.rotate", _("Cluster credentials rotated")
        CLUSTER_RETIRE = "cluster.retire", _("Cluster retired")
        NODE_CORDON = "node.cordon", _("Node cordoned")
        NODE_UNCORDON = "node.uncordon", _("Node uncordoned")
        NODE_DRAIN = "node.drain", _("Node drain started")
        NODE_DRAIN_STOP = "node.drain_stop", _("Node drain stopped")
        ADDON_CHANGE = "addon.change", _("Add-on changed")
        ADDON_APPLY = "addon.apply", _("Add-on applied")
        ADDON_ROLLBACK = "addon.rollback", _("Add-on rolled back")
        PROJECT_CREATE = "project.create", _("Project created")
        PROJECT_CHANGE = "project.change", _("Project changed")
        PROJECT_DELETE = "project.delete", _("Project deleted")
        MEMBERSHIP_ADD = "membership.add", _("Member added")
        MEMBERSHIP_CHANGE = "membership.change", _("Member's role changed")
        MEMBERSHIP_REMOVE = "membership.remove", _("Member removed")
        ROLE_CHANGE = "role.change", _("User's rights changed")
        POLICY_CHANGE = "policy.change", _("Policy changed")
        KEPT_LOG_READ = "kept_log.read", _("Kept log read")

    class AuditResult(models.TextChoices):
        SUCCEEDED = "succeeded", _("Succeeded")
        ACCEPTED = "accepted", _("Accepted")
        REFUSED = "refused", _("Refused")
        FAILED = "failed", _("Failed")

    Action: TypeAlias = AuditAction  # noqa: UP040
    Result: TypeAlias = AuditResult  # noqa: UP040

    at = models.DateTimeField(_("at"), default=timezone.now)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Kept when the user is deleted; for a failed login, the name tried if such a user exists.
    actor_name = models.CharField(_("who"), max_length=150, blank=True)
    action = models.CharField(_("action"), max_length=32, choices=Action.choices)
    target = models.CharField(_("target"), max_length=200, blank=True)
    result = models.CharField(_("result"), max_length=16, choices=Result.choices)
    detail = models.CharField(_("detail"), max_length=500, blank=True)
    ip = models.GenericIPAddressField(_("IP address"), null=True, blank=True)
    user_agent = models.CharField(_("user agent"), max_length=300, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [
            models.Index(fields=["-at", "-id"], name="audit_at"),
            models.Index(fields=["actor_name", "-at"], name="audit_actor_at"),
            models.Index(fields=["action", "-at"], name="audit_action_at"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or '-'} {self.action} {self.result}"


class AuthFailure(models.Model):
    """A failed login or API token, counted per account and per address for rate limiting
    (console/ratelimit.py). Rows older than the window are deleted as new ones come."""

    key = models.CharField(max_length=200)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["key", "-at"], name="auth_failure_key_at")]

    def __str__(self) -> str:
        return f"{self.key} at {self.at}"
