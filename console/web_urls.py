"""The HTML pages. Every link carries href (and hx-get where a fragment refreshes)."""

from django.urls import include, path

from console.views import (
    addons,
    audit,
    cluster_admin,
    clusters,
    dashboard,
    drains,
    projects,
    tokens,
)
from jobs.views import jobs, workflows

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/new/", jobs.job_new, name="job_new"),
    path("jobs/<int:pk>/", jobs.job_detail, name="job"),
    path("jobs/<int:pk>/clone/", jobs.job_clone, name="job_clone"),
    path("jobs/<int:pk>/record/", jobs.job_record, name="job_record"),
    path("jobs/<int:pk>/metrics/", jobs.job_metrics, name="job_metrics"),
    path("jobs/<int:pk>/logs/", jobs.job_logs, name="job_logs"),
    path("jobs/<int:pk>/logs/download/", jobs.job_logs_download, name="job_logs_download"),
    path("jobs/<int:pk>/stop/", jobs.job_stop, name="job_stop"),
    path("jobs/<int:pk>/resume/", jobs.job_resume, name="job_resume"),
    path("jobs/<int:pk>/delete/", jobs.job_delete, name="job_delete"),
    path("", include("workers.urls")),
    path("", include("notify.urls")),
    path("", include("usage.urls")),
    path("workflows/", workflows.workflow_list, name="workflows"),
    path("workflows/<int:pk>/", workflows.workflow_detail, name="workflow"),
    path("clusters/", clusters.cluster_list, name="clusters"),
    path("clusters/new/", cluster_admin.cluster_new, name="cluster_new"),
    path("clusters/<slug:name>/", cluster_admin.cluster_page, name="cluster"),
    path("clusters/<slug:name>/test/", cluster_admin.cluster_test, name="cluster_test"),
    path("clusters/<slug:name>/rotate/", cluster_admin.cluster_rotate, name="cluster_rotate"),
    path("clusters/<slug:name>/retire/", cluster_admin.cluster_retire, name="cluster_retire"),
    path("nodes/", clusters.node_list, name="nodes"),
    path("addons/", clusters.addon_list, name="addons"),
    path("addons/<slug:cluster>/new/", addons.addon_new, name="addon_new"),
    path("addons/<slug:cluster>/<str:name>/", addons.addon_page, name="addon"),
    path("addons/<slug:cluster>/<str:name>/change/", addons.addon_change, name="addon_change"),
    path(
        "addons/<slug:cluster>/<str:name>/rollback/", addons.addon_rollback, name="addon_rollback"
    ),
    path("nodes/<slug:cluster>/<str:node>/", drains.node_page, name="node"),
    path("nodes/<slug:cluster>/<str:node>/cordon/", drains.node_cordon, name="node_cordon"),
    path("nodes/<slug:cluster>/<str:node>/uncordon/", drains.node_uncordon, name="node_uncordon"),
    path("nodes/<slug:cluster>/<str:node>/drain/", drains.node_drain, name="node_drain"),
    path("drains/<int:pk>/", drains.drain_page, name="drain"),
    path("drains/<int:pk>/stop/", drains.drain_stop, name="drain_stop"),
    path("projects/", projects.project_list, name="projects"),
    path("projects/<int:pk>/", projects.project_detail, name="project"),
    path("projects/<int:pk>/members/", projects.project_member_add, name="project_member_add"),
    path(
        "projects/<int:pk>/members/<int:member_pk>/role/",
        projects.project_member_role,
        name="project_member_role",
    ),
    path(
        "projects/<int:pk>/members/<int:member_pk>/remove/",
        projects.project_member_remove,
        name="project_member_remove",
    ),
    path("projects/<int:pk>/clusters/", projects.project_clusters, name="project_clusters"),
    path(
        "projects/<int:pk>/idle-policy/", projects.project_idle_policy, name="project_idle_policy"
    ),
    path("audit/", audit.audit_list, name="audit"),
    path("account/tokens/", tokens.token_list, name="api_tokens"),
    path("account/tokens/<int:pk>/revoke/", tokens.token_revoke, name="api_token_revoke"),
]
