from django.apps import AppConfig


class SimclusterConfig(AppConfig):
    name = "simcluster"
    verbose_name = "Simulated cluster"
