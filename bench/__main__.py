"""Runs every benchmark on a fresh database and writes docs/benchmarks.md.

The database is a throwaway SQLite file under var/bench/ unless DATABASE_URL is set (then the
benchmarks run on that database, which they flush between runs: never point it at production).
`make bench` sets DATABASE_URL and REDIS_URL (PostgreSQL and Redis, as deployed); the load
benchmark needs both. `python -m bench load faults` runs only the modules named and replaces only
their sections (the header then describes this run).
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = [
    "simcluster_list", "sync_cycle", "pages", "signal_intake", "scale_out", "faults", "races",
    "database_restart", "load", "ray_cluster", "notify", "series", "kept_logs",
    "usage_report", "usage_ledger",
]  # fmt: skip


def main(names: list[str]) -> None:
    bench_dir = ROOT / "var" / "bench"
    bench_dir.mkdir(parents=True, exist_ok=True)
    database = bench_dir / "bench.sqlite3"
    database.unlink(missing_ok=True)
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{database}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    load_at_start = os.getloadavg()[0]
    sections = []
    for name in names or MODULES:
        call_command("flush", interactive=False, verbosity=0)
        print(f"bench: {name} ...", flush=True)
        started = time.perf_counter()
        sections.append(importlib.import_module(f"bench.{name}").run())
        print(f"bench: {name} done in {time.perf_counter() - started:.1f} s", flush=True)
    written = [section.split("\n", 1)[0].removeprefix("## ") for section in sections]
    if names:  # the other sections stay as an earlier run wrote them
        sections = merged(sections, (ROOT / "docs" / "benchmarks.md").read_text())
    engine = os.environ["DATABASE_URL"].split(":", 1)[0]
    write_report(sections, engine, load_at_start, written if names else [])


def merged(sections: list[str], written: str) -> list[str]:
    """The sections of a written report, each replaced by the new one of the same title, in
    their order, then the new ones it did not have."""
    new = {section.split("\n", 1)[0]: section for section in sections}
    kept = ["## " + part.rstrip("\n") for part in written.split("\n## ")[1:]]
    replaced = [new.pop(section.split("\n", 1)[0], section) for section in kept]
    return replaced + list(new.values())


def write_report(
    sections: list[str], database: str, load_at_start: float, only: list[str] | None = None
) -> None:
    """The report; `only`: the titles of the sections this run wrote, when not all."""
    broker = "Redis" if os.environ.get("REDIS_URL") else "the embedded broker"
    header = (
        "# Benchmarks\n\n"
        "Written by `make bench` (`python -m bench`). Every target is a ratio against a floor "
        "measured in the same run, or a count, so the figures hold on any machine, except the "
        "load test's, which are the issue's own (p95 and p99 in milliseconds); absolute times "
        "are from the machine named below.\n\n"
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, database: {database}, broker: {broker}\n"
        f"- Run at: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; 1-minute load average "
        f"when it started: {load_at_start:.2f} (the machine is shared with other work)\n"
    )
    if only:
        header += (
            f"- This run wrote only: {', '.join(only)}; the other sections are from an earlier "
            "run, on the machine and at the time its own version of this header named\n"
        )
    (ROOT / "docs" / "benchmarks.md").write_text(header + "\n" + "\n\n".join(sections) + "\n")
    print("bench: wrote docs/benchmarks.md")


if __name__ == "__main__":
    main(sys.argv[1:])
