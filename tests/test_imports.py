"""The import picture of issue 9 (Engine 2, "Show"): no cycles between the project's files,
type-only imports included; `console/kube/` imports nothing of ours outside its own package;
only the engine calls `console/kube/`; the engine (`console.engine`) is imported only by Celery
tasks, management commands and tests.

Imports are read from the source with `ast`, every one of them: inside functions and under
`if TYPE_CHECKING:` too, since a cycle a type checker follows is still a cycle a reader follows."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "bench", "console", "failures", "jobs", "notify", "scripts", "simcluster", "usage", "workers",
)  # fmt: skip


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """Every project module by dotted name, migrations left out (generated, import nothing of ours
    that matters here)."""
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[_module_name(path)] = path
    return modules


def _absolute(node: ast.ImportFrom, module: str, path: Path) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module a dotted name refers to: the longest known prefix."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `module` imports; `from package import submodule` counts the
    submodule."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, path)
            names = [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            target = _resolve(name, modules)
            if target is not None and target != module:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def _package_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Importing `a.b.c` runs `a/__init__` and `a/b/__init__` first; those edges are implied by
    the language, not by anyone's import, so a cycle through them is left out (a package that
    imports its own submodule is not a cycle between files)."""
    return {
        name: {t for t in targets if not name.startswith(t + ".")}
        for name, targets in graph.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_it_finds_no_import_cycle_between_files() -> None:
    assert cycles(_package_edges(import_graph())) == []


def test_it_finds_a_cycle_when_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_kube_imports_nothing_of_ours_outside_its_package() -> None:
    graph = import_graph()
    outside = {
        (name, target)
        for name, targets in graph.items()
        if _in(name, "console.kube")
        for target in targets
        if not _in(target, "console.kube")
    }
    assert outside == set()


# The one door from requests to the engine: a pod's log tail and Events are read while the reader
# waits, through the engine (docs/decisions.md, "The import picture").
ON_DEMAND_READ = "jobs.pod_logs"
# An operator's actions on nodes, answered while the operator waits (issue 36).
OPERATOR_ACTIONS = ("console.node_actions", "console.cluster_actions", "console.addon_actions")
# The frozen dataclasses the gateway returns: values the status rules read, not a call to a cluster.
OBSERVATIONS = "console.kube.observations"


def _is_command(name: str) -> bool:
    return ".management.commands." in name


def test_the_engine_is_imported_only_by_tasks_commands_and_tests() -> None:
    """The benchmarks (`bench/`) measure the engine as the tests do."""
    graph = import_graph()
    importers = {name for name in graph if any(_in(t, "console.engine") for t in graph[name])}
    others = {
        name
        for name in importers
        if not (_in(name, "console.engine") or _in(name, "bench") or _is_command(name))
        and name not in ("console.tasks", ON_DEMAND_READ, *OPERATOR_ACTIONS)
    }
    assert others == set()


def test_only_the_engine_calls_kube() -> None:
    graph = import_graph()
    callers = {
        (name, target)
        for name in graph
        for target in graph[name]
        if _in(target, "console.kube") and not _in(name, "console.kube")
    }
    others = {
        (name, target)
        for name, target in callers
        if not (_in(name, "console.engine") or _in(name, "bench"))
        and not (_in(name, "jobs.status") and target == OBSERVATIONS)
    }
    assert others == set()


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# Page helpers the status rules must not reach up to: they return moments and values, and the
# pages word them (issue 31, item 8).
PAGE_HELPERS = ("console.web",)


def _is_models(module: str) -> bool:
    return module.rpartition(".")[2] == "models" or ".models." in module


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module `start` imports, directly or through others: each with the module that
    imports it on the way (for the failure's message)."""
    found: dict[str, str] = {}
    todo = [start]
    while todo:
        name = todo.pop()
        for target in graph.get(name, ()):
            if target not in found and target != start:
                found[target] = name
                todo.append(target)
    return found


def test_the_status_rules_import_no_model_and_no_page_helper() -> None:
    """`jobs/status/` takes plain values (STYLE.md 3): no models module (its vocabularies live
    in `jobs.choices`) and no web helper, imported directly or through any module it imports."""
    graph = import_graph()
    reached = {
        (name, target, via)
        for name in graph
        if _in(name, "jobs.status")
        for target, via in reachable(graph, name).items()
        if _is_models(target) or any(_in(target, helper) for helper in PAGE_HELPERS)
    }
    assert reached == set()


def test_reachable_follows_the_chain() -> None:
    graph = {"jobs.status.a": {"jobs.b"}, "jobs.b": {"jobs.c"}, "jobs.c": {"jobs.models"}}
    assert reachable(graph, "jobs.status.a") == {
        "jobs.b": "jobs.status.a", "jobs.c": "jobs.b", "jobs.models": "jobs.c",
    }  # fmt: skip


# Module names that once meant different things in different packages (issue 31, item 9): each now
# names one module, and no module called `signals` holds anything but Django signals (none does).
ONE_MEANING = ("attention", "observed", "logs", "signals", "container")


def test_each_of_these_module_names_means_one_thing() -> None:
    named: dict[str, list[str]] = {}
    for module in project_modules():
        base = module.rpartition(".")[2]
        if base in ONE_MEANING:
            named.setdefault(base, []).append(module)
    assert {base: modules for base, modules in named.items() if len(modules) > 1} == {}
    assert "signals" not in named


def test_the_workloads_word_is_one_package() -> None:
    """Intake, report, fallbacks and RLinf's log reading in `jobs/workload/`; the state's pure
    rule beside the other status rules; nothing of it loose in `jobs/`."""
    modules = project_modules()
    assert {m for m in modules if m.startswith("jobs.workload.")} >= {
        "jobs.workload.intake", "jobs.workload.report", "jobs.workload.fallbacks",
        "jobs.workload.rlinf_logs",
    }  # fmt: skip
    assert not {"jobs.signals", "jobs.fallbacks", "jobs.rlinf_logs"} & set(modules)
    assert modules["jobs.workload"].name == "__init__.py"


def test_the_job_api_is_one_package_by_resource() -> None:
    """`jobs/api.py` split by resource (issue 31, item 9) does not come back, and no module of
    the `jobs` app outside `jobs/api/` uses the API's parts (its object, auth, errors): an
    endpoint of the Job API lives in the package."""
    modules, graph = project_modules(), import_graph()
    assert modules["jobs.api"].name == "__init__.py"
    assert not (ROOT / "jobs" / "api.py").exists()
    outside = {
        name
        for name, targets in graph.items()
        if _in(name, "jobs") and not _in(name, "jobs.api")
        and any(_in(target, "jobs.api") for target in targets)
    }  # fmt: skip
    assert outside == set()


def test_the_engines_row_names_are_the_engines_alone() -> None:
    """`TaskRow`, `WorkerRow`, `InstanceRow` are the engine's typed rows; the pages' are
    `Shown…`."""
    defined = {
        (module, node.name)
        for module, path in project_modules().items()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef) and node.name in ("TaskRow", "WorkerRow", "InstanceRow")
    }
    assert {module for module, _ in defined} == {"console.engine.rows"}
