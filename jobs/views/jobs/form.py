"""The create-job page (fields or YAML, or the "RLinf on Ray" template's choices) and clone,
which opens it prefilled (spec §Job status: after a failure, fix the configuration and clone it
into a new Job)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from console.web import HtmxHttpRequest
from jobs import rlinf
from jobs.access import (
    User,
    cannot_create,
    get_job_for_user,
    is_operator,
    operator_names,
    projects_for,
    usable_clusters,
)
from jobs.form_tabs import form_post, form_problem, spec_yaml, typed_spec
from jobs.forms import (
    ROLE_PREFIX,
    JobForm,
    RoleFormSet,
    YamlForm,
    apply_spec_errors,
    empty_role,
    job_initial,
    role_initial,
    spec_data,
    suggest_clone_name,
    typed_values,
)
from jobs.models import Job
from jobs.operations import create_job
from jobs.rlinf_form import RlinfForm, apply_rlinf_errors, rlinf_request
from jobs.spec import (
    JobSpec,
    SpecInvalid,
    job_spec_from_yaml,
    job_spec_to_yaml,
    load_spec_yaml,
    parse_job_spec,
    parse_rlinf_spec,
    spec_of,
)

NEW_JOB_YAML = """\
name: my-job
cluster: {cluster}
tasks:
  - role: worker
    kind: StatefulSet
    replicas: 1
    image: python:3.12
    command: [python, train.py]
    resources: {{cpu: "1", memory: 1Gi, gpu: 0}}
"""


@login_required
def job_new(request: HtmxHttpRequest) -> HttpResponse:
    return _job_form_page(request, source=None)


@login_required
def job_clone(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Anyone who may see a Job may clone it into a project where they may create jobs."""
    return _job_form_page(request, source=get_job_for_user(request.user, pk))


def _job_form_page(request: HtmxHttpRequest, source: Job | None) -> HttpResponse:
    projects = list(projects_for(request.user, write=True).values_list("name", flat=True))
    if not projects:
        return cannot_create_page(request)
    # The clusters of those projects (Project.clusters); reachable ones first: the likely
    # choice, and the YAML example's.
    usable = usable_clusters(request.user).order_by("-reachable", "name")
    clusters = list(usable.values_list("name", flat=True))
    page = _Page(request, source, projects, clusters)
    chosen = request.POST if request.method == "POST" else request.GET
    if source is None and chosen.get("template") == rlinf.TEMPLATE:
        return page.rlinf()
    if request.method != "POST":
        return page.render(*page.prefilled())
    if request.POST.get("mode") == "yaml":
        return page.submit_yaml()
    return page.submit_form()


class _Page:
    """The one page both tabs live on; whichever tab was submitted keeps what was typed."""

    def __init__(
        self, request: HtmxHttpRequest, source: Job | None, projects: list[str], clusters: list[str]
    ) -> None:
        self.request = request
        self.source = source
        self.projects = projects  # where the user may create jobs
        self.clusters = clusters
        # Why the Form tab cannot hold the source's spec (a template's, volumes): such a clone
        # opens on the YAML tab, where nothing of it is lost.
        self.formless = None if source is None else form_problem(_plain(spec_of(source)))

    def job_form(self, *args: Any, **kwargs: Any) -> JobForm:
        return JobForm(*args, projects=self.projects, clusters=self.clusters, **kwargs)

    def prefilled(self) -> tuple[JobForm, Any, YamlForm]:
        if self.source is None:
            initial = {"project": self.projects[0], "cluster": self.default_cluster()}
            job = self.job_form(initial=initial)
            roles = RoleFormSet(initial=[empty_role()], prefix=ROLE_PREFIX)
            example = self.clusters[0] if self.clusters else "CLUSTER"
            yaml_text = NEW_JOB_YAML.format(cluster=example)
            return job, roles, YamlForm(initial={"yaml": yaml_text})
        name = suggest_clone_name(self.source.name, _names_near(self.source, self.request.user))
        spec = spec_of(self.source).model_copy(update={"name": name})
        if spec.project not in self.projects:
            spec = spec.model_copy(update={"project": self.projects[0]})
        job = self.job_form(initial=job_initial(spec, name))
        roles = RoleFormSet(initial=[role_initial(task) for task in spec.tasks], prefix=ROLE_PREFIX)
        return job, roles, YamlForm(initial={"yaml": job_spec_to_yaml(spec)})

    def render(self, job: JobForm, roles: Any, yaml: YamlForm, mode: str = "") -> HttpResponse:
        asked = self.request.GET.get("mode", "yaml" if self.formless else "form")
        mode = mode or ("yaml" if asked == "yaml" else "form")
        has_errors = job.is_bound and (bool(job.errors) or any(r.errors for r in roles))
        context = {
            "source": self.source,
            "job_form": job,
            "roles": roles,
            "yaml_form": yaml,
            "mode": mode,
            "has_errors": has_errors,
            # Errors on show are shown again on the other tab (a switch carries them along).
            "checked": has_errors if mode == "form" else yaml.is_bound and bool(yaml.errors),
            "formless": self.formless,
            "several_projects": len(self.projects) > 1,
            "no_clusters": not self.clusters,
        }
        return render(self.request, "jobs/new.html", context)

    def default_cluster(self) -> str:
        return self.clusters[0] if len(self.clusters) == 1 else ""

    def rlinf(self) -> HttpResponse:
        """The template's form: its request judged by `parse_rlinf_spec`, as the API's is, and
        the Job created as any other (`_create`); "preview" shows the expanded spec instead."""
        kwargs = {"projects": self.projects, "clusters": self.clusters}
        if self.request.method != "POST":
            initial = {"project": self.projects[0], "cluster": self.default_cluster()}
            return self.render_rlinf(RlinfForm(initial=initial, **kwargs))
        form = RlinfForm(self.request.POST, **kwargs)
        form_valid = form.is_valid()

        def invalid(errors: Mapping[str, str]) -> HttpResponse:
            apply_rlinf_errors(errors, form)
            return self.render_rlinf(form)

        try:
            spec = parse_rlinf_spec(rlinf_request(form), self.request.user)
        except SpecInvalid as error:
            return invalid(error.errors)
        if not form_valid:
            return invalid({})
        if "preview" in self.request.POST:
            return self.render_rlinf(form, preview=job_spec_to_yaml(spec))
        return self._create(spec, invalid)

    def render_rlinf(self, form: RlinfForm, preview: str = "") -> HttpResponse:
        context = {
            "template_choice": rlinf.TEMPLATE,
            "rlinf_form": form,
            "has_errors": form.is_bound and bool(form.errors),
            "preview": preview,
            "several_projects": len(self.projects) > 1,
            "no_clusters": not self.clusters,
        }
        return render(self.request, "jobs/new.html", context)

    def submit_form(self) -> HttpResponse:
        post = self.request.POST
        if "add_role" in post or "remove_role" in post:
            return self._edit_roles()
        if post.get("switch") == "yaml":
            return self._form_to_yaml()
        job = self.job_form(post)
        roles = RoleFormSet(post, prefix=ROLE_PREFIX)
        forms_valid = all([job.is_valid(), roles.is_valid()])

        def invalid(errors: Mapping[str, str]) -> HttpResponse:
            apply_spec_errors(errors, job, list(roles.forms))
            return self.render(job, roles, self.prefilled()[2], "form")

        try:
            spec = parse_job_spec(spec_data(job, roles.forms), self.request.user)
        except SpecInvalid as error:
            return invalid(error.errors)
        if not forms_valid:
            return invalid({})
        return self._create(spec, invalid)

    def submit_yaml(self) -> HttpResponse:
        if self.request.POST.get("switch") == "form":
            return self._yaml_to_form()
        yaml = YamlForm(self.request.POST)

        def invalid(errors: Mapping[str, str]) -> HttpResponse:
            for path, message in errors.items():
                yaml.add_error("yaml", message if path == "yaml" else f"{path}: {message}")
            job, roles, _ = self.prefilled()
            return self.render(job, roles, yaml, "yaml")

        if not yaml.is_valid():
            return invalid({})
        try:
            spec = job_spec_from_yaml(yaml.cleaned_data["yaml"], self.request.user)
        except SpecInvalid as error:
            return invalid(error.errors)
        return self._create(spec, invalid)

    def _create(
        self, spec: JobSpec, invalid: Callable[[Mapping[str, str]], HttpResponse]
    ) -> HttpResponse:
        """create_job checks the spec against the database again (a name taken meanwhile)."""
        try:
            created = create_job(self.request.user, spec, cloned_from=self.source)
        except SpecInvalid as error:
            return invalid(error.errors)
        text = _("Job %(name)s created.")
        messages.success(self.request, text % {"name": created.name})
        return redirect(created)

    def _edit_roles(self) -> HttpResponse:
        """ "Add role" / "Remove role" without JavaScript: the page again, nothing typed lost."""
        post = self.request.POST
        values = [typed_values(form) for form in RoleFormSet(post, prefix=ROLE_PREFIX).forms]
        if "add_role" in post:
            values.append(empty_role())
        elif post["remove_role"].isdigit() and len(values) > 1:
            values.pop(min(int(post["remove_role"]), len(values) - 1))
        job = self.job_form(initial=typed_values(self.job_form(post)))
        roles = RoleFormSet(initial=values, prefix=ROLE_PREFIX)
        return self.render(job, roles, self.prefilled()[2], "form")

    def _form_to_yaml(self) -> HttpResponse:
        """The YAML tab with what the form holds; its errors too if the form showed them."""
        post = self.request.POST
        job = self.job_form(post)
        roles = RoleFormSet(post, prefix=ROLE_PREFIX)
        job.is_valid()
        roles.is_valid()  # cleaned values where they parse; typed_spec keeps the rest as text
        data = typed_spec(job, roles.forms)
        yaml = YamlForm({"yaml": spec_yaml(data)})
        if post.get("checked") and yaml.is_valid():
            try:
                parse_job_spec(data, self.request.user)
            except SpecInvalid as error:
                for path, message in error.errors.items():
                    yaml.add_error("yaml", f"{path}: {message}")
        else:
            yaml = YamlForm(initial={"yaml": yaml.data["yaml"]})
        job, roles, _ = self.prefilled()
        return self.render(job, roles, yaml, "yaml")

    def _yaml_to_form(self) -> HttpResponse:
        """The Form tab with what the YAML holds; its errors too if the YAML showed them. YAML
        that cannot be read, or that the form cannot hold, stays on its tab with the reason."""
        post = self.request.POST
        yaml = YamlForm(post)
        try:
            data = load_spec_yaml(post.get("yaml", ""))
            problem = form_problem(data)
        except SpecInvalid as error:
            problem = error.errors["yaml"]
        if problem is not None:
            yaml.is_valid()
            yaml.add_error("yaml", problem)
            job, roles, _ = self.prefilled()
            return self.render(job, roles, yaml, "yaml")
        values = form_post(data)
        job, roles = self.job_form(values), RoleFormSet(values, prefix=ROLE_PREFIX)
        if post.get("checked"):
            job.is_valid()
            roles.is_valid()
            try:
                parse_job_spec(data, self.request.user)
            except SpecInvalid as error:
                apply_spec_errors(error.errors, job, list(roles.forms))
        else:
            job = self.job_form(initial=typed_values(job))
            roles = RoleFormSet(initial=[typed_values(r) for r in roles.forms], prefix=ROLE_PREFIX)
        return self.render(job, roles, self.prefilled()[2], "form")


def _plain(spec: JobSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", exclude_none=True)


def cannot_create_page(request: HtmxHttpRequest) -> HttpResponse:
    """What a user who may create jobs in no project lacks, and who can grant it (403)."""
    context = {
        "reason": cannot_create(request.user),
        "operators": operator_names(),
        "is_operator": is_operator(request.user),
    }
    return render(request, "jobs/cannot_create.html", context, status=403)


def _names_near(job: Job, user: User) -> list[str]:
    """Names the user can see already used where the clone would live. Names of other projects'
    Jobs are left out: skipping them would reveal them (such a name is refused at submit as
    "not available")."""
    base = job.name.rsplit("-", 1)[0]
    visible = Job.objects.filter(project__in=projects_for(user))
    same_place = visible.filter(cluster=job.cluster_id, namespace=job.namespace)
    return list(same_place.filter(name__startswith=base).values_list("name", flat=True))
