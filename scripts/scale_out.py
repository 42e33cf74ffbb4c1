"""Scale-out run (bench/scale_out.py): five simulated clusters, two Celery workers, a beat and a
web server as real processes, one cluster made slow; prints the per-cluster cycle counts and the
web server's answer times as a table.

    python scripts/scale_out.py [--window 40]

The database is a throwaway SQLite file under var/bench/ unless DATABASE_URL is set (then that
database is migrated and its clusters added to: never point it at production). Exit status 0
when the targets held.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=40.0, help="seconds measured")
    arguments = parser.parse_args()
    database = ROOT / "var" / "bench" / "scale_out.sqlite3"
    database.parent.mkdir(parents=True, exist_ok=True)
    database.unlink(missing_ok=True)
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{database}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from bench.scale_out import measure, table

    figures = measure(arguments.window)
    print(table(figures))
    print("targets held" if figures.held() else "targets NOT held")
    return 0 if figures.held() else 1


if __name__ == "__main__":
    sys.exit(main())
