"""The Worker pages, at the paths and names they had under the Jobs pages."""

from django.urls import path

from workers import views

urlpatterns = [
    path("jobs/<int:pk>/tasks/<int:task_pk>/workers/", views.task_workers, name="task_workers"),
]
