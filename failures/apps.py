from django.apps import AppConfig


class FailuresConfig(AppConfig):
    name = "failures"
    verbose_name = "Failures"
