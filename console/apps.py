from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Platform"

    def ready(self) -> None:
        from console import health  # noqa: F401 (registers its deploy check)
