"""API client names: lowercase ASCII letters, digits, '.', '_' and '-' (no lookalike or case-twin names).

A database holding a name that breaks the rule stops first, naming the clients to rename.
"""

import re

import django.core.validators
from django.db import migrations, models

# The rule of ApiClient.name (models/client.py NAME_RULE) as it was when this migration was written.
RULE = re.compile(r"\A[a-z0-9][a-z0-9._-]*\Z")


def refuse_names_that_break_the_rule(apps, schema_editor):
    """Stop, naming each client to rename, if a name breaks the rule.

    Such a name would pass the migration, and its client's admin page would then refuse every save,
    revoking a leaked key included.
    """
    ApiClient = apps.get_model("notifications", "ApiClient")
    clients = ApiClient.objects.order_by("pk").values_list("pk", "name")
    problems = [f"{name!r} (id {pk})" for pk, name in clients if not RULE.match(name)]
    if problems:
        raise RuntimeError(
            "API client names are now lowercase ASCII letters, digits, '.', '_' and '-', starting with a letter or "
            "digit; rename " + ", ".join(problems) + " first, e.g. python manage.py shell -c \"from "
            "backend.notifications.models import ApiClient; ApiClient.objects.filter(pk=ID).update(name='NEW')\" "
            "(the name is a label: the client's notifications and idempotency scope keep its id), then migrate again."
        )


class Migration(migrations.Migration):
    dependencies = [("notifications", "0024_notification_indexes_for_state_changes")]

    operations = [
        migrations.RunPython(refuse_names_that_break_the_rule, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apiclient",
            name="name",
            field=models.CharField(
                max_length=100,
                unique=True,
                validators=[
                    django.core.validators.RegexValidator(
                        "\\A[a-z0-9][a-z0-9._-]*\\Z",
                        "A client's name is lowercase ASCII letters, digits, '.', '_' and '-', starting with a letter "
                        "or digit (e.g. orders).",
                        code="invalid_name",
                    )
                ],
            ),
        ),
    ]
