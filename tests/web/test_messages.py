"""Messages the console writes itself are worded in the reader's language on every page, in the
admin and in the API; text Kubernetes wrote stays exactly as it wrote it, marked as such (issue 8,
item 12). Spec §Task status: "A Job aggregates the phases and messages of its Tasks"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation
from django.utils.functional import Promise

from console.engine.apply import unreachable_reason
from console.kube.gateway import _status_failure, _throttled, _transport_failure
from console.kube.observations import parse_addon, parse_node, parse_pod, parse_statefulset
from console.models import Addon, ApiToken, Cluster, Node, Project
from jobs.choices import JobPhase, PodPhase, TaskKind, TaskPhase
from jobs.messages import CODES, Kube, Message, decode, encode, render_html, render_text
from jobs.models import Job, Operation, Task, Workflow
from jobs.operations import OperationRefused, create_job, stop_job
from jobs.spec import parse_job_spec
from jobs.status.lifecycle import TaskState, job_message
from jobs.status.observed import addon_view, task_view
from jobs.status.problems import node_message, pod_reason
from tests.engine import k8s_json as k8s
from workers.models import Worker

NOW = datetime.now(UTC)
PULL = 'Back-off pulling image "ghcr.io/rlinf/nonexistent:1"'
KUBE_ZH = '<small class="kube-tag">来自 Kubernetes</small> <q lang="en">'
KUBE_EN = '<small class="kube-tag">from Kubernetes</small> <q lang="en">'


@pytest.fixture(autouse=True)
def back_to_the_default_language() -> Iterator[None]:
    yield
    translation.deactivate()


@pytest.fixture
def reachable(cluster: Cluster) -> Cluster:
    Cluster.objects.filter(pk=cluster.pk).update(reachable=True, last_synced_at=NOW)
    cluster.refresh_from_db()
    return cluster


@pytest.fixture
def job(alice: User, reachable: Cluster, django_capture_on_commit_callbacks: object) -> Job:
    """Created and stopped by alice; its Task observed as the sync derives it: 0/2 replicas ready
    and a pod that cannot pull its image (Kubernetes' message)."""
    spec = {"name": "train", "cluster": "gpu-a", "tasks": [{"role": "worker", "replicas": 2,
                                                          "image": "rlinf:1"}]}  # fmt: skip
    job = create_job(alice, parse_job_spec(spec, alice))
    sts = parse_statefulset(k8s.statefulset(replicas=2, ready=0))
    pods = [
        parse_pod(k8s.image_pull_pod()),
        parse_pod(k8s.node_lost_pod("train-worker-1", evicting=True)),
    ]
    view = task_view(TaskKind.STATEFULSET, False, sts, pods[:1], {})
    task = Task.objects.get(job=job)
    Task.objects.filter(pk=task.pk).update(phase=view.phase, message=view.message, observed_at=NOW)
    aggregate = job_message([TaskState("worker", view.phase, view.message)])
    Job.objects.filter(pk=job.pk).update(message=aggregate, observed_at=NOW)
    for pod in pods:
        reason, message = pod_reason(pod, {})
        Worker.objects.create(
            task=task, pod_name=pod.name, phase=PodPhase.PENDING, reason=reason, message=message,
            last_reported_at=NOW,
        )  # fmt: skip
    stop_job(alice, job)
    job.refresh_from_db()
    return job


def page(client: Client, user: User, url: str, language: str) -> str:
    client.force_login(user)
    response = client.get(url, headers={"Accept-Language": language})
    assert response.status_code == 200, url
    return response.content.decode()


# --- the module ----------------------------------------------------------------------------


def test_it_stores_a_code_and_its_parameters_deterministically() -> None:
    """Writes proportional to change: the same code and parameters give the same stored text."""
    one = Message("task.replicas_ready", {"ready": 1, "desired": 2})
    other = Message("task.replicas_ready", {"desired": 2, "ready": 1})
    assert encode(one) == encode(other) == '{"c":"task.replicas_ready","p":{"desired":2,"ready":1}}'
    assert decode(encode(one)) == one
    sts = parse_statefulset(k8s.statefulset(replicas=2, ready=0))
    pods = [parse_pod(k8s.image_pull_pod())]
    first = task_view(TaskKind.STATEFULSET, False, sts, pods, {})
    assert task_view(TaskKind.STATEFULSET, False, sts, pods, {}).message == first.message


def test_it_shows_plain_stored_text_as_it_is() -> None:
    """Rows written before messages were coded, in any language, render unchanged."""
    for text in ("Created.", "1/1 replicas ready", '{"c": broken', "已创建。", ""):
        assert render_text(text) == text
    assert render_html("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"


class Sample(dict[str, object]):
    """Any parameter a wording names: 1 (a count picks the singular)."""

    def __missing__(self, key: str) -> object:
        return 1


def test_it_shows_a_code_it_does_not_know_as_it_is() -> None:
    """A row written by another version of the console renders, escaped, instead of failing."""
    unknown = encode(Message("task.<new>", {"ready": 1}))
    missing = encode(Message("task.replicas_ready", {"ready": 1}))
    assert render_html(unknown) == "task.&lt;new&gt; 1"
    assert render_text(missing) == "task.replicas_ready 1"


def test_it_has_a_chinese_wording_without_markup_for_every_code() -> None:
    """Wordings are inserted into pages as they are: they must hold no markup. Those without
    a word of their own (only parameters) are the same in both languages."""
    for code, wording in CODES.items():
        with translation.override("en"):
            english = str(wording % Sample())
        with translation.override("zh-hans"):
            chinese = str(wording % Sample())
        assert (chinese != english) == isinstance(wording, Promise), code
        assert not re.search(r"[<>&]", chinese + english), code


def test_it_keeps_kubernetes_text_verbatim_and_marked_in_both_languages() -> None:
    text = 'Back-off pulling image "x:1" <script>'
    stored = encode(Message("pod.reason_detail", {"pod": "p-0", "reason": "ImagePullBackOff",
                                                   "detail": Kube(text)}))  # fmt: skip
    with translation.override("zh-hans"):
        assert render_text(stored) == f"p-0：ImagePullBackOff：{text}"
        html = render_html(stored)
    assert html == (
        f'p-0：ImagePullBackOff：<span class="from-kube">{KUBE_ZH}'
        "Back-off pulling image &quot;x:1&quot; &lt;script&gt;</q></span>"
    )
    with translation.override("en"):
        assert KUBE_EN in render_html(stored)


# --- the pages -----------------------------------------------------------------------------


def test_it_words_the_job_page_messages_in_chinese_and_keeps_kubernetes_text(
    client: Client, alice: User, job: Job
) -> None:
    html = page(client, alice, f"/jobs/{job.pk}/", "zh-CN")
    assert "0/2 个副本就绪；train-worker-0：ImagePullBackOff：" in html
    assert f"{KUBE_ZH}{PULL.replace(chr(34), '&quot;')}" in html
    assert "worker：Pending — 0/2 个副本就绪" in html, "the Job's aggregate of its Tasks"
    assert "该 Job 的所有工作负载已缩容为 0。" in html and "已创建。" in html
    for english in ("replicas ready", "Created.", "Every workload of the job", "from Kubernetes"):
        assert english not in html, english


def test_it_words_the_job_page_messages_in_english(client: Client, alice: User, job: Job) -> None:
    html = page(client, alice, f"/jobs/{job.pk}/", "en")
    assert "0/2 replicas ready; train-worker-0: ImagePullBackOff: " in html
    assert "worker: Pending — 0/2 replicas ready" in html
    assert "Every workload of the job is scaled to 0." in html and "Created." in html
    assert KUBE_EN in html
    assert re.search(r"[\u4e00-\u9fff]", html.replace("简体中文", "")) is None


def test_it_words_worker_rows_and_marks_what_kubernetes_wrote(
    client: Client, alice: User, job: Job
) -> None:
    """Spec §Pod and Worker status: the Worker rows show what the cluster last reported."""
    task = job.tasks.get()
    html = page(client, alice, f"/jobs/{job.pk}/tasks/{task.pk}/workers/", "zh-CN")
    assert f'<strong>ImagePullBackOff</strong>: <span class="from-kube">{KUBE_ZH}' in html
    assert "<strong>Terminating</strong>: 该 Pod 正在被删除。" in html
    assert "The pod is being deleted." not in html


def test_it_words_the_job_list_in_the_readers_language(
    client: Client, alice: User, job: Job
) -> None:
    assert "worker：Pending — 0/2 个副本就绪" in page(client, alice, "/jobs/", "zh-CN")
    assert "worker: Pending — 0/2 replicas ready" in page(client, alice, "/jobs/", "en")


def test_it_words_a_refusal_for_each_reader_in_their_own_language(
    client: Client, alice: User, bob: User, job: Job
) -> None:
    """Spec §Job status: a stopped Job cannot be stopped again; the refusal is recorded once
    and each reader of the history sees it in their language."""
    with translation.override("en"), pytest.raises(OperationRefused, match="already Stopped"):
        stop_job(alice, job)
    assert "已拒绝" not in Operation.objects.filter(job=job).first().message  # type: ignore[union-attr]
    html = page(client, bob, f"/jobs/{job.pk}/", "zh-CN")
    assert "此 Job 已经是 Stopped。" in html


def test_it_words_workflow_progress_in_the_readers_language(
    client: Client, alice: User, project: Project, job: Job
) -> None:
    """Spec §Workflow status: a Workflow aggregates its child Jobs."""
    workflow = Workflow.objects.create(project=project, name="pipeline")
    Workflow.objects.filter(pk=workflow.pk).update(
        message=encode(Message("workflow.progress", {"succeeded": 1, "total": 2}))
    )
    Job.objects.filter(pk=job.pk).update(workflow=workflow)
    html = page(client, alice, f"/workflows/{workflow.pk}/", "zh-CN")
    assert "1/2 个 Job 已成功" in html and "worker：Pending — 0/2 个副本就绪" in html
    assert "jobs succeeded" not in html
    assert "1/2 jobs succeeded" in page(client, alice, f"/workflows/{workflow.pk}/", "en")


def test_it_words_node_and_addon_messages_and_marks_node_conditions(
    client: Client, alice: User, reachable: Cluster
) -> None:
    """Spec §Node and Addon status."""
    lost = parse_node(k8s.node("node-2", ready="Unknown"))
    Node.objects.create(
        cluster=reachable, name="node-2", phase=Node.Phase.OFFLINE, observed_at=NOW,
        message=encode(node_message(lost)),
    )  # fmt: skip
    workload = parse_addon(k8s.daemonset("gpu", image="plugin:v2", ready=0), "DaemonSet")
    view = addon_view(workload, [], "")
    Addon.objects.create(
        cluster=reachable, name="gpu", namespace="kube-system", phase=view.phase,
        message=view.message, observed_at=NOW,
    )  # fmt: skip
    nodes = page(client, alice, "/nodes/", "zh-CN")
    assert f"{KUBE_ZH}{lost.message}</q>" in nodes
    assert "正在安装 v2" in page(client, alice, "/addons/", "zh-CN")


def test_it_words_messages_in_the_admin_in_the_operators_language(
    client: Client, olga: User, job: Job
) -> None:
    olga.is_superuser = olga.is_staff = True
    olga.save()
    html = page(client, olga, "/admin/jobs/operation/", "zh-CN")
    assert "已创建。" in html and "Created." not in html
    html = page(client, olga, f"/admin/jobs/job/{job.pk}/change/", "zh-CN")
    assert "worker：Pending — 0/2 个副本就绪" in html and '{"c":' not in html


# --- the API ----------------------------------------------------------------------------------


def api(user: User, path: str, language: str | None = None) -> object:
    headers = {"Authorization": f"Bearer {ApiToken.issue(user, name='t')[1]}"}
    if language:
        headers["Accept-Language"] = language
    response = Client().get(f"/api/v1{path}", headers=headers)
    assert response.status_code == 200
    return response.json()


def test_it_answers_the_api_with_the_wording_the_code_and_its_parameters(
    alice: User, job: Job
) -> None:
    """docs/decisions.md: `message` in the request's language, `message_code` and
    `message_params` stable; Kubernetes' text is {"kubernetes": text}, never translated."""
    english, chinese = api(alice, f"/jobs/{job.pk}"), api(alice, f"/jobs/{job.pk}", "zh-CN")
    assert isinstance(english, dict) and isinstance(chinese, dict)
    assert english["message"].startswith("worker: Pending — 0/2 replicas ready; train-worker-0")
    assert chinese["message"].startswith("worker：Pending — 0/2 个副本就绪；train-worker-0")
    assert english["message_code"] == chinese["message_code"] == "job.tasks"
    assert english["message_params"] == chinese["message_params"]
    task = english["tasks"][0]
    assert task["message_code"] == "task.with_problem"
    problem = task["message_params"]["problem"]
    assert problem["code"] == "pod.reason_detail"
    assert problem["params"]["reason"] == "ImagePullBackOff"
    assert problem["params"]["detail"]["kubernetes"].startswith(PULL)
    assert task["message_params"]["progress"] == {
        "code": "task.replicas_ready", "params": {"desired": 2, "ready": 0},
    }  # fmt: skip
    operations = api(alice, f"/jobs/{job.pk}/operations", "zh-CN")
    assert isinstance(operations, list)
    assert [(o["message_code"], o["message"]) for o in operations] == [
        ("operation.stopped", "该 Job 的所有工作负载已缩容为 0。"),
        ("operation.created", "已创建。"),
    ]


def test_it_answers_plain_stored_text_with_no_code(alice: User, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(message="worker: Running")
    answer = api(alice, f"/jobs/{job.pk}", "zh-CN")
    assert isinstance(answer, dict)
    assert (answer["message"], answer["message_code"], answer["message_params"]) == (
        "worker: Running", None, {},
    )  # fmt: skip
    assert JobPhase(answer["phase"]) == JobPhase.STOPPED
    assert TaskPhase(answer["tasks"][0]["phase"]) == TaskPhase.PENDING


def test_it_documents_the_message_fields_in_the_openapi_document(db: None) -> None:
    schemas = Client().get("/api/v1/openapi.json").json()["components"]["schemas"]
    for name in ("JobOut", "TaskOut", "OperationOut", "WorkflowOut", "AddonOut", "ClusterOut"):
        fields = schemas[name]["properties"]
        assert {"message", "message_code", "message_params"} <= set(fields), name
        assert "Accept-Language" in fields["message"]["description"], name
        assert "Stable code" in fields["message_code"]["description"], name


# --- clusters --------------------------------------------------------------------------------

GATEWAY_CODES = ("truncated", "refused", "timeout", "transport", "tls", "malformed_json",
                 "unexpected_shape", "expiring", "status", "throttled")  # fmt: skip


def test_it_has_a_wording_for_every_reason_the_gateway_gives() -> None:
    assert {f"cluster.{code}" for code in GATEWAY_CODES} <= set(CODES)
    assert "cluster.status_detail" in CODES


@pytest.mark.parametrize(("header", "seconds"), [("1", 1), ("30", 30), (None, 1), ("soon", 1)])
def test_it_words_a_throttled_cluster_with_the_retry_after_the_api_server_asked_for(
    header: str | None, seconds: int
) -> None:
    throttled = encode(unreachable_reason(_throttled(header)))
    assert render_text(throttled) == (
        f"the API server is throttling requests (429 Too Many Requests); retry after {seconds} s"
    )
    with translation.override("zh-hans"):
        assert render_text(throttled) == (
            f"API 服务器正在限流（429 Too Many Requests）；{seconds} 秒后重试"
        )


def test_it_words_why_a_cluster_is_unreachable_and_quotes_the_api_server(
    client: Client, alice: User, cluster: Cluster
) -> None:
    """PRODUCT: per-cluster reachability; the dashboard says why a cluster cannot be read."""
    refused = unreachable_reason(_transport_failure(ConnectionRefusedError()))
    body = b'{"kind": "Status", "message": "nodes is forbidden: User \\"x\\" cannot list"}'
    forbidden = unreachable_reason(_status_failure(403, "Forbidden", body))
    with translation.override("zh-hans"):
        assert render_text(encode(refused)) == "无法连接到 API 服务器（连接被拒绝或不可达）"
        assert render_text(encode(forbidden)) == (
            'HTTP 403 Forbidden: nodes is forbidden: User "x" cannot list'
        )
        assert KUBE_ZH in render_html(encode(forbidden))
    Cluster.objects.filter(pk=cluster.pk).update(reachable=False, message=encode(refused))
    assert "无法连接到 API 服务器" in page(client, alice, "/", "zh-CN")
    assert "cannot connect to the API server" in page(client, alice, "/clusters/", "en")
