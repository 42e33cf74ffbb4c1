"""The Jobs pages: the list, the job page and its Worker rows, the create/clone form, actions."""

from jobs.views.jobs.actions import job_delete, job_resume, job_stop
from jobs.views.jobs.detail import job_detail, job_record
from jobs.views.jobs.form import job_clone, job_new
from jobs.views.jobs.listing import job_list
from jobs.views.jobs.workers import task_workers

__all__ = [
    "job_clone",
    "job_delete",
    "job_detail",
    "job_list",
    "job_new",
    "job_record",
    "job_resume",
    "job_stop",
    "task_workers",
]
