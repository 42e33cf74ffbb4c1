"""E-mail channels through a real local SMTP server (aiosmtpd), configured by Django 6.1's
MAILERS as TRAINYARD_EMAIL_URL fills it (issue 32 §Build 2, §Show)."""

from __future__ import annotations

import email
import errno
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Message as MessageHandler
from aiosmtpd.smtp import AuthResult
from django.contrib.auth.models import User

from console.settings import mailers
from notify.choices import ChannelState, Kind, SendStatus
from notify.deliver import drain, send_test
from notify.models import Outbox
from tests.notify.conftest import channel
from tests.notify.test_senders import FACTS

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


class Inbox(MessageHandler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[Message] = []

    def handle_message(self, message: Message) -> None:
        self.messages.append(message)

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str,
                     auth_data: Any) -> AuthResult:  # fmt: skip
        """The login TRAINYARD_EMAIL_URL carries, and no other."""
        known = (auth_data.login, auth_data.password) == (b"trainyard", b"secret")
        return AuthResult(success=known, handled=False)


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    inbox = Inbox()
    for port in range(8150, 8160):
        controller = Controller(
            inbox, hostname="127.0.0.1", port=port, auth_require_tls=False,
            authenticator=inbox.authenticate,
        )  # fmt: skip
        try:
            controller.start()
            break
        except (OSError, RuntimeError) as error:
            if isinstance(error, OSError) and error.errno != errno.EADDRINUSE:
                raise
    url = f"smtp://trainyard:secret@127.0.0.1:{controller.port}"
    settings.TRAINYARD_EMAIL_URL, settings.MAILERS = url, mailers(url)
    settings.TRAINYARD_EMAIL_FROM = "trainyard@example.com"
    try:
        yield inbox
    finally:
        controller.stop()


def test_it_reads_the_mail_server_from_trainyard_email_url() -> None:
    options = mailers("smtps://ops%40example.com:p%40ss@mail.example.com")["default"]["OPTIONS"]
    assert (options["host"], options["port"], options["use_ssl"]) == ("mail.example.com", 465, True)
    assert (options["username"], options["password"]) == ("ops@example.com", "p@ss")
    assert mailers("")["default"]["OPTIONS"]["host"] == "localhost"


def test_it_sends_plain_text_and_html_through_a_real_smtp_server(alice: User, smtp: Inbox) -> None:
    inbox = channel(alice, "alice@example.com", kind=Kind.EMAIL)
    row = Outbox.objects.create(channel=inbox, subject="job:7", event="workload.stalled",
                                facts=FACTS, created_at=T0, next_attempt_at=T0)  # fmt: skip
    drain(T0)
    row.refresh_from_db()
    assert row.status == SendStatus.SENT
    (message,) = smtp.messages
    assert message["To"] == "alice@example.com" and message["From"] == "trainyard@example.com"
    assert "ppo-7b" in message["Subject"]
    parsed = email.message_from_string(message.as_string())
    types = [part.get_content_type() for part in parsed.walk()]
    assert "text/plain" in types and "text/html" in types
    html = next(p for p in parsed.walk() if p.get_content_type() == "text/html")
    body = html.get_payload(decode=True)
    assert isinstance(body, bytes) and b"https://console.example.com/jobs/7/" in body


def test_it_says_when_mail_is_not_configured(alice: User, settings: Any) -> None:
    settings.TRAINYARD_EMAIL_URL = ""
    inbox = channel(alice, "alice@example.com", kind=Kind.EMAIL)
    delivery = send_test(inbox, T0)
    inbox.refresh_from_db()
    assert delivery.status == SendStatus.FAILED and "TRAINYARD_EMAIL_URL" in delivery.message
    assert inbox.state == ChannelState.BROKEN


def test_a_wrong_login_is_a_configuration_error(alice: User, smtp: Inbox, settings: Any) -> None:
    url = settings.TRAINYARD_EMAIL_URL.replace(":secret@", ":wrong@")
    settings.TRAINYARD_EMAIL_URL, settings.MAILERS = url, mailers(url)
    inbox = channel(alice, "alice@example.com", kind=Kind.EMAIL)
    delivery = send_test(inbox, T0)
    assert (delivery.status, delivery.platform_code) == (SendStatus.FAILED, "535")
    assert smtp.messages == []
