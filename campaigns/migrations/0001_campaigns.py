"""Campaigns, segments (filter or uploaded list) and their members, approvals bound to a content hash,
and the audit trail; the indexes serve the pages that list them (by state, by author, a campaign's timeline).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("notifications", "0007_notification_lease"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Segment",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=200)),
                (
                    "kind",
                    models.CharField(
                        choices=[("filter", "Filter over contact data"), ("list", "Uploaded list of users")],
                        max_length=8,
                    ),
                ),
                (
                    "definition",
                    models.JSONField(blank=True, default=dict, help_text="A filter segment's rule; {} for a list."),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "client",
                    models.ForeignKey(
                        blank=True,
                        help_text="Made over the API.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="notifications.apiclient",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="Campaign",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=200)),
                (
                    "channel",
                    models.CharField(
                        choices=[("email", "Email"), ("sms", "SMS"), ("push", "Push"), ("inapp", "In-app")],
                        max_length=8,
                    ),
                ),
                (
                    "template_versions",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text='Language → approved template version id, e.g. {"en": 12, "ar": 13}.',
                    ),
                ),
                ("params", models.JSONField(blank=True, default=dict, help_text="Params shared by every recipient.")),
                (
                    "schedule_mode",
                    models.CharField(
                        choices=[
                            ("now", "As soon as it is approved"),
                            ("at", "At an instant"),
                            ("local_time", "At a wall time in each recipient's time zone"),
                        ],
                        default="now",
                        max_length=10,
                    ),
                ),
                ("send_at", models.DateTimeField(blank=True, help_text='The instant of an "at" schedule.', null=True)),
                (
                    "local_time",
                    models.TimeField(blank=True, help_text='The wall time of a "local_time" schedule.', null=True),
                ),
                (
                    "end_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="Nothing more is handed to a provider after it; the rest ends expired.",
                        null=True,
                    ),
                ),
                (
                    "correction_none_reason",
                    models.TextField(blank=True, help_text="Why the campaign has no correction template."),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("draft", "Draft"),
                            ("submitted", "Submitted for approval"),
                            ("approved", "Approved"),
                            ("rejected", "Rejected"),
                            ("scheduled", "Scheduled"),
                            ("running", "Running"),
                            ("cancelled", "Cancelled"),
                            ("done", "Done"),
                        ],
                        default="draft",
                        max_length=10,
                    ),
                ),
                (
                    "content_hash",
                    models.CharField(
                        blank=True,
                        help_text="SHA-256 frozen at submit (content_hash.py); empty in draft.",
                        max_length=64,
                    ),
                ),
                ("idempotency_key", models.CharField(blank=True, max_length=255)),
                (
                    "request_hash",
                    models.CharField(blank=True, help_text="HMAC of the API request body.", max_length=64),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("submitted_at", models.DateTimeField(blank=True, null=True)),
                (
                    "author",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "client",
                    models.ForeignKey(
                        blank=True,
                        help_text="Made over the API.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="notifications.apiclient",
                    ),
                ),
                (
                    "correction_version",
                    models.ForeignKey(
                        blank=True,
                        help_text="The approved version a correction of this campaign would send.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="notifications.templateversion",
                    ),
                ),
                (
                    "kind",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="notifications.kind"
                    ),
                ),
                (
                    "segment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="campaigns", to="campaigns.segment"
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
                "permissions": [("approve_campaign", "Can approve or reject campaigns (never one's own)")],
            },
        ),
        migrations.CreateModel(
            name="SegmentMember",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "recipient",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="notifications.recipient"
                    ),
                ),
                (
                    "segment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="memberships", to="campaigns.segment"
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="segment",
            name="members",
            field=models.ManyToManyField(
                related_name="+", through="campaigns.SegmentMember", to="notifications.recipient"
            ),
        ),
        migrations.CreateModel(
            name="CampaignApproval",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "decision",
                    models.CharField(choices=[("approved", "Approved"), ("rejected", "Rejected")], max_length=8),
                ),
                ("comment", models.TextField(blank=True)),
                ("content_hash", models.CharField(max_length=64)),
                ("at", models.DateTimeField(auto_now_add=True)),
                ("voided_at", models.DateTimeField(blank=True, null=True)),
                (
                    "approver",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "campaign",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="approvals", to="campaigns.campaign"
                    ),
                ),
            ],
            options={
                "ordering": ["-at"],
                "indexes": [models.Index(fields=["campaign", "-at"], name="campaign_approval_recent_idx")],
            },
        ),
        migrations.CreateModel(
            name="CampaignAudit",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("actor_name", models.CharField(help_text="The username, or api:<client name>.", max_length=160)),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("create", "Created"),
                            ("edit", "Edited"),
                            ("submit", "Submitted"),
                            ("approve", "Approved"),
                            ("reject", "Rejected"),
                            ("void", "Approval voided"),
                            ("cancel", "Cancelled"),
                        ],
                        max_length=8,
                    ),
                ),
                ("content_hash", models.CharField(blank=True, max_length=64)),
                ("detail", models.JSONField(blank=True, default=dict)),
                ("at", models.DateTimeField(auto_now_add=True)),
                (
                    "actor",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "campaign",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="audit", to="campaigns.campaign"
                    ),
                ),
            ],
            options={
                "ordering": ["at", "pk"],
                "indexes": [
                    models.Index(fields=["campaign", "at"], name="campaign_audit_timeline_idx"),
                    models.Index(fields=["actor", "-at"], name="campaign_audit_actor_idx"),
                ],
            },
        ),
        migrations.AddIndex(
            model_name="campaign",
            index=models.Index(fields=["state", "-created_at"], name="campaign_state_recent_idx"),
        ),
        migrations.AddIndex(
            model_name="campaign",
            index=models.Index(fields=["author", "-created_at"], name="campaign_author_recent_idx"),
        ),
        migrations.AddConstraint(
            model_name="campaign",
            constraint=models.UniqueConstraint(
                condition=models.Q(("client__isnull", False)),
                fields=("client", "idempotency_key"),
                name="campaign_idempotency_key_per_client",
            ),
        ),
        migrations.AddConstraint(
            model_name="segmentmember",
            constraint=models.UniqueConstraint(fields=("segment", "recipient"), name="segment_member_unique"),
        ),
        migrations.AddIndex(
            model_name="segment",
            index=models.Index(fields=["-created_at"], name="segment_recent_idx"),
        ),
    ]
