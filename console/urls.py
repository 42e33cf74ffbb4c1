from django.contrib import admin
from django.urls import include, path

from console.api_platform import api  # jobs.api's API, with the operators' endpoints
from console.views.login import login

handler500 = "console.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", login, name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/v1/", api.urls),
    path("", include("console.web_urls")),
]
