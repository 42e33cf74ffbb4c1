"""Cluster.kubeconfig, plain text until now, is encrypted in place (console/encryption.py) under
the newest key of TRAINYARD_FIELD_KEYS; a file path may replace the content."""

from typing import Any

from django.db import migrations, models

import console.fields
from console import encryption


def _rewrite(schema_editor: Any, change: Any) -> None:
    """Raw SQL: the historical field would treat the plain text as ciphertext."""
    table = schema_editor.quote_name("console_cluster")
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, kubeconfig FROM {table}")
        for pk, text in cursor.fetchall():
            cursor.execute(
                f"UPDATE {table} SET kubeconfig = %s WHERE id = %s", [change(text or ""), pk]
            )


def encrypt_rows(apps: Any, schema_editor: Any) -> None:
    _rewrite(schema_editor, encryption.encrypt)


def decrypt_rows(apps: Any, schema_editor: Any) -> None:
    _rewrite(schema_editor, encryption.decrypt)


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0005_sync_stats'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='insecure',
            field=models.BooleanField(default=False, help_text='Allow a kubeconfig that skips TLS verification of the API server (insecure-skip-tls-verify). Shown on the Clusters page.', verbose_name='insecure (TLS not verified)'),
        ),
        migrations.AddField(
            model_name='cluster',
            name='kubeconfig_path',
            field=models.CharField(blank=True, help_text="Instead of the content: the absolute path of a kubeconfig file on the console's hosts (e.g. a mounted Kubernetes Secret), read at every use.", max_length=1024, verbose_name='kubeconfig file'),
        ),
        migrations.AlterField(
            model_name='cluster',
            name='kubeconfig',
            field=console.fields.KubeconfigField(blank=True, help_text='Stored encrypted, never shown back.', verbose_name='kubeconfig'),
        ),
        migrations.RunPython(encrypt_rows, decrypt_rows),
    ]
