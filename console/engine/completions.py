"""Completions read from containers' termination messages (docs/workload-signals.md,
"Fallbacks"): a container that wrote `{"trainyard": "completion", ...}` to
/dev/termination-log reported its outcome without posting anything.

Only the pods that changed in a cycle are read, once the cycle committed: a termination is a
change of its pod, and a pod re-read later finds its message stored already
(jobs.workload.fallbacks).
A completion that stops its Job (policy `stop_on_completion`) leaves an accepted Operation, so
the next cycle plans the Job (rows.needing_attention) and scales its StatefulSets to 0. A new
completion keeps the Job's logs, as one posted does (jobs.api.intake): a Due the cycle returns.
"""

from __future__ import annotations

from collections.abc import Sequence

from console.engine.keep_logs import WHY, Due
from console.engine.observe import Change
from console.engine.stored import thaw
from console.kube.observations import PodObs, TerminationCompletion
from jobs.choices import SignalSource
from jobs.models import Job
from jobs.workload.fallbacks import completion_signal, record_fallback

# How a stored pod with a completion reads (console.engine.stored: orjson writes no spaces):
# the other pods are passed over without being parsed.
HAS_COMPLETION = '"completion":{'


def record_completions(cluster_id: int, changes: Sequence[Change]) -> list[Due]:
    """Records the completions of the changed pods; returns the logs due to be kept: each Job
    one of them ended (a completion new to the console)."""
    pods: list[PodObs] = [
        thaw(PodObs, change.data)
        for change in changes
        if change.stream == "pods" and change.data and HAS_COMPLETION in change.data
    ]
    wanted = {pod.owner.job_id for pod in pods if pod.completion is not None}
    if not wanted:
        return []
    jobs = Job.objects.filter(cluster_id=cluster_id).in_bulk(wanted)
    ended: set[int] = set()
    for pod in pods:
        job = jobs.get(pod.owner.job_id or 0)
        if job is not None and pod.completion is not None and _record(job, pod, pod.completion):
            ended.add(job.pk)
    return [Due(job_id, WHY.COMPLETION, ()) for job_id in sorted(ended)]


def _record(job: Job, pod: PodObs, completion: TerminationCompletion) -> bool:
    """Whether the completion was new and ended the workload."""
    signal = completion_signal(
        pod.name, pod.uid, completion.instance, completion.outcome, completion.exit_code,
        completion.reason, completion.message, completion.finished_at,
    )  # fmt: skip
    if signal is None:
        return False
    run = pod.owner.run if pod.owner.run is not None else job.run
    done = record_fallback(job, run, [signal], SignalSource.TERMINATION_LOG)
    return done is not None and done.ended
