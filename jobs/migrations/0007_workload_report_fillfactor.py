"""WorkloadReport rows are rewritten by every signal (one row per Job, about 2 KB): on
PostgreSQL their pages keep three quarters free, so each update finds room on its own page and
is a HOT update, which the next reader prunes without waiting for a vacuum (docs/decisions.md,
"Signal intake"). Other databases have no such setting."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

FILLFACTOR = 25


def set_fillfactor(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE jobs_workloadreport SET (fillfactor = {FILLFACTOR})")


def reset_fillfactor(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE jobs_workloadreport RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_workload_reports")]

    operations = [migrations.RunPython(set_fillfactor, reset_fillfactor)]
