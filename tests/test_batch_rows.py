"""A batch's read (delivery/batch_rows.py): the same instances as Django's own iterator builds, at less cost."""

import uuid

import pytest

from backend.notifications.delivery import batch_rows
from backend.notifications.models import Kind, Notification, Recipient, State, TemplateVersion

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def rows(send) -> list[Notification]:
    """Three notifications of the demo: an SMS and a push to u-ar-1 and u-en-1, and an email, the last one sent."""
    ids = []
    for n, (user_id, channel) in enumerate([("u-ar-1", "sms"), ("u-en-1", "push"), ("u-ar-1", "email")]):
        body = {"user_id": user_id, "kind": "shipped", "params": {"order": str(n)}, "channel": channel}
        response = send(body, key=f"rows-{n}")
        assert response.status_code == 202, response.json()
        ids.append(response.json()["id"])
    Notification.objects.filter(pk=ids[2]).update(state=State.SENT)
    return list(Notification.objects.select_related("recipient", "kind", "template_version").filter(pk__in=ids))


def test_the_rows_still_queued_come_with_the_values_djangos_iterator_gives_them(rows, django_assert_num_queries):
    by_id = {row.pk: row for row in rows}
    keys = [str(row.pk) for row in rows] + [str(uuid.uuid4())]  # one row no longer queued, one gone

    # The rows with their recipients, then the distinct kinds and the distinct template versions.
    with django_assert_num_queries(3):
        found = batch_rows.queued(keys)

    assert sorted(str(row.pk) for row in found) == sorted(str(row.pk) for row in rows if row.state == State.QUEUED)
    for row in found:
        full = by_id[row.pk]
        read = [field.attname for field in Notification._meta.concrete_fields if field.name not in batch_rows.UNREAD]
        assert {name: row.__dict__[name] for name in read} == {name: getattr(full, name) for name in read}
        assert row.get_deferred_fields() == set(batch_rows.UNREAD)
        assert (row._state.adding, row._state.db) == (False, "default")
        recipient = row.recipient
        assert isinstance(recipient, Recipient) and recipient.pk == full.recipient_id
        assert (recipient.user_id, recipient.email, recipient.phone) == (
            full.recipient.user_id, full.recipient.email, full.recipient.phone,
        )  # fmt: skip
        assert recipient.get_deferred_fields() == set(batch_rows.UNREAD_RECIPIENT)
        assert isinstance(row.kind, Kind) and row.kind.name == "shipped"
        assert isinstance(row.template_version, TemplateVersion)
        assert (row.template_version.pk, row.template_version.channel) == (full.template_version_id, row.channel)
    assert len({id(row.kind) for row in found}) == 1  # one instance per distinct kind, shared


def test_a_loaded_row_behaves_as_a_model_instance(rows, django_assert_num_queries):
    row = next(row for row in batch_rows.queued([str(row.pk) for row in rows]) if row.channel == "sms")
    Notification.objects.filter(pk=row.pk).update(provider="twilio")

    assert "provider" in row.get_deferred_fields()
    with django_assert_num_queries(1):  # a deferred column, read from the database on first use
        assert row.provider == "twilio"
    assert "provider" not in row.get_deferred_fields()
    with django_assert_num_queries(1):
        assert row.recipient.language == "ar"
    row.last_error = "checked"
    with django_assert_num_queries(1):
        row.save(update_fields=["last_error"])  # an UPDATE of that row, not an INSERT of a new one
    assert Notification.objects.filter(last_error="checked").count() == 1
    assert Notification.objects.get(pk=row.pk).last_error == "checked"
