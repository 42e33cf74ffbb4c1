"""The web process's application, loaded in full before its first request."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_wsgi_application()


def warm_up() -> None:
    """Load now what Django loads lazily on a process's first request: the URLconf (with the
    API's routes and schemas) and each language's messages. Else the first requests a new
    worker takes wait most of a second behind it, and every pod's signal queued behind them."""
    from django.conf import settings
    from django.urls import get_resolver
    from django.utils import translation

    get_resolver().url_patterns  # noqa: B018 (imports the URLconf)
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            translation.gettext("Jobs")


warm_up()
