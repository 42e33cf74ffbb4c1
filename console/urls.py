from django.contrib import admin
from django.urls import include, path

from console.views.login import login
from usage import api as usage_api

handler500 = "console.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", login, name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    # jobs.api.api, with /usage and /usage.csv registered (usage.api) before its catch-all 404
    path("api/v1/", usage_api.urls()),
    path("", include("console.web_urls")),
]
