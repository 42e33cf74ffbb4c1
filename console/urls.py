from django.contrib import admin
from django.urls import include, path

from console import api_platform  # noqa: F401 (the operators' endpoints on `api`)
from console.views.login import login
from jobs.api import api
from jobs.api.series import job_series
from notify import api as notify_api  # noqa: F401 (/channels and /subscriptions on `api`)
from usage import api as usage_api  # noqa: F401 (/usage and /usage.csv on `api`)

handler500 = "console.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", login, name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/v1/jobs/<int:job_id>/series", job_series, name="api-job-series"),
    path("api/v1/", api.urls),
    path("", include("console.web_urls")),
]
