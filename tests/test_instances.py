"""Model instances without ``Model.__init__`` (instances.py): the same instances as Django's, or a refusal."""

import re
import uuid

import pytest
from django.db.models import Count, signals
from django.db.models.base import ModelState

from backend.notifications import instances
from backend.notifications.models import (
    ApiClient,
    Kind,
    Notification,
    Recipient,
    StaffContact,
    State,
    StateChange,
    TemplateVersion,
)

pytestmark = pytest.mark.usefixtures("demo_data")

# The fields acceptance gives a notification (actions/accept.py ``build``), every foreign key among them.
NAMES = (
    "idempotency_key", "idempotency_scope", "request_hash", "client", "recipient", "kind", "channel", "priority",
    "params", "send_at", "state", "reason", "template_version", "preview", "queued_at",
)  # fmt: skip


@pytest.fixture
def values(db) -> dict:
    kind = Kind.objects.get(name="shipped")
    return {
        "idempotency_key": "order-1", "idempotency_scope": "internal", "request_hash": "ab" * 32,
        "client": ApiClient.issue("instances")[0], "recipient": Recipient.objects.get(user_id="u-ar-1"), "kind": kind,
        "channel": "sms", "priority": "standard", "params": {"order": "1"}, "send_at": None, "state": State.QUEUED,
        "reason": "", "template_version": TemplateVersion.objects.filter(kind=kind, channel="sms").first(),
        "preview": "تم شحن طلبك", "queued_at": None,
    }  # fmt: skip


def _same_as_djangos(made: Notification, django: Notification) -> None:
    """Every attribute but the primary key (a new uuid4 each) equal, the same state, the same cached relations."""
    ours = {name: value for name, value in made.__dict__.items() if name not in ("_state", "id")}
    theirs = {name: value for name, value in django.__dict__.items() if name not in ("_state", "id")}
    assert ours == theirs
    assert isinstance(made.id, uuid.UUID) and made.id != django.id
    assert (made._state.adding, made._state.db) == (django._state.adding, django._state.db)
    assert made._state.fields_cache.keys() == django._state.fields_cache.keys()
    for name, related in django._state.fields_cache.items():
        assert made._state.fields_cache[name] is related


def test_a_made_notification_is_the_one_model_init_makes(values):
    made = instances.maker(Notification, NAMES)(**values)

    _same_as_djangos(made, Notification(**values))
    assert (made._state.adding, made._state.db) == (True, "default")
    assert (made.attempt_count, made.replayed_attempts, made.last_error, made.digest_id, made.campaign_id) == (
        0, 0, "", None, None,
    )  # fmt: skip
    assert made.get_deferred_fields() == set()


def test_a_foreign_key_given_none_is_cached_as_none_as_its_descriptor_does(values, django_assert_num_queries):
    values |= {"client": None, "template_version": None}
    made = instances.maker(Notification, NAMES)(**values)

    _same_as_djangos(made, Notification(**values))
    with django_assert_num_queries(0):
        assert (made.client, made.client_id, made.template_version, made.template_version_id) == (None,) * 4


def test_callable_defaults_are_called_for_each_instance(values):
    without_params = tuple(name for name in NAMES if name != "params")
    make = instances.maker(Notification, without_params)
    del values["params"]

    first, second = make(**values), make(**values)

    assert first.params == second.params == {}
    assert first.params is not second.params
    assert first.pk != second.pk


def test_a_made_row_saves_and_reads_back_as_djangos(values):
    made = instances.maker(Notification, NAMES)(**values)
    made.save(force_insert=True)
    change = instances.maker(StateChange, ("notification", "from_state", "to_state", "reason"))(
        notification=made, from_state="", to_state=State.QUEUED, reason="accepted"
    )
    change.save()

    read = Notification.objects.get(pk=made.pk)
    assert (read.idempotency_key, read.preview, read.params, read.client_id, read.template_version_id) == (
        "order-1", "تم شحن طلبك", {"order": "1"}, values["client"].pk, values["template_version"].pk,
    )  # fmt: skip
    assert made._state.adding is False
    assert list(read.state_changes.values_list("to_state", "reason")) == [(State.QUEUED, "accepted")]


def test_the_wrong_keywords_are_refused_rather_than_defaulted(values):
    make = instances.maker(Notification, NAMES)

    with pytest.raises(TypeError, match="Notification maker takes"):
        make(**{name: value for name, value in values.items() if name != "preview"})
    with pytest.raises(KeyError):
        make(**{**{name: value for name, value in values.items() if name != "preview"}, "provider": "twilio"})
    with pytest.raises(ValueError, match=r"no concrete fields \['recipient_id', 'nope'\]"):
        instances.maker(Notification, ("recipient_id", "nope"))


def test_a_related_instance_is_checked_as_its_descriptor_checks_it(values):
    make = instances.maker(Notification, NAMES)

    with pytest.raises(ValueError, match=r'"Notification\.kind" must be a "Kind" instance'):
        make(**values | {"kind": values["recipient"]})
    elsewhere = Kind.objects.get(name="shipped")
    elsewhere._state.db = "other"
    with pytest.raises(ValueError, match="the current database router prevents this relation"):
        make(**values | {"kind": elsewhere})
    unsaved = Kind(name="unsaved")
    assert unsaved._state.db is None
    make(**values | {"kind": unsaved})
    assert unsaved._state.db == "default"  # as the descriptor gives it the instance's database


def test_what_the_builders_would_skip_is_refused(monkeypatch, values):
    with pytest.raises(ValueError, match="single-column many-to-one keys"):
        instances.maker(StaffContact, ("user",))  # a one-to-one key: its descriptor also caches the reverse side

    instances._check_fields.cache_clear()
    monkeypatch.setattr(Notification, "preview", property(lambda self: "computed"), raising=True)
    try:
        for build in (
            lambda: instances.maker(Notification, ("preview",)),
            lambda: instances.loader(Notification, ["id"], "default"),
            lambda: instances.load_all(Notification.objects.all()),
        ):
            with pytest.raises(ValueError, match="has its own descriptor"):
                build()
    finally:
        monkeypatch.undo()
        instances._check_fields.cache_clear()


def test_routers_are_refused_each_time_a_maker_is_made(settings, values):
    class Router:
        def db_for_write(self, model, **hints):
            return "default"  # pragma: no cover - never asked: the maker is refused

    instances.maker(Notification, NAMES)  # its plan worked out and remembered
    settings.DATABASE_ROUTERS = [Router()]
    with pytest.raises(ValueError, match="maker assumes no database routers"):
        instances.maker(Notification, NAMES)
    settings.DATABASE_ROUTERS = []
    assert instances.maker(Notification, NAMES)(**values).kind == values["kind"]


@pytest.mark.parametrize("signal", [signals.pre_init, signals.post_init])
def test_a_model_with_init_receivers_is_refused_rather_than_built_without_them(signal, values):
    def receiver(**kwargs):
        pass  # pragma: no cover - never called: the build is refused

    signal.connect(receiver, sender=Notification, weak=False)
    try:
        with pytest.raises(ValueError, match="Notification has pre_init/post_init receivers"):
            instances.maker(Notification, NAMES)
        with pytest.raises(ValueError, match="Notification has pre_init/post_init receivers"):
            instances.loader(Notification, ["id"], "default")
    finally:
        signal.disconnect(receiver, sender=Notification)
    assert isinstance(instances.maker(Notification, NAMES)(**values)._state, ModelState)


def test_a_loaded_instance_is_the_one_from_db_makes(values):
    saved = Recipient.objects.get(user_id="u-en-1")
    names = [field.attname for field in Recipient._meta.concrete_fields if field.name != "attributes"]
    row = [getattr(saved, name) for name in names]

    loaded = instances.loader(Recipient, names, "default")(row)
    django = Recipient.from_db("default", names, row)

    assert loaded.__dict__.keys() - {"_state"} == django.__dict__.keys() - {"_state"}
    assert all(loaded.__dict__[name] == django.__dict__[name] for name in names)
    assert loaded.get_deferred_fields() == django.get_deferred_fields() == {"attributes"}
    assert (loaded._state.adding, loaded._state.db) == (django._state.adding, django._state.db) == (False, "default")


def test_a_querysets_rows_load_as_its_iterator_gives_them(django_assert_num_queries):
    unread = ("attributes", "created_at", "updated_at")
    wanted = Recipient.objects.filter(user_id__in=["u-ar-1", "u-en-1", "ghost"])
    django = {row.pk: row for row in wanted.defer(*unread)}

    with django_assert_num_queries(1):
        loaded = instances.load_all(wanted, unread)

    assert sorted(row.pk for row in loaded) == sorted(django) and len(loaded) == 2
    names = [field.attname for field in Recipient._meta.concrete_fields if field.name not in unread]
    for row in loaded:
        assert {name: row.__dict__[name] for name in names} == {name: django[row.pk].__dict__[name] for name in names}
        assert row.get_deferred_fields() == django[row.pk].get_deferred_fields() == set(unread)
        assert (row._state.adding, row._state.db) == (False, "default")
    stored = Recipient.objects.get(pk=loaded[0].pk).attributes
    with django_assert_num_queries(1):  # a deferred field, read on use
        assert loaded[0].attributes == stored


@pytest.mark.parametrize(
    "queryset",
    [
        lambda: Notification.objects.select_related("kind"),
        lambda: Notification.objects.prefetch_related("state_changes"),
        lambda: Recipient.objects.annotate(sends=Count("notifications")),
        lambda: Recipient.objects.only("user_id"),
        lambda: Recipient.objects.defer("attributes"),
        lambda: Recipient.objects.extra(select={"shout": "upper(user_id)"}),
        lambda: Recipient.objects.get(user_id="u-ar-1").notifications.all(),
    ],
)
def test_load_all_refuses_a_queryset_whose_extras_it_would_drop(queryset):
    with pytest.raises(ValueError, match="load_all reads a plain queryset"):
        instances.load_all(queryset())


@pytest.mark.parametrize(("unread", "named"), [(("atributes",), "['atributes']"), (("id",), "[]")])
def test_load_all_refuses_an_unread_name_it_cannot_leave_unread(unread, named):
    with pytest.raises(ValueError, match=rf"Recipient cannot leave {re.escape(named)} or its primary key unread"):
        instances.load_all(Recipient.objects.all(), unread)
