"""One poll interval (issue 31, item 10; STYLE.md 8): every polled fragment asks for news every
`console.web.POLL_SECONDS`, given to every template by a context processor, and no template
writes an interval of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from console import web

TEMPLATES = Path(settings.BASE_DIR) / "templates"
# An interval written as a number: `every 5s`, `every 500ms`, `every 1m` (htmx's polling).
LITERAL_INTERVAL = re.compile(r"every\s+\d")
POLLED = re.compile(r"<[^>]*\bdata-poll\b[^>]*>")
ONE_INTERVAL = 'hx-trigger="every {{ poll_seconds }}s'


def _templates() -> list[Path]:
    return sorted(TEMPLATES.rglob("*.html"))


def test_it_hard_codes_no_interval_in_any_template() -> None:
    found = [
        f"{path.relative_to(TEMPLATES)}: {match.group(0)}"
        for path in _templates()
        for match in LITERAL_INTERVAL.finditer(path.read_text())
    ]
    assert found == []


def polled_tags() -> list[tuple[str, str]]:
    """(template, tag) for every polled tag of every template, several in one template too."""
    return [
        (str(path.relative_to(TEMPLATES)), tag)
        for path in _templates()
        for tag in POLLED.findall(path.read_text())
    ]


def test_it_polls_every_polled_fragment_at_the_one_interval() -> None:
    tags = polled_tags()
    assert len({name for name, _ in tags}) >= 10  # the dashboard, the lists, the job, its logs, ...
    assert [(name, tag) for name, tag in tags if ONE_INTERVAL not in tag] == []


def test_it_checks_each_polled_tag_of_a_template_not_only_its_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        '<div data-poll hx-trigger="every 3s, refresh"></div>\n'
        f'<div data-poll {ONE_INTERVAL}, refresh"></div>\n'
    )
    monkeypatch.setattr(f"{__name__}.TEMPLATES", tmp_path)
    assert [tag for _, tag in polled_tags() if ONE_INTERVAL not in tag] == [
        '<div data-poll hx-trigger="every 3s, refresh">'
    ]


@pytest.mark.parametrize("url", ["/", "/jobs/", "/workflows/", "/clusters/", "/nodes/", "/addons/"])
def test_it_renders_the_setting_into_each_page(
    client: Client, olga: User, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web, "POLL_SECONDS", 7)
    client.force_login(olga)
    html = client.get(url).content.decode()
    assert 'hx-trigger="every 7s, refresh"' in html
    assert "every 5s" not in html
