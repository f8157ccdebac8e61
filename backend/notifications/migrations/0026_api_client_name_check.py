"""API client names: the rule of 0025 checked by the database too, so a shell or script cannot write ``Orders``.

0025 already refused to go on while a stored name broke the rule, so adding the CHECK finds none.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notifications", "0025_api_client_name_rule")]

    operations = [
        migrations.AddConstraint(
            model_name="apiclient",
            constraint=models.CheckConstraint(
                condition=models.Q(name__regex="\\A[a-z0-9][a-z0-9._-]*\\Z"), name="api_client_name_rule"
            ),
        ),
    ]
