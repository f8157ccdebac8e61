import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("notifications", "0020_support_search_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ContactReveal",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "username",
                    models.CharField(help_text="Kept as written, should the account be renamed.", max_length=150),
                ),
                ("recipient_user_id", models.CharField(max_length=128)),
                ("field", models.CharField(choices=[("phone", "Phone"), ("email", "Email")], max_length=5)),
                ("at", models.DateTimeField(auto_now_add=True)),
                (
                    "notification",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="The notification page it was revealed on, if any.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="notifications.notification",
                    ),
                ),
                (
                    "recipient",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="notifications.recipient"
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={
                "ordering": ["-at"],
                "permissions": [
                    ("use_explorer", "Can search and read the support explorer"),
                    ("reveal_contact", "Can reveal a masked phone number or email address"),
                ],
            },
        ),
    ]
