"""Links stored before the WHATWG link rule are judged again by migration 0002."""

import importlib

from django.apps import apps

from backend.notifications.models import Recipient
from inbox.models import InboxMessage

migration = importlib.import_module("inbox.migrations.0002_drop_off_site_links")


def test_stored_links_that_leave_the_site_are_cleared_and_good_ones_kept(db):
    layla = Recipient.objects.create(user_id="u-ar-1", language="ar")
    stored = {
        "/\\evil.example/x": "",
        "https://good@evil.example/": "",
        "/orders/5012": "/orders/5012",
        "https://shop.example/orders/5012": "https://shop.example/orders/5012",
    }
    ids = {
        link: InboxMessage.objects.create(recipient=layla, kind="shipped", title="t", link=link).pk for link in stored
    }

    migration.judge_stored_links(apps, None)

    assert {link: InboxMessage.objects.get(pk=pk).link for link, pk in ids.items()} == stored
