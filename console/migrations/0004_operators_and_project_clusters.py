"""The group "operators" holding the operator permission, and every existing project given every
existing cluster, so that what users could do before the per-project list existed still works."""

from django.db import migrations

GROUP = "operators"
CODENAME = "operate_platform"


def create_operators(apps, schema_editor):
    """The permission is created here: Django creates permissions only after all migrations."""
    content_type_model = apps.get_model("contenttypes", "ContentType")
    permission_model = apps.get_model("auth", "Permission")
    group_model = apps.get_model("auth", "Group")
    content_type, _ = content_type_model.objects.get_or_create(app_label="console", model="project")
    permission, _ = permission_model.objects.get_or_create(
        content_type=content_type,
        codename=CODENAME,
        defaults={
            "name": "Operate the platform: read every project and its diagnostics, manage "
            "projects and their members"
        },
    )
    group, _ = group_model.objects.get_or_create(name=GROUP)
    group.permissions.add(permission)


def open_existing_clusters(apps, schema_editor):
    project_model = apps.get_model("console", "Project")
    cluster_model = apps.get_model("console", "Cluster")
    clusters = list(cluster_model.objects.all())
    for project in project_model.objects.all():
        project.clusters.add(*clusters)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("console", "0003_project_clusters_operator"),
    ]

    operations = [
        migrations.RunPython(create_operators, migrations.RunPython.noop),
        migrations.RunPython(open_existing_clusters, migrations.RunPython.noop),
    ]
