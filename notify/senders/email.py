"""E-mail through Django's mail framework, configured by Django 6.1's MAILERS setting (filled
from TRAINYARD_EMAIL_URL, console/settings.py): plain text plus HTML, in the channel's language.
An SMTP refusal of the recipient or of our login is a configuration error; a connection that
fails is retried."""

from __future__ import annotations

import smtplib
import time
from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, mailers
from django.template.loader import render_to_string
from django.utils import translation

from notify.render import Rendered
from notify.senders import Outcome, Target, Verdict

CONFIG_ERRORS = (
    smtplib.SMTPAuthenticationError,
    smtplib.SMTPRecipientsRefused,
    smtplib.SMTPSenderRefused,
    smtplib.SMTPNotSupportedError,
)


def message(target: Target, rendered: Rendered) -> EmailMultiAlternatives:
    text = "\n".join([*rendered.lines, rendered.link]).strip() + "\n"
    email = EmailMultiAlternatives(
        rendered.title, text, settings.TRAINYARD_EMAIL_FROM, [target.url]
    )
    with translation.override(target.language):
        html = render_to_string("notify/email.html", {"message": rendered})
    email.attach_alternative(html, "text/html")
    return email


def send(target: Target, rendered: Rendered, now: datetime) -> Outcome:
    if not settings.TRAINYARD_EMAIL_URL:
        return Outcome(Verdict.BROKEN, "E-mail is not configured (TRAINYARD_EMAIL_URL).")
    started = time.monotonic()
    try:
        with mailers.default as connection:  # closed, a half-open login included
            connection.send_messages([message(target, rendered)])
    except CONFIG_ERRORS as error:
        return Outcome(Verdict.BROKEN, _said(error), platform_code=_code(error))
    except (smtplib.SMTPException, OSError) as error:
        return Outcome(Verdict.RETRY, _said(error), platform_code=_code(error))
    latency = round((time.monotonic() - started) * 1000)
    return Outcome(Verdict.SENT, "250 accepted", latency_ms=latency)


def _code(error: Exception) -> str:
    code = getattr(error, "smtp_code", None)
    return str(code) if code is not None else ""


def _said(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"[:2048]
