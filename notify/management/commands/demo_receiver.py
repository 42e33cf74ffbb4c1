"""`make run`'s demo webhook receiver (notify.demo): serves until interrupted."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser

from notify import demo


class Command(BaseCommand):
    help = "Receive the demo user's webhook messages on loopback and show them on a page."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8025)

    def handle(self, *args: Any, **options: Any) -> None:
        inbox = demo.Inbox(demo.new_secret())
        server = demo.serve(inbox, options["port"])
        url = f"http://127.0.0.1:{server.server_address[1]}"
        user = User.objects.filter(username="demo").first()
        if user is not None:
            demo.register(user, f"{url}/hook", inbox.secret)
        self.stdout.write(f"demo webhook receiver: its page is {url}/")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        stop.wait()
        server.shutdown()
        server.server_close()
