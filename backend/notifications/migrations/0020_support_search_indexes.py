"""Indexes for the support explorer's searches (backend/support/search.py), one per lookup.

- a provider's reference alone, where set (the (provider, provider_ref) index needs the provider);
- an email whatever its case: UPPER(email).

User ids, phone numbers and notification ids already have theirs; idempotency keys use the
UNIQUE (scope, key) index once per scope, and a campaign's rows are listed in its order (scope
``campaign:<id>``, by key): the (campaign, state) index is left as it is, which B-tree
deduplication keeps small and cheap for a fan-out's million inserts.
"""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notifications", "0019_delivered_undelivered_states_and_receipts")]

    operations = [
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("provider_ref", ""), _negated=True),
                fields=["provider_ref"],
                name="notification_ref_search_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="recipient",
            index=models.Index(django.db.models.functions.text.Upper("email"), name="recipient_email_upper_idx"),
        ),
    ]
