"""The `bash -c SCRIPT` containers simcluster understands: the pods of the "RLinf on Ray"
template, read from their scripts as a shell would split them (simcluster imports nothing of
the console's, so the scripts are all it knows).

- A head: `ray start --head ... --block &` in the background, and at the end
  `exec python .../trainyard_driver.py --expected-nodes N [--done-marker PATH] ... -- ENTRY...`:
  Ray's head, the driver wrapper and a simulated RLinf run behind it (`TrainOptions` with
  `DriverOptions`, run by simcluster/trainer.py). The run's steps come from the entry's Hydra
  override `runner.max_steps=K` (DEFAULT_STEPS without one: the configuration file is not read),
  a checkpoint every `runner.save_interval=N` steps (none without one), the heartbeat from
  TRAINYARD_HEARTBEAT_SECONDS as the wrapper reads it; then SIMCLUSTER_TRAIN, `sim train`'s
  options (`--step-seconds 2 --fail-at 7`), which a real cluster never reads, has the last word.
- A worker: a script that ends `exec ray start --address=HOST:6379 --block`, or runs it in the
  background and ends `wait` (the template's): `sim ray-worker HOST`.

Words are expanded as the shell would for plain `$NAME` and `${NAME}` (the container's
environment, then the script's own assignments): the template names the Job only as
`$TRAINYARD_JOB`. Any other script, or one the shell's quoting rules cannot split, is not
understood here.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace

from client.trainyard_driver import heartbeat_seconds
from simcluster.training import DriverOptions, TrainOptions, parse_train

SIM_ENV = "SIMCLUSTER_TRAIN"
DEFAULT_STEPS = 100
RESULTS = "/workspace/results"  # where checkpoints go without runner.logger.log_path
PUNCTUATION = set(";&|()<>\n")
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
# The wrapper's options, each taking a value (its argparse).
DRIVER_OPTIONS = (
    "--expected-nodes", "--nodes-timeout", "--ray-address", "--poll-seconds", "--done-marker",
)  # fmt: skip

Command = tuple[list[str], str]  # its words, and the operator after it ("" at the end)


@dataclass(frozen=True)
class RayPod:
    head_host: str = ""  # a worker: the head it joins
    train: TrainOptions | None = None  # a head: the run behind its driver wrapper


def ray_pod(script: str, args: list[str], env: Mapping[str, str]) -> RayPod | None:
    """What `bash -c script _ args...` is, or None; ValueError for a SIMCLUSTER_TRAIN that
    `sim train` would refuse (or that names --nodes or --exit, which the script decides)."""
    try:
        found = expanded(commands(script), env)
    except ValueError:  # no closing quotation, as the shell would refuse it
        return None
    if not found or found[-1][1]:
        return None
    joined = _worker_start(found)
    if joined is not None:
        address = _option(joined, "--address")
        return RayPod(head_host=address.rpartition(":")[0] or address) if address else None
    heads = [words for words, operator in found[:-1] if operator == "&"]
    started = [_ray_start(words) for words in heads]
    if not any(words and "--head" in words and "--block" in words for words in started):
        return None
    driven = _driver(found[-1][0], args)
    return RayPod(train=_train(*driven, env)) if driven else None


def commands(script: str) -> list[Command]:
    """The simple commands of a script, split at `;`, `&`, `|`, `&&`, `||` and newlines."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars="".join(PUNCTUATION))
    lexer.whitespace, lexer.whitespace_split, lexer.commenters = " \t\r", True, ""
    found: list[Command] = []
    words: list[str] = []
    for token in lexer:
        operator = _operator(token)
        if operator:
            if words:
                found.append((_uncommented(words), operator))
            words = []
        else:
            words.append(token)
    if words:
        found.append((_uncommented(words), ""))
    return [(words, operator) for words, operator in found if words]


def expanded(found: list[Command], env: Mapping[str, str]) -> list[Command]:
    """The commands with `$NAME` and `${NAME}` replaced as the shell would, from the container's
    environment and the script's own assignments (`out=...`, `export NAME=...`) before them; an
    unset name is empty. Other expansions (`$@`, `$((...))`, `${NAME##*-}`) stay as written."""
    variables = dict(env)
    result: list[Command] = []
    for words, operator in found:
        words = [VARIABLE.sub(lambda m: variables.get(m[1] or m[2], ""), word) for word in words]
        assigned = words[1:] if words[:1] == ["export"] else words
        for word in assigned if all(ASSIGNMENT.match(w) for w in assigned) else []:
            name, _, value = word.partition("=")
            variables[name] = value
        result.append((words, operator))
    return result


def _operator(token: str) -> str:
    """The separator a run of punctuation is (`;`, `&`, `&&`, `|`, ...; a newline is `;`), or ""
    for a word or a redirection (`2>&1`). Parentheses are dropped: subshells are not followed."""
    if not set(token) <= PUNCTUATION or set(token) & set("<>"):
        return ""
    operator = token.strip("()\n")
    return operator.replace("\n", "") or (";" if "\n" in token else "")


def _uncommented(words: list[str]) -> list[str]:
    comment = next((i for i, word in enumerate(words) if word.startswith("#")), len(words))
    return words[:comment]


def _worker_start(found: list[Command]) -> list[str] | None:
    """A worker's `ray start --block` (not a head's) options: the script's last command, or run
    in the background by a script that ends waiting for it (the template's worker, whose shell
    stays in front to answer SIGTERM)."""
    words = found[-1][0]
    if words[:1] == ["wait"]:
        background = [words for words, operator in found[:-1] if operator == "&"]
        words = background[-1] if background else []
    started = _ray_start(words)
    if started is None or "--block" not in started or "--head" in started:
        return None
    return started


def _ray_start(words: list[str]) -> list[str] | None:
    words = words[1:] if words[:1] == ["exec"] else words
    return words[2:] if words[:2] == ["ray", "start"] else None


def _option(words: list[str], name: str) -> str | None:
    for index, word in enumerate(words):
        if word.startswith(f"{name}="):
            return word.partition("=")[2]
        if word == name and index + 1 < len(words):
            return words[index + 1]
    return None


def _driver(words: list[str], args: list[str]) -> tuple[DriverOptions, list[str]] | None:
    """The wrapper's options and entry, as its argparse reads them (`"$@"` is `args`); None
    when it would refuse them (it exits 2 there; here the script is simply not understood)."""
    words = words[1:] if words[:1] == ["exec"] else words
    if len(words) < 2 or not PYTHON.match(posixpath.basename(words[0])):
        return None
    if posixpath.basename(words[1]) != "trainyard_driver.py":
        return None
    values: dict[str, str] = {}
    rest = words[2:]
    while rest and rest[0] != "--" and rest[0].startswith("-"):
        name, equals, inline = rest[0].partition("=")
        if name not in DRIVER_OPTIONS or (not equals and len(rest) < 2):
            return None
        values[name] = inline if equals else rest[1]
        rest = rest[1:] if equals else rest[2:]
    rest = rest[1:] if rest[:1] == ["--"] else rest
    entry = [word for arg in rest for word in (args if arg == "$@" else [arg])]
    if "--expected-nodes" not in values or not entry:
        return None
    try:
        options = DriverOptions(
            int(values["--expected-nodes"]),
            values.get("--done-marker"),
            float(values.get("--nodes-timeout", 600.0)),
            float(values.get("--poll-seconds", 5.0)),
        )
    except ValueError:
        return None
    return options, entry


def _train(driver: DriverOptions, entry: list[str], env: Mapping[str, str]) -> TrainOptions:
    overrides = hydra_overrides(entry)
    steps = _positive(overrides.get("runner.max_steps")) or DEFAULT_STEPS
    nodes = max(driver.expected_nodes, 1)
    args = [str(steps), "--nodes", str(nodes)]
    args += ["--checkpoint-every", str(_positive(overrides.get("runner.save_interval")) or 0)]
    beat = heartbeat_seconds(env.get("TRAINYARD_HEARTBEAT_SECONDS", ""))
    args += ["--heartbeat-seconds", str(beat), *shlex.split(env.get(SIM_ENV, ""))]
    options = parse_train(args)
    if options.exit or options.nodes != nodes:
        raise ValueError(f"{SIM_ENV} cannot set --exit or --nodes: the script decides them")
    log_path = overrides.get("runner.logger.log_path") or RESULTS
    experiment = overrides.get("runner.logger.experiment_name") or _config_name(entry)
    return replace(options, driver=driver, log_path=f"{log_path}/{experiment}")


def hydra_overrides(entry: list[str]) -> dict[str, str]:
    """The entry's `key=value` overrides (`+key`, `++key` alike), the last of a key winning,
    with Hydra's own quotes taken off the value."""
    found = {}
    for word in entry:
        key, equals, value = word.lstrip("+").partition("=")
        if equals and not word.startswith(("-", "~")):
            found[key] = value.strip("'\"")
    return found


def _config_name(entry: list[str]) -> str:
    """RLinf's configurations name their experiment after themselves: `--config-name`'s."""
    for flag in ("--config-name", "-cn"):
        if name := _option(entry, flag):
            return name
    return "sim-train"


def _positive(text: str | None) -> int | None:
    try:
        value = int(text or "")
    except ValueError:
        return None
    return value if value > 0 else None
