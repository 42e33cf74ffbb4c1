"""The helpers every polled page shares (console.web): a poll that sends back the version of what
it would render anyway is answered 204; another language or ages that may have moved on (a
crossed age step) render the fragment again. No database: the helpers take plain values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from django.http import HttpResponse
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from console.web import (
    AGE_STEP_SECONDS,
    HtmxHttpRequest,
    age_step,
    age_words,
    duration_words,
    not_modified,
    poll_version,
)

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HTMX = {"HX-Request": "true"}


def request(
    version: str = "", language: str = "en", headers: dict[str, str] = HTMX
) -> HtmxHttpRequest:
    """A request as the middlewares leave it: `htmx` and `LANGUAGE_CODE` set."""
    query = {"v": version} if version else {}
    made = cast(HtmxHttpRequest, RequestFactory().get("/jobs/", query, headers=headers))
    made.htmx = HtmxDetails(made)
    made.LANGUAGE_CODE = language
    return made


def view(polled: HtmxHttpRequest, now: datetime) -> HttpResponse:
    """What every polled view does: its version, then 204 or the fragment."""
    version = poll_version(polled, "Running", 3, now=now)
    return not_modified(polled, version) or HttpResponse(version)


def first_version(now: datetime = NOW, language: str = "en") -> str:
    return view(request(language=language), now).content.decode()


def test_it_answers_204_to_a_poll_that_already_shows_this_version() -> None:
    response = view(request(first_version()), NOW + timedelta(seconds=5))
    assert response.status_code == 204
    assert response.content == b""


def test_it_renders_again_for_a_reader_in_another_language() -> None:
    polled = request(first_version(language="en"), language="zh-hans")
    assert view(polled, NOW).status_code == 200


def test_it_renders_again_once_the_ages_shown_may_have_moved_on() -> None:
    """Across an age step the facts are the same but the words of the `when` tag may not be."""
    later = NOW + timedelta(seconds=AGE_STEP_SECONDS)
    assert age_step(later) == age_step(NOW) + 1
    response = view(request(first_version()), later)
    assert response.status_code == 200
    assert response.content.decode() != first_version()


def test_it_renders_when_the_facts_changed() -> None:
    polled = request(first_version())
    version = poll_version(polled, "Succeeded", 3, now=NOW)
    assert not_modified(polled, version) is None


def test_it_renders_a_page_that_was_not_a_poll() -> None:
    """Without htmx (a reload, a link opened without JavaScript) there is no fragment to keep."""
    plain = request(first_version(), headers={})
    assert view(plain, NOW).status_code == 200


def test_it_versions_the_facts_and_the_language_alone_without_a_clock() -> None:
    """The dashboard words its ages into its facts: no age step, so time alone changes nothing."""
    polled = request()
    assert poll_version(polled, "Running") == poll_version(polled, "Running")
    assert poll_version(polled, "Running") != poll_version(polled, "Running", now=NOW)


def test_it_words_an_age_beside_its_time_coarsely() -> None:
    assert age_words(NOW - timedelta(seconds=9), NOW) == "just now"
    assert age_words(NOW - timedelta(seconds=59), NOW) == "under a minute ago"
    assert age_words(NOW - timedelta(minutes=3, seconds=10), NOW) == "3\xa0minutes ago"


def test_it_words_a_duration_without_zero_minutes() -> None:
    assert duration_words(NOW - timedelta(seconds=59), NOW) == "under a minute"
    assert duration_words(NOW - timedelta(hours=2, minutes=5), NOW) == "2\xa0hours"
