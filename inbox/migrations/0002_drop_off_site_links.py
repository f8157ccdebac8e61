"""Links stored before they were judged as a browser parses them (WHATWG URL) are judged again.

A link that a browser resolves off-site (``/\\evil.example/x``) is cleared, so
the inbox page and the widget never show it; the reverse keeps what is there.
"""

from django.db import migrations


def judge_stored_links(apps, schema_editor):
    from inbox.provider import safe_link

    InboxMessage = apps.get_model("inbox", "InboxMessage")
    for pk, link in InboxMessage.objects.exclude(link="").values_list("pk", "link").iterator():
        safe = safe_link(link)
        if safe != link:
            InboxMessage.objects.filter(pk=pk).update(link=safe)


class Migration(migrations.Migration):
    dependencies = [("inbox", "0001_inbox_message")]

    operations = [migrations.RunPython(judge_stored_links, migrations.RunPython.noop)]
