"""Platform objects: projects and their members, clusters, nodes, add-ons, API tokens."""

from __future__ import annotations

import hashlib
import secrets
from typing import TypeAlias

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from console.fields import KubeconfigField


class Project(models.Model):
    """Every Job and Workflow belongs to one; every query of them is scoped by membership."""

    name = models.SlugField(_("name"), max_length=63, unique=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["name"]

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
    context = models.CharField(_("context"), max_length=253, blank=True)
    namespace = models.CharField(_("default namespace"), max_length=63, default="default")
    reachable = models.BooleanField(_("reachable"), default=False)
    message = models.TextField(_("message"), blank=True)
    last_synced_at = models.DateTimeField(_("last successful sync at"), null=True, blank=True)
    last_attempt_at = models.DateTimeField(_("last sync attempt at"), null=True, blank=True)
    # A lease taken by a conditional UPDATE, so overlapping beats never sync a cluster twice.
    sync_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A data-plane node. Online/Offline is its phase; `unschedulable` is a separate flag."""

    # Each vocabulary's class name is its schema's name in the OpenAPI document: a second
    # "Phase" would overwrite the first there (Node phases listed as Addon phases).
    class NodePhase(models.TextChoices):
        ONLINE = "Online", _("Online")
        OFFLINE = "Offline", _("Offline")

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

    class AddonPhase(models.TextChoices):  # named for the OpenAPI document, as Node's
        PENDING = "Pending", _("Pending")
        INSTALLING = "Installing", _("Installing")
        READY = "Ready", _("Ready")
        FAILED = "Failed", _("Failed")
        UPGRADING = "Upgrading", _("Upgrading")

    Phase: TypeAlias = AddonPhase  # noqa: UP040

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

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="one_addon_per_name")
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class ApiToken(models.Model):
    """A bearer token for the JSON API. Only its SHA-256 is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=100, blank=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.name or self.pk}"

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def issue(cls, user: models.Model, name: str = "") -> tuple[ApiToken, str]:
        """Creates a token and returns it with its plain text, which is shown once."""
        plain = "ty_" + secrets.token_urlsafe(32)
        return cls.objects.create(user=user, name=name, token_hash=cls.hash(plain)), plain
