"""The Jobs pages: the list, the job page, the create/clone form, actions (the Worker rows of a
Task are the workers app's page)."""

from jobs.views.jobs.actions import job_delete, job_resume, job_stop
from jobs.views.jobs.detail import job_detail, job_record
from jobs.views.jobs.form import job_clone, job_new
from jobs.views.jobs.listing import job_list
from jobs.views.jobs.logs import job_logs, job_logs_download
from jobs.views.jobs.metrics import job_metrics

__all__ = [
    "job_clone",
    "job_delete",
    "job_detail",
    "job_list",
    "job_logs",
    "job_logs_download",
    "job_metrics",
    "job_new",
    "job_record",
    "job_resume",
    "job_stop",
]
