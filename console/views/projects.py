"""Projects: everyone sees the projects they belong to, with their members and clusters (whom to
ask, where jobs may run); operators see every project, create projects, add, re-role and remove
members, and choose which clusters each project may use (jobs.access: the roles)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from console import projects as changes
from console.models import Cluster, Membership, Project
from jobs.access import is_operator, operator_names, projects_for


class ProjectForm(forms.ModelForm):
    class Meta:
        model = Project
        fields = ["name"]
        help_texts = {"name": gettext_lazy("Letters, digits, - and _.")}


class MemberForm(forms.Form):
    username = forms.CharField(label=gettext_lazy("User name"), max_length=150)
    role = forms.ChoiceField(
        label=gettext_lazy("Role"), choices=Membership.Role.choices, initial=Membership.Role.MEMBER
    )

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.project = project

    def clean_username(self) -> Any:
        """The active user of that name, who is not in the project yet."""
        name = self.cleaned_data["username"].strip()
        user = changes.active_user(name)
        if user is None:
            raise forms.ValidationError(_("No active user is named %(name)s.") % {"name": name})
        if self.project.memberships.filter(user=user).exists():
            message = _("%(name)s is already in this project: change their role below.")
            raise forms.ValidationError(message % {"name": name})
        return user


class RoleForm(forms.Form):
    role = forms.ChoiceField(label=gettext_lazy("Role"), choices=Membership.Role.choices)


class ClustersForm(forms.Form):
    clusters = forms.ModelMultipleChoiceField(
        label=gettext_lazy("Clusters this project's jobs may run on"),
        queryset=Cluster.objects.order_by("name"),
        widget=forms.CheckboxSelectMultiple,
        required=False,
    )


class IdlePolicyForm(forms.Form):
    stop_when_idle_minutes = forms.IntegerField(
        label=gettext_lazy("Stop a job when idle for (minutes)"),
        required=False,
        min_value=1,
        max_value=10_080,
        help_text=gettext_lazy(
            "The default of the project's jobs: stop one whose workload was Stalled, "
            "Unresponsive or finished (its GPUs still held) this long; never a Silent one. A job "
            "may set its own, or 0 to keep it off. Empty: no default."
        ),
    )


def _visible_project(request: HttpRequest, pk: int) -> Project:
    """The project, or 404 for anyone who does not see it (no hint that it exists)."""
    project = projects_for(request.user).filter(pk=pk).first()
    if project is None:
        raise Http404("No such project.")
    return project


def _operated_project(request: HttpRequest, pk: int) -> Project:
    """The project for a change: 404 as above, then 403 for anyone but an operator."""
    project = _visible_project(request, pk)
    if not is_operator(request.user):
        raise PermissionDenied(_("Only operators manage projects, their members and clusters."))
    return project


def _project_rows(request: HttpRequest) -> list[tuple[Project, str | None]]:
    """The projects the reader sees, with counts, clusters and the reader's role in each."""
    clusters = Prefetch("clusters", queryset=Cluster.objects.order_by("name").only("pk", "name"))
    live = Q(jobs__delete_requested_at__isnull=True)
    projects = (
        projects_for(request.user)
        .annotate(
            member_count=Count("memberships", distinct=True),
            job_count=Count("jobs", filter=live, distinct=True),
        )
        .prefetch_related(clusters)
    )
    reader: Any = request.user.pk  # login_required: a user's
    mine = Membership.objects.filter(user_id=reader)
    roles = dict(mine.values_list("project_id", "role"))
    return [(project, roles.get(project.pk)) for project in projects]


@login_required
@require_http_methods(["GET", "POST"])
def project_list(request: HttpRequest) -> HttpResponse:
    """The projects the user sees, with their role in each; a POST (operators) creates one."""
    operator = is_operator(request.user)
    form = ProjectForm(request.POST or None) if operator else None
    if request.method == "POST":
        if form is None:
            raise PermissionDenied(_("Only operators create projects."))
        if form.is_valid():
            project = changes.create_project(form.cleaned_data["name"], request.user)
            messages.success(request, _("Project %(name)s created.") % {"name": project.name})
            return redirect("project", project.pk)
    context = {
        "projects": _project_rows(request),
        "form": form,
        "operator": operator,
        "operators": operator_names(),
    }
    return render(request, "console/projects.html", context)


def _detail(request: HttpRequest, project: Project, **forms_shown: Any) -> HttpResponse:
    operator = is_operator(request.user)
    memberships = project.memberships.select_related("user").order_by("user__username")
    context = {
        "project": project,
        "memberships": list(memberships),
        "clusters": list(project.clusters.order_by("name")),
        "operator": operator,
        "operators": operator_names(),
        "roles": Membership.Role.choices,
        "member_form": forms_shown.get("member_form") or MemberForm(project=project),
        "clusters_form": forms_shown.get("clusters_form")
        or ClustersForm(initial={"clusters": project.clusters.all()}),
        "idle_form": forms_shown.get("idle_form")
        or IdlePolicyForm(initial={"stop_when_idle_minutes": project.stop_when_idle_minutes}),
    }
    status = 422 if forms_shown else 200
    return render(request, "console/project.html", context, status=status)


@login_required
def project_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _detail(request, _visible_project(request, pk))


@login_required
@require_POST
def project_member_add(request: HttpRequest, pk: int) -> HttpResponse:
    project = _operated_project(request, pk)
    form = MemberForm(request.POST, project=project)
    if not form.is_valid():
        return _detail(request, project, member_form=form)
    user, role = form.cleaned_data["username"], Membership.Role(form.cleaned_data["role"])
    changes.add_member(project, user, role, request.user)
    text = _("%(user)s added to %(project)s as %(role)s.")
    messages.success(request, text % {"user": user, "project": project, "role": role.label})
    return redirect("project", project.pk)


@login_required
@require_POST
def project_member_role(request: HttpRequest, pk: int, member_pk: int) -> HttpResponse:
    project = _operated_project(request, pk)
    membership = get_object_or_404(Membership.objects.select_related("user"), pk=member_pk,
                                   project=project)  # fmt: skip
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Choose a role: member or viewer."))
        return redirect("project", project.pk)
    role = Membership.Role(form.cleaned_data["role"])
    if changes.change_role(membership, role, request.user):
        text = _("%(user)s is now %(role)s of %(project)s.")
        messages.success(
            request, text % {"user": membership.user, "role": role.label, "project": project}
        )
    return redirect("project", project.pk)


@login_required
@require_POST
def project_member_remove(request: HttpRequest, pk: int, member_pk: int) -> HttpResponse:
    project = _operated_project(request, pk)
    membership = get_object_or_404(Membership.objects.select_related("user"), pk=member_pk,
                                   project=project)  # fmt: skip
    changes.remove_member(membership, request.user)
    text = _("%(user)s removed from %(project)s.")
    messages.success(request, text % {"user": membership.user, "project": project})
    return redirect("project", project.pk)


@login_required
@require_POST
def project_clusters(request: HttpRequest, pk: int) -> HttpResponse:
    project = _operated_project(request, pk)
    form = ClustersForm(request.POST)
    if not form.is_valid():
        return _detail(request, project, clusters_form=form)
    changes.set_clusters(project, form.cleaned_data["clusters"], request.user)
    messages.success(request, _("The clusters of %(project)s are saved.") % {"project": project})
    return redirect("project", project.pk)


@login_required
@require_POST
def project_idle_policy(request: HttpRequest, pk: int) -> HttpResponse:
    """The idle policy's default for the project's Jobs (docs/usage.md), set by operators."""
    project = _operated_project(request, pk)
    form = IdlePolicyForm(request.POST)
    if not form.is_valid():
        return _detail(request, project, idle_form=form)
    changes.set_idle_default(project, form.cleaned_data["stop_when_idle_minutes"], request.user)
    messages.success(request, _("The idle policy of %(project)s is saved.") % {"project": project})
    return redirect("project", project.pk)
