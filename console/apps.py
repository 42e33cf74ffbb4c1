from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Platform"

    def ready(self) -> None:
        from console import (
            audit,
            health,  # noqa: F401 (registers its deploy check)
            lookups,  # noqa: F401 (registers `any_of`)
            sessions,
            tokens,
        )

        audit.connect_signals()
        tokens.connect_signals()
        sessions.connect_signals()
