"""The console in 简体中文 and English (issue 5): a complete, compiled catalogue; the language
from the browser's Accept-Language, or from the switch once chosen; and the spec's status values
and object names (spec §Job status, §Node and Addon status: Pending, Running, Online, Ready...)
left in English in both languages, as the Chinese spec itself writes them."""

from __future__ import annotations

import ast
import gettext
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation

from console.models import Addon, Cluster, Node, Project
from jobs.choices import Action, JobPhase, PodPhase, TaskPhase
from jobs.models import Job, Operation, Task, Workflow, WorkflowEdge
from workers.models import Worker

LOCALE = Path(settings.BASE_DIR) / "locale"
PO = LOCALE / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
# What `makemessages` reads: the project's own code and templates (as in the Makefile's target).
SOURCES = ("console", "failures", "jobs", "notify", "usage", "workers", "templates", "manage.py")
IGNORED = ("--ignore=.venv", "--ignore=var", "--ignore=tests", "--ignore=simcluster")
TEMPLATE = {"role": "worker", "kind": "StatefulSet", "replicas": 2, "image": "rlinf:1"}
NOW = datetime.now(UTC)
ZH = ("zh-CN", "zh-Hans", "zh-Hans-CN,zh;q=0.9,en;q=0.8")


# --- the catalogue ----------------------------------------------------------------------------


@dataclass
class Entry:
    """One message of a PO file; `msgstr` holds every form (one in Chinese: nplurals=1)."""

    msgid: str = ""
    msgid_plural: str | None = None
    msgctxt: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    @property
    def key(self) -> tuple[str | None, str, str | None]:
        return (self.msgctxt, self.msgid, self.msgid_plural)


_KEYWORD = re.compile(r'^(msgctxt|msgid_plural|msgid|msgstr)(?:\[(\d+)\])?\s+(".*")$')


def read_po(path: Path) -> list[Entry]:
    """Every entry but the header. Obsolete (#~) entries are kept out: gettext ignores them."""
    entries: list[Entry] = []
    entry: Entry | None = None
    target: tuple[str, int] = ("", 0)
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip() or line.startswith("#~"):
            if entry is not None and entry.msgid:
                entries.append(entry)
            entry = None if not line.strip() else entry
            continue
        entry = entry or Entry()
        if line.startswith("#,"):
            entry.flags |= {flag.strip() for flag in line[2:].split(",")}
            continue
        if line.startswith("#"):
            continue
        match = _KEYWORD.match(line)
        if match:
            keyword, index, text = match.group(1), int(match.group(2) or 0), match.group(3)
            target = (keyword, index)
            _append(entry, target, ast.literal_eval(text), start=True)
        else:
            assert line.startswith('"'), f"unexpected line in {path.name}: {line!r}"
            _append(entry, target, ast.literal_eval(line), start=False)
    return entries


def _append(entry: Entry, target: tuple[str, int], text: str, *, start: bool) -> None:
    keyword, index = target
    if keyword == "msgstr":
        entry.msgstr[index] = ("" if start else entry.msgstr[index]) + text
    else:
        setattr(entry, keyword, ("" if start else getattr(entry, keyword) or "") + text)


_PLACEHOLDER = re.compile(r"%\(\w+\)[sdif]|%[sdif]|\{\w*\}|</?\w+>")


def placeholders(text: str) -> Counter[str]:
    """Python-format and brace-format placeholders, and HTML tags: what a msgstr must keep."""
    return Counter(_PLACEHOLDER.findall(text))


@pytest.fixture(scope="module")
def catalogue() -> list[Entry]:
    return read_po(PO)


def test_it_translates_every_message_of_the_catalogue(catalogue: list[Entry]) -> None:
    assert len(catalogue) > 400
    assert not [e.msgid for e in catalogue if "fuzzy" in e.flags], "no fuzzy entry"
    untranslated = [e.msgid for e in catalogue if not all(e.msgstr.values()) or not e.msgstr]
    assert untranslated == []
    header = PO.read_text(encoding="utf-8").split("\n\n")[0]
    assert "#, fuzzy" not in header
    assert '"Plural-Forms: nplurals=1; plural=0;\\n"' in header
    assert '"Language: zh_Hans\\n"' in header


def test_it_keeps_every_placeholder_of_a_message_in_its_translation(
    catalogue: list[Entry],
) -> None:
    wrong = [
        (e.msgid, form)
        for e in catalogue
        for form in e.msgstr.values()
        if placeholders(form) != placeholders(e.msgid_plural or e.msgid)
        or (e.msgid_plural and placeholders(e.msgid) != placeholders(e.msgid_plural))
    ]
    assert wrong == []


def test_it_uses_one_plural_form_as_chinese_has(catalogue: list[Entry]) -> None:
    plurals = [e for e in catalogue if e.msgid_plural is not None]
    assert plurals, "the console has plural messages"
    assert all(set(e.msgstr) == {0} for e in plurals)


def test_it_leaves_the_spec_status_values_and_object_names_in_english(
    catalogue: list[Entry],
) -> None:
    """Spec §Job status, §Node and Addon status: the Chinese spec writes them in English."""
    by_id = {e.msgid: e.msgstr[0] for e in catalogue if e.msgctxt is None}
    statuses = ["Pending", "Running", "Succeeded", "Failed", "Stopped"]
    statuses += ["Online", "Offline", "Installing", "Ready", "Upgrading"]
    for word in [*statuses, "Job", "Workflow", "Pod", "StatefulSet"]:
        assert by_id[word] == word, word
    assert by_id["Stop"] == "停止" and by_id["Resume"] == "恢复"
    assert by_id["Clone"] == "克隆" and by_id["Delete"] == "删除"


def test_it_ships_a_compiled_catalogue_identical_to_the_po(catalogue: list[Entry]) -> None:
    """The .mo is committed, not built at install: it must say exactly what the .po says."""
    with MO.open("rb") as handle:
        compiled = gettext.GNUTranslations(handle)
    messages = dict(compiled._catalog)  # type: ignore[attr-defined]
    messages.pop("", None)
    expected: dict[object, str] = {}
    for e in catalogue:
        msgid = f"{e.msgctxt}\x04{e.msgid}" if e.msgctxt is not None else e.msgid
        if e.msgid_plural is None:
            expected[msgid] = e.msgstr[0]
        else:
            expected.update({(msgid, index): text for index, text in e.msgstr.items()})
    assert messages == expected


def test_it_has_a_catalogue_entry_for_every_translatable_string_of_the_sources(
    catalogue: list[Entry], tmp_path: Path
) -> None:
    """makemessages on a copy of the sources finds nothing the catalogue lacks, nor the reverse."""
    root = Path(settings.BASE_DIR)
    for name in SOURCES:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tmp_path / name)
    shutil.copytree(root / "simcluster", tmp_path / "simcluster")  # an installed app
    shutil.copytree(LOCALE, tmp_path / "locale")
    environment = {"TRAINYARD_VAR_DIR": str(tmp_path / "var"), "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", "-l", "zh_Hans", *IGNORED],
        cwd=tmp_path, env=environment, check=True, capture_output=True,
    )  # fmt: skip
    extracted = {e.key for e in read_po(tmp_path / "locale/zh_Hans/LC_MESSAGES/django.po")}
    assert extracted == {e.key for e in catalogue}


# --- the pages ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def back_to_the_default_language() -> Iterator[None]:
    """A request activates its language for the thread; later tests expect the default."""
    yield
    translation.deactivate()


@pytest.fixture
def world(project: Project, cluster: Cluster, alice: User) -> dict[str, object]:
    """One of each thing the console shows, on a reachable cluster."""
    Cluster.objects.filter(pk=cluster.pk).update(
        reachable=True, last_synced_at=NOW, last_attempt_at=NOW
    )
    cluster.refresh_from_db()
    job = Job.objects.create(
        project=project, cluster=cluster, name="train", namespace="default", owner=alice,
        spec={"tasks": [TEMPLATE]}, phase=JobPhase.RUNNING, observed_at=NOW,
    )  # fmt: skip
    task = Task.objects.create(
        job=job, role="worker", template=TEMPLATE, phase=TaskPhase.RUNNING,
        desired_replicas=2, ready_replicas=1, observed_at=NOW,
    )  # fmt: skip
    Worker.objects.create(
        task=task, pod_name="train-worker-0", phase=PodPhase.RUNNING, ready=True,
        node_name="node-1", ip="10.0.0.7", last_reported_at=NOW,
    )  # fmt: skip
    Operation.objects.create(
        job=job, job_name=job.name, project=project, user=alice, action=Action.CREATE,
        result=Operation.Result.APPLIED, message="Created.",
    )  # fmt: skip
    Node.objects.create(cluster=cluster, name="node-1", phase=Node.Phase.ONLINE, observed_at=NOW)
    Addon.objects.create(
        cluster=cluster, name="volcano", namespace="kube-system", phase=Addon.Phase.READY,
        observed_at=NOW,
    )  # fmt: skip
    workflow = Workflow.objects.create(project=project, name="pipeline")
    first = _child(workflow, cluster, "prepare", JobPhase.SUCCEEDED)
    second = _child(workflow, cluster, "finetune", JobPhase.PENDING)
    WorkflowEdge.objects.create(workflow=workflow, upstream=first, downstream=second)
    return {"job": job, "task": task, "workflow": workflow}


def _child(workflow: Workflow, cluster: Cluster, name: str, phase: JobPhase) -> Job:
    return Job.objects.create(
        project=workflow.project, cluster=cluster, name=name, namespace="default",
        spec={"tasks": [TEMPLATE]}, phase=phase, workflow=workflow,
    )  # fmt: skip


def pages(world: dict[str, object]) -> dict[str, tuple[str, str]]:
    """URL -> (a Chinese heading it shows, the English one)."""
    job, task, workflow = world["job"], world["task"], world["workflow"]
    assert isinstance(job, Job) and isinstance(task, Task) and isinstance(workflow, Workflow)
    return {
        "/": ("需要关注的 Job", "Jobs needing attention"),
        "/jobs/": ("新建 Job", "New job"),
        f"/jobs/{job.pk}/": ("spec 与状态", "Spec and status"),
        f"/jobs/{job.pk}/tasks/{task.pk}/workers/": ("最近上报时间", "Last reported at"),
        "/jobs/new/": ("创建 Job", "Create job"),
        f"/jobs/{job.pk}/clone/": ("创建克隆", "Create the clone"),
        "/clusters/": ("可达性", "Reachability"),
        "/nodes/": ("可调度", "Schedulable"),
        "/addons/": ("期望版本", "Desired version"),
        "/workflows/": ("各阶段 Job 数", "Jobs by phase"),
        f"/workflows/{workflow.pk}/": ("依赖关系", "Dependencies"),
    }


def html_of(client: Client, url: str, language: str) -> str:
    response = client.get(url, headers={"Accept-Language": language})
    assert response.status_code == 200, url
    return response.content.decode()


@pytest.mark.parametrize("language", ZH)
def test_it_shows_every_page_in_chinese_to_a_chinese_browser(
    client: Client, alice: User, world: dict[str, object], language: str
) -> None:
    client.force_login(alice)
    for url, (chinese, english) in pages(world).items():
        html = html_of(client, url, language)
        assert '<html lang="zh-hans">' in html, url
        assert chinese in html and english not in html, url
        assert ">仪表盘</a>" in html and ">退出登录</button>" in html, url


def test_it_shows_every_page_in_english_to_an_english_browser(
    client: Client, alice: User, world: dict[str, object]
) -> None:
    client.force_login(alice)
    for url, (chinese, english) in pages(world).items():
        for language in ("en", "en-GB,en;q=0.9", "fr-FR"):
            html = html_of(client, url, language)
            assert '<html lang="en">' in html, (url, language)
            assert english in html and chinese not in html, (url, language)
            assert re.search(r"[\u4e00-\u9fff]", html.replace("简体中文", "")) is None, url


def test_it_shows_the_login_page_in_the_browser_language(client: Client) -> None:
    assert "登录 Trainyard" in html_of(client, "/accounts/login/", "zh-CN")
    assert "Log in to Trainyard" in html_of(client, "/accounts/login/", "en")


def test_it_keeps_the_language_chosen_with_the_switch(
    client: Client, alice: User, world: dict[str, object]
) -> None:
    client.force_login(alice)
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/jobs/"})
    assert (response.status_code, response["Location"]) == (302, "/jobs/")
    assert client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    for url in ("/jobs/", "/", "/nodes/"):
        html = html_of(client, url, "en")
        assert '<html lang="zh-hans">' in html, "the choice wins over Accept-Language"
        assert '<option value="zh-hans" selected>简体中文</option>' in html
    client.post("/i18n/setlang/", {"language": "en", "next": "/jobs/"})
    assert '<html lang="en">' in html_of(client, "/jobs/", "zh-CN")


def test_it_offers_both_languages_by_their_own_names(client: Client, alice: User) -> None:
    client.force_login(alice)
    html = html_of(client, "/", "zh-CN")
    assert '<option value="en" >English</option>' in html
    assert '<option value="zh-hans" selected>简体中文</option>' in html


def badge_texts(html: str) -> list[tuple[str, str]]:
    """(data-status, visible text) of every status badge."""
    found = re.findall(
        r'data-status="(\w+)"><span aria-hidden="true">.</span> ([^<]+)</span>', html
    )
    return [(status, text.strip()) for status, text in found]


def test_it_shows_status_values_in_english_in_chinese_pages(
    client: Client, alice: User, world: dict[str, object]
) -> None:
    """Spec §Job, §Task, §Pod and Worker, §Workflow, §Node and Addon status."""
    client.force_login(alice)
    seen: set[str] = set()
    for url in pages(world):
        for status, text in badge_texts(html_of(client, url, "zh-CN")):
            seen.add(status)
            if status in ("Reachable", "Unreachable"):
                continue  # a cluster's reachability is not a status of the spec: it is worded
            assert text == status, (url, status, text)
    assert {"Pending", "Running", "Succeeded", "Stopped", "Online", "Ready"} <= seen
    jobs_list = html_of(client, "/jobs/", "zh-CN")
    for phase in JobPhase:
        assert f'<option value="{phase.value}">{phase.value}</option>' in jobs_list


def test_it_words_a_refusal_in_the_language_of_the_request(
    client: Client, alice: User, world: dict[str, object]
) -> None:
    """Spec §Job status: no stop on a Succeeded Job; the reason is worded when refused."""
    job = world["job"]
    assert isinstance(job, Job)
    Job.objects.filter(pk=job.pk).update(phase=JobPhase.SUCCEEDED)
    client.force_login(alice)
    response = client.post(f"/jobs/{job.pk}/stop/", headers={"Accept-Language": "zh-CN"})
    html = html_of(client, response["Location"], "zh-CN")
    assert "已拒绝：Succeeded 是终态，无法停止该 Job。如需再次运行，请克隆它。" in html
    client.post(f"/jobs/{job.pk}/resume/", headers={"Accept-Language": "en"})
    html = html_of(client, f"/jobs/{job.pk}/", "en")
    assert "Refused: A Succeeded Job is terminal: it cannot be resumed." in html


def test_it_words_spec_errors_of_the_create_form_in_chinese(
    client: Client, alice: User, world: dict[str, object]
) -> None:
    client.force_login(alice)
    form = {
        "mode": "form", "name": "Bad_Name", "project": "vision", "cluster": "gpu-a",
        "namespace": "", "roles-TOTAL_FORMS": "1", "roles-INITIAL_FORMS": "0",
        "roles-MIN_NUM_FORMS": "1", "roles-MAX_NUM_FORMS": "20", "roles-0-role": "worker",
        "roles-0-kind": "StatefulSet", "roles-0-replicas": "1", "roles-0-image": "",
        "roles-0-cpu": "0", "roles-0-memory": "", "roles-0-gpus": "0",
    }  # fmt: skip
    response = client.post("/jobs/new/", form, headers={"Accept-Language": "zh-CN"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Job 未创建：请修正下方标出的字段。" in html
    assert "Job 名称 &#x27;Bad_Name&#x27; 无效：只能使用小写字母、数字和 &#x27;-&#x27;" in html
    assert "镜像为必填项。" in html
    assert "CPU：请求量必须大于 0。" in html


def test_it_leaves_facts_from_the_cluster_and_stored_messages_as_they_are(
    client: Client, alice: User, world: dict[str, object]
) -> None:
    """Pod reasons and stored messages are facts: shown as reported, in any language."""
    task = world["task"]
    assert isinstance(task, Task)
    Worker.objects.filter(task=task).update(
        ready=False, reason="CrashLoopBackOff", message="back-off 5m0s restarting failed container"
    )
    client.force_login(alice)
    html = html_of(client, f"/jobs/{task.job_id}/tasks/{task.pk}/workers/", "zh-CN")
    assert "<strong>CrashLoopBackOff</strong>: back-off 5m0s restarting failed container" in html
    assert "Created." in html_of(client, f"/jobs/{task.job_id}/", "zh-CN")


def test_it_translates_lazily_declared_labels_at_render_time() -> None:
    """Choices and form labels are declared once, at import, and worded per request."""
    with translation.override("zh-hans"):
        assert str(Action.STOP.label) == "停止" and str(JobPhase.RUNNING.label) == "Running"
        assert str(Operation.Result.REFUSED.label) == "已拒绝"
    with translation.override("en"):
        assert str(Action.STOP.label) == "Stop"
