import django.core.validators
import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    """API client names: ASCII letters, digits, '.', '_' and '-', unique ignoring case (no lookalike names).

    The case-blind UNIQUE replaces the plain one. A database holding two names that differ only in case
    stops here with the constraint's name: rename one of the clients in the admin first.
    """

    dependencies = [
        ("notifications", "0024_notification_indexes_for_state_changes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="apiclient",
            name="name",
            field=models.CharField(
                max_length=100,
                validators=[
                    django.core.validators.RegexValidator(
                        "\\A[A-Za-z0-9][A-Za-z0-9._-]*\\Z",
                        "A client's name is ASCII letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. orders).",
                        code="invalid_name",
                    )
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="apiclient",
            constraint=models.UniqueConstraint(
                django.db.models.functions.text.Lower("name"),
                name="apiclient_name_ignoring_case",
                violation_error_message="An API client with this name exists (names are compared ignoring case).",
            ),
        ),
    ]
