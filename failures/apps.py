from django.apps import AppConfig
from django.db.models.signals import pre_delete


class FailuresConfig(AppConfig):
    name = "failures"
    verbose_name = "Failures"

    def ready(self) -> None:
        from console.models import Project
        from failures.store import forget_project

        pre_delete.connect(forget_project, sender=Project, dispatch_uid="kept_logs_of_project")
