"""A message in words, from an outbox row's facts, in the channel's language: complete in
English and in 简体中文 (names apart), the same content for every platform, each sender laying it
out its own way (a card, markdown, blocks, an e-mail)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import translation
from django.utils.dateparse import parse_datetime
from django.utils.timesince import timesince
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from jobs.choices import SignalSource
from jobs.messages import render_text
from notify.choices import Event, Language


@dataclass(frozen=True)
class Rendered:
    title: str
    lines: list[str]
    link: str
    link_text: str
    event: str
    resolved: bool


def _when(value: Any) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) else None


def _ago(value: Any, now: datetime) -> str:
    moment = _when(value)
    return timesince(moment, now) if moment else ""


def _workload_line(workload: Mapping[str, Any], now: datetime) -> str:
    state = str(workload.get("state") or "")
    source, age = workload.get("source"), _ago(workload.get("reported_at"), now)
    if source in SignalSource.values:
        source = SignalSource(source).label
    if source and age:
        return _("Workload: %(state)s (from %(source)s, %(age)s ago)") % {
            "state": state, "source": source, "age": age,
        }  # fmt: skip
    return _("Workload: %(state)s") % {"state": state}


def _gpu_line(facts: Mapping[str, Any], now: datetime) -> str:
    gpus, since = int(facts.get("gpus") or 0), _ago(facts.get("gpus_since"), now)
    if not gpus:
        return ""
    held = ngettext("%(count)s GPU", "%(count)s GPUs", gpus) % {"count": gpus}
    if since:
        return _("%(gpus)s held for %(age)s") % {"gpus": held, "age": since}
    return _("%(gpus)s requested") % {"gpus": held}


def _event_words(event: str, resolved: bool) -> str:
    label = str(Event(event).label) if event in Event.values else event
    if event == Event.CLUSTER_RECOVERED:
        return label
    return _("%(event)s: resolved") % {"event": label} if resolved else label


def _subject(facts: Mapping[str, Any]) -> str:
    job = facts.get("job") or {}
    if job:
        return _("Job %(name)s (project %(project)s)") % {
            "name": job.get("name", ""), "project": job.get("project", ""),
        }  # fmt: skip
    detail = facts.get("detail") or ""
    if facts.get("event") == Event.ADDON_FAILED and detail:
        return _("Add-on %(name)s on cluster %(cluster)s") % {
            "name": detail, "cluster": facts.get("cluster", ""),
        }  # fmt: skip
    return _("Cluster %(name)s") % {"name": facts.get("cluster", "")}


def failure_words(facts: Mapping[str, Any], language: str) -> dict[str, str] | None:
    """The failure of the Job's run (notify.facts.failure_facts) as the channel's language says
    it: {label, class (the API's value), class_label, advice}; None when none was named."""
    failure = facts.get("failure") or {}
    said = failure.get(language) or failure.get(Language.EN)
    if not said:
        return None
    return {"class": str(failure.get("class", "")), **said}


def _failure_lines(facts: Mapping[str, Any]) -> list[str]:
    said = failure_words(facts, translation.get_language() or Language.EN)
    if said is None:
        return []
    named = _("Failure: %(label)s (%(class)s)") % {
        "label": said["label"], "class": said["class_label"],
    }  # fmt: skip
    advice = _("Advice: %(advice)s") % {"advice": said["advice"]} if said["advice"] else ""
    return [named, advice] if advice else [named]


def _lines(facts: Mapping[str, Any], now: datetime) -> list[str]:
    lines = [_subject(facts)]
    job, workload = facts.get("job") or {}, facts.get("workload") or {}
    if job:
        lines.append(_("Cluster: %(cluster)s, phase %(phase)s") % {
            "cluster": job.get("cluster", ""), "phase": job.get("phase", ""),
        })  # fmt: skip
    if workload:
        lines.append(_workload_line(workload, now))
        step, max_steps = workload.get("step"), workload.get("max_steps")
        if step is not None:
            numbers = {"step": f"{step:,}", "max_steps": f"{max_steps:,}" if max_steps else ""}
            words = (
                _("Last step %(step)s of %(max_steps)s") if max_steps else _("Last step %(step)s")
            )
            lines.append(words % numbers)
        if workload.get("reason"):
            lines.append(_("Why: %(reason)s") % {"reason": render_text(workload["reason"])})
    lines += _failure_lines(facts)
    if facts.get("repeat"):
        lines.append(_("Still so, %(age)s after it began.") % {
            "age": _ago(facts.get("opened_at"), now),
        })  # fmt: skip
    gpus = _gpu_line(facts, now)
    return [*lines, gpus] if gpus else lines


def render(facts: Mapping[str, Any], language: str, now: datetime) -> Rendered:
    """One message; a digest (facts["digest"]: the merged messages' facts) says each in a line."""
    with translation.override(language):
        event, resolved = str(facts.get("event", "")), bool(facts.get("resolved"))
        if facts.get("digest"):
            return _digest(facts["digest"], now)
        name = (facts.get("job") or {}).get("name") or facts.get("cluster") or ""
        title = f"[Trainyard] {_event_words(event, resolved)}: {name}"
        link = (facts.get("job") or {}).get("url", "")
        return Rendered(title, _lines(facts, now), link, _("Open the Job"), event, resolved)


def _digest(merged: Sequence[Mapping[str, Any]], now: datetime) -> Rendered:
    count = len(merged)
    title = ngettext(
        "[Trainyard] %(count)s message held back by the rate limit",
        "[Trainyard] %(count)s messages held back by the rate limit",
        count,
    ) % {"count": count}
    lines = [
        f"{_event_words(str(m.get('event', '')), bool(m.get('resolved')))}: {_subject(m)}"
        for m in merged
    ]
    return Rendered(title, lines, "", "", "digest", False)


def trial_message(language: str) -> Rendered:
    with translation.override(language):
        return Rendered(
            _("[Trainyard] Test message"),
            [_("This channel works: Trainyard can reach it.")],
            "", "", "test", False,
        )  # fmt: skip
