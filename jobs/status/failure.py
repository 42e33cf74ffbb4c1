"""Why a run failed (issue 34): the first error across a Job's kept logs, labelled by the known
failure signatures. Pure: text in, a finding out; no database, no clock.

The cause, not the last line. In RL on Ray the last lines are consequences: RLinf tears itself
down with "killed by ray.kill" after an earlier exception, an NCCL watchdog on one rank kills the
others, a worker's CUDA OOM surfaces as "The actor is dead" on the head. So every log is read for
candidates — the exception line of each Python traceback, and each line a signature matches —
consequences are set aside, and the earliest of the rest is the first error: by the line's
timestamp where the log was kept with timestamps (the API server's `timestamps=true`), else by
the order of the logs given and the line's place in its log. Only when every candidate is a
consequence is the earliest consequence named, marked as such.

Patterns are RE2's (google-re2): matched in time linear in the text whatever the pattern, over
a bounded text, so an operator's pattern that would backtrack catastrophically elsewhere cannot
stall a worker; all the signatures are tried in one pass (an RE2 set) and only those that match
are searched again for where.
"""

from __future__ import annotations

import logging
import re
import time
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

import re2
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from jobs.choices import FailureClass
from jobs.workload.rlinf_logs import split_stamp

logger = logging.getLogger(__name__)
MAX_TEXT = 16 * 1024 * 1024  # the newest part of a log that is judged at most
MAX_TOTAL = 64 * 1024 * 1024  # the most text one judgement reads, over all its logs
DEADLINE_SECONDS = 20.0  # one judgement's wall-clock limit: the logs left are not read
MAX_LINE = 2000  # a first error quoted at most this long

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Ray's prefix on lines it forwards from workers: "(ActorWorker pid=3012, ip=10.0.3.11) ".
RAY_PREFIX = re.compile(
    r"^\((?:[\w.:-]+ )?pid=\d+(?:, ip=[\w.:]+)?\) |^\(raylet(?:, ip=[\w.:]+)?\) "
)
TRACEBACK = b"Traceback (most recent call last):"
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')


@dataclass(frozen=True)
class Signature:
    """A named failure pattern: what it is called, its class, what to do about it. A
    consequence (`consequence=True`) names what follows a failure, never its cause."""

    code: str
    label: str | Promise
    failure_class: FailureClass
    pattern: str
    advice: str | Promise = ""
    consequence: bool = False


@dataclass(frozen=True)
class KeptLog:
    """One container run's log as kept: `attempt` is its restart count; `key` what the caller
    knows it by (a pod re-created under the same name has the same pod and attempt, so the
    Finding names its log by `key`)."""

    pod: str
    container: str
    attempt: int
    text: str
    key: int | None = None


@dataclass(frozen=True)
class Finding:
    """The first error: the line, where it was raised (`file:line` of a traceback's last frame),
    which log and line it is in, when it was printed, and the signature that labels it."""

    line: str
    raised_at: str | None
    pod: str
    container: str
    attempt: int
    line_number: int
    at: datetime | None
    signature: Signature | None
    consequence: bool = False
    log_key: int | None = None


@dataclass(frozen=True)
class _Candidate:
    log: int
    line_index: int
    raised_at: str | None


class Judge:
    """The signatures compiled for RE2 once: a set that tells in one pass over a text which of
    them match anywhere, and each pattern alone to find where (asked only of those that match).
    RE2 runs in time linear in the text whatever the pattern, so a hostile one cannot stall a
    worker; the text is bounded (MAX_TEXT, MAX_TOTAL). A pattern RE2 refuses (one stored before
    a check, or past RE2's memory) is left out and logged: it never breaks every judgement
    (`invalid` names them; the admin shows them as invalid)."""

    def __init__(self, signatures: Sequence[Signature]) -> None:
        self.signatures: list[Signature] = []
        self.patterns: list[re2._Regexp] = []
        self.invalid: list[Signature] = []
        self.any_of = re2.Set.SearchSet(_OPTIONS)
        for sig in signatures:
            try:
                compiled = compile_pattern(sig.pattern)
                self.any_of.Add(_bytes_pattern(sig.pattern))
            except (ValueError, re2.error) as error:
                logger.warning("signature %s left out: %s", sig.code, error)
                self.invalid.append(sig)
                continue
            self.signatures.append(sig)
            self.patterns.append(compiled)
        self.any_of.Compile()

    def first_matches(self, data: bytes) -> Iterator[int]:
        """For each signature matching somewhere in `data`, the byte offset of its first match."""
        for index in sorted(self.any_of.Match(data) or ()):
            found = self.patterns[index].search(data)
            if found is not None:
                yield found.start()

    def label(self, line: str) -> Signature | None:
        """The first signature (table order) matching one line."""
        matched = self.any_of.Match(line.encode())
        return self.signatures[min(matched)] if matched else None


_OPTIONS = re2.Options()
_OPTIONS.max_mem = 64 << 20


def _bytes_pattern(pattern: str) -> bytes:
    return ("(?m)" + pattern).encode()


def compile_pattern(pattern: str) -> re2._Regexp:
    """A signature's pattern (RE2 syntax, `^`/`$` per line); a bad one raises ValueError
    saying why (RE2 has no backreferences or lookaround)."""
    try:
        return re2.compile(_bytes_pattern(pattern), _OPTIONS)
    except re2.error as error:
        raise ValueError(str(error) or "not a valid pattern") from None


def first_error(
    logs: Sequence[KeptLog],
    signatures: Sequence[Signature] | None = None,
    deadline_seconds: float = DEADLINE_SECONDS,
) -> Finding | None:
    """The first error across these logs (given in the order their containers failed, the
    newest last), or None when no log holds a traceback or a line any signature matches.

    Bounded: the logs are read newest first (the failure's moment is at the end), each at most
    its newest MAX_TEXT, all together at most MAX_TOTAL; logs left when `deadline_seconds` has
    passed are not read (judged from those read)."""
    judge = Judge(SIGNATURES if signatures is None else signatures)
    found: list[tuple[_Candidate, list[bytes]]] = []
    for number, text in _bounded(logs, time.monotonic() + deadline_seconds):
        data = _clean(text).encode()
        lines = data.split(b"\n")
        found += [(candidate, lines) for candidate in _candidates(number, data, lines, judge)]
    if not found:
        return None
    judged = [(c, _line(lines, c.line_index), c) for c, lines in found]
    labelled = [(c, line, judge.label(_plain(line))) for c, line, _ in judged]
    causes = [entry for entry in labelled if not (entry[2] and entry[2].consequence)]
    c, line, sig = min(causes or labelled, key=lambda entry: _order(entry[0], entry[1]))
    log = logs[c.log]
    return Finding(
        line=_plain(line)[:MAX_LINE], raised_at=c.raised_at, pod=log.pod,
        container=log.container, attempt=log.attempt, line_number=c.line_index + 1,
        at=split_stamp(line)[0], signature=sig, consequence=not causes, log_key=log.key,
    )  # fmt: skip


def _bounded(logs: Sequence[KeptLog], deadline: float) -> Iterator[tuple[int, str]]:
    """(index, the part judged) of each log read, the newest first, within MAX_TOTAL and the
    deadline. A cut log keeps whole lines (its first, partial one is dropped)."""
    left = MAX_TOTAL
    for number in range(len(logs) - 1, -1, -1):
        if left <= 0 or time.monotonic() > deadline:
            logger.warning("judgement bounded: %d of %d logs left unread", number + 1, len(logs))
            return
        text = logs[number].text
        share = min(len(text), MAX_TEXT, left)
        part = text[len(text) - share :]
        if share < len(text):
            part = part.partition("\n")[2]
        left -= share
        yield number, part


def for_reason(reason: str) -> Signature | None:
    """The signature of a reason Kubernetes gave (a container's termination or waiting reason, a
    pod's status reason), when no log names anything better."""
    for sig in KUBERNETES:
        if reason in sig.pattern.split("|"):
            return sig
    return None


def matching_lines(pattern: str, text: str, limit: int = 20) -> list[str]:
    """The lines a pattern matches in a pasted log (the admin's test box), at most `limit`;
    raises ValueError for a bad pattern."""
    compiled = compile_pattern(pattern)
    shown: list[str] = []
    for line in _clean(text[-MAX_TEXT:]).split("\n"):
        if compiled.search(line.encode()) is not None:
            shown.append(line[:MAX_LINE])
            if len(shown) >= limit:
                break
    return shown


# --- reading ------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    return ANSI.sub("", text.replace("\r\n", "\n"))


def _line(lines: list[bytes], index: int) -> str:
    return lines[index].decode(errors="replace")


def _plain(line: str) -> str:
    """A line without the API server's timestamp and Ray's forwarding prefix."""
    return RAY_PREFIX.sub("", split_stamp(line)[1]).rstrip()


def _candidates(number: int, data: bytes, lines: list[bytes], judge: Judge) -> Iterator[_Candidate]:
    """Each traceback's exception line, and the first line each signature matches."""
    starts = _line_starts(data)
    position = data.find(TRACEBACK)
    while position != -1:
        found = _exception_line(lines, bisect_right(starts, position) - 1)
        if found is not None:
            yield _Candidate(number, *found)
        position = data.find(TRACEBACK, position + 1)
    for offset in judge.first_matches(data):
        yield _Candidate(number, bisect_right(starts, offset) - 1, None)


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    position = data.find(b"\n")
    while position != -1:
        starts.append(position + 1)
        position = data.find(b"\n", position + 1)
    return starts


def _exception_line(lines: list[bytes], index: int) -> tuple[int, str | None] | None:
    """The line that names the exception after the traceback that starts at `index`, and the
    file:line of its last frame."""
    raised_at = None
    for later in range(index + 1, min(index + 400, len(lines))):
        line = _plain(_line(lines, later))
        if not line:
            continue
        frame = FRAME.match(line)
        if frame is not None:
            raised_at = f"{PurePosixPath(frame[1]).name}:{frame[2]}"
        elif not line[0].isspace() and not line.startswith("^"):
            return later, raised_at
    return None


def _order(candidate: _Candidate, line: str) -> tuple[bool, datetime, int, int]:
    at = split_stamp(line)[0]
    return at is None, at or datetime.max.replace(tzinfo=UTC), candidate.log, candidate.line_index


def summary(finding: Finding) -> tuple[str | Promise, FailureClass, str | Promise]:
    """(label, class, advice) of a finding; a traceback no signature knows is the user's code,
    named by its exception."""
    if finding.signature is not None:
        sig = finding.signature
        return sig.label, sig.failure_class, sig.advice
    exception = finding.line.partition(":")[0].strip() or finding.line[:80]
    return exception, FailureClass.USER_CODE, USER_CODE_ADVICE


USER_CODE_ADVICE = _(
    "The training code raised an exception. Read the traceback in the kept log, fix the code or "
    "its configuration, then clone the Job."
)


# --- the table ----------------------------------------------------------------------------------

FC = FailureClass

# Order matters: a line is labelled by the first signature that matches it, so the specific
# come before the general (an NCCL timeout before any NCCL error, OOM before a CUDA error) and
# the consequences after every cause.
SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "cuda_oom", _("CUDA out of memory"), FC.OUT_OF_MEMORY,
        r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED",
        _("A GPU ran out of memory. Lower the micro-batch size, the rollout batch or the sequence "
          "length, enable gradient checkpointing or offloading, or give the role more GPUs."),
    ),
    Signature(
        "nccl_timeout", _("NCCL timeout"), FC.NETWORK,
        r"Watchdog caught collective operation timeout|collective operation timeout"
        r"|NCCL (?:communicator|operation) .*timed? ?out",
        _("A collective (all-reduce, broadcast, ...) did not finish in time: usually one rank "
          "died or hung first, or the network between nodes failed. Look at the other ranks' "
          "logs before this time; check the interconnect (NCCL_DEBUG=INFO) and NCCL_TIMEOUT."),
    ),
    Signature(
        "nccl_error", _("NCCL error"), FC.NETWORK,
        r"NCCL error|unhandled system error|ncclSystemError|ncclInternalError|ncclRemoteError",
        _("NCCL failed between ranks. Run with NCCL_DEBUG=INFO; check that every node reaches the "
          "others on the NCCL interface (NCCL_SOCKET_IFNAME), and that /dev/shm is large enough."),
    ),
    Signature(
        "gpu_xid", _("GPU hardware error"), FC.HARDWARE,
        r"NVRM: Xid|\bXid \d+|uncorrectable ECC error|ECC error"
        r"|an illegal memory access was encountered|GPU has fallen off the bus"
        r"|CUDA error: unspecified launch failure",
        _("The GPU reported a hardware or driver fault (Xid/ECC) or an illegal memory access. Note "
          "the node; if it repeats there, cordon the node and tell the operators. An illegal "
          "memory access that follows the code, not the node, is a kernel bug."),
    ),
    Signature(
        "ray_oom", _("Ray killed a worker for memory"), FC.OUT_OF_MEMORY,
        r"ray\.exceptions\.OutOfMemoryError|node running low on memory"
        r"|Memory on the node .* was \d",
        _("Ray's memory monitor killed a task because the node ran low on host memory. Give the "
          "pods more memory, lower the number of environments or rollout workers per node."),
    ),
    Signature(
        "ray_node_died", _("Ray node died"), FC.RAY_MEMBERSHIP,
        r"NodeDiedError|has been marked dead because the detector has missed too many heartbeats"
        r"|The node with node id: \S+ .*has been marked dead",
        _("A Ray node left the cluster (its pod was evicted, restarted or lost its network). Check "
          "the Workers: which pod restarted or went away, and its node."),
    ),
    Signature(
        "ray_nodes_timeout", _("Ray nodes did not gather"), FC.RAY_MEMBERSHIP,
        r"Ray has \d+ of \d+ expected nodes alive after|RayNodesTimeout",
        _("The driver waited for every Ray node and not all joined in time. Check the worker pods: "
          "Pending (resources, node selection), crash-looping, or unable to reach the head."),
    ),
    Signature(
        "shm_too_small", _("/dev/shm too small"), FC.INFRASTRUCTURE,
        r"out of shared memory|insufficient shared memory \(shm\)|raise your shared memory limit"
        r"|/dev/shm.*(?:No space|too small)|Error while creating shared memory segment",
        _("Shared memory (/dev/shm) is too small for the data loaders or NCCL. Mount a larger "
          "memory-backed emptyDir at /dev/shm for the role."),
    ),
    Signature(
        "disk_full", _("Disk full"), FC.INFRASTRUCTURE,
        r"No space left on device|\[Errno 28\]",
        _("A volume is full: checkpoints, logs or caches filled it. Free space, write checkpoints "
          "to a larger volume, or keep fewer of them."),
    ),
    Signature(
        "import_error", _("Python import error"), FC.CONFIGURATION,
        r"ModuleNotFoundError: No module named|ImportError: ",
        _("A Python module could not be imported: the image lacks a package or the code's path is "
          "wrong. Check the image and its version."),
    ),
    Signature(
        "hydra_config", _("Hydra configuration error"), FC.CONFIGURATION,
        r"hydra\.errors\.\w+|omegaconf\.errors\.\w+|ConfigCompositionException|Could not override '"
        r"|Error merging override|MissingMandatoryValue",
        _("The training configuration does not compose: a key is misspelt, missing or of the wrong "
          "type. Fix the config or the override and clone the Job."),
    ),
    # Consequences: what follows a failure, never its cause.
    Signature(
        "ray_kill", _("Killed by ray.kill"), FC.RAY_MEMBERSHIP,
        r"killed by `?ray\.kill`?|ray\.kill\(", consequence=True,
    ),
    Signature(
        "actor_dead", _("A Ray actor is dead"), FC.RAY_MEMBERSHIP,
        r"The actor is dead|The actor died|RayActorError|ActorDiedError", consequence=True,
    ),
    Signature(
        "worker_exit", _("A Ray worker exited"), FC.RAY_MEMBERSHIP,
        r"Worker exit(?:s|ed)?\b|worker died or was killed|Worker unexpectedly exits",
        consequence=True,
    ),
    Signature(
        "sigterm", _("Stopped by SIGTERM"), FC.INFRASTRUCTURE,
        r"SIGTERM|Received signal 15|signal 15\b|Terminated$", consequence=True,
    ),
)  # fmt: skip

# Kubernetes' own reasons: the label when no log names anything (`for_reason`).
KUBERNETES: tuple[Signature, ...] = (
    Signature(
        "oom_killed", _("Container out of memory (OOMKilled)"), FC.OUT_OF_MEMORY, "OOMKilled",
        _("The container used more memory than its limit and the kernel killed it (exit code 137). "
          "Raise the role's memory limit or lower what it holds."),
    ),
    Signature(
        "evicted", _("Pod evicted"), FC.INFRASTRUCTURE, "Evicted",
        _("The node ran short of a resource and evicted the pod. Give the role requests that match "
          "what it uses, or run it on a node with more room."),
    ),
    Signature(
        "deadline", _("Deadline exceeded"), FC.CONFIGURATION, "DeadlineExceeded",
        _("The Task ran longer than its activeDeadlineSeconds. Raise the deadline or shorten the "
          "run."),
    ),
    Signature(
        "image_pull", _("Image cannot be pulled"), FC.CONFIGURATION,
        "ErrImagePull|ImagePullBackOff|InvalidImageName",
        _("The image name, tag or registry credentials are wrong, or the registry is unreachable. "
          "Fix the image and clone the Job."),
    ),
)  # fmt: skip
