"""Cluster.insecure_since: when a cluster's credentials first skipped TLS verification or spoke
plain http. A cluster insecure today gets its registration time (the earliest it can have been)."""

from typing import Any

from django.db import migrations, models
from django.db.models import F


def since_registration(apps: Any, schema_editor: Any) -> None:
    Cluster = apps.get_model("console", "Cluster")
    Cluster.objects.filter(insecure=True).update(insecure_since=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0016_kept_log_read_audit"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="insecure_since",
            field=models.DateTimeField(blank=True, null=True, verbose_name="insecure since"),
        ),
        migrations.RunPython(since_registration, migrations.RunPython.noop),
    ]
