import json
from datetime import timedelta

from django.contrib import admin, messages
from django.contrib.admin import widgets
from django.contrib.admin.options import IncorrectLookupParameters
from django.db import IntegrityError, models, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from backend.notifications import actions, aggregates, masking
from backend.notifications.api import caller_rate
from backend.notifications.models import (
    ApiClient,
    Attempt,
    BreakerEvent,
    DeadLetter,
    Device,
    Erasure,
    Kind,
    Notification,
    Preference,
    Recipient,
    StaffContact,
    StateChange,
    TemplateEvent,
    TemplateVersion,
    VelocityAlarm,
)


class ReadOnly:
    """Records are shown, never added, changed or deleted here, not even by a superuser.

    Every change goes through ``actions`` (their rules: two-person approval,
    the state machine), which the admin must never bypass. Admin actions that
    call an action (dead-letter replay) stay, under their own permission.
    """

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class DeletableWhileUnused:
    """A record is deleted from its own page only, and only while ``in_use`` says nothing has it.

    Django's confirmation page lists every row that PROTECTs the record or would go with it; for a
    record in use that is a load of each (two queries apiece) to end in a refusal or a loss. The
    list's bulk delete never shows: it asks with no record to check.
    """

    def has_delete_permission(self, request, obj=None) -> bool:
        return obj is not None and super().has_delete_permission(request, obj) and not self.in_use(obj)

    def in_use(self, obj) -> bool:
        raise NotImplementedError


class UniqueRaceAnswered:
    """A save that loses a race for a unique value answers with the form's error, not a 500.

    The form checks uniqueness before it saves, so two people adding the client ``orders`` at once
    both pass the check and the second INSERT hits the UNIQUE (its transaction, which Django's
    ``changeform_view`` opens, is rolled back). The page is then built once more from the same POST:
    the other row is committed by then (PostgreSQL made the INSERT wait for it), so the form's check
    finds it and says so on the field, and nothing typed is lost.
    """

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except IntegrityError as exc:
            if request.method != "POST" or not _unique_violation(exc):
                raise
            return super().changeform_view(request, object_id, form_url, extra_context)


def _unique_violation(exc: IntegrityError) -> bool:
    """Whether ``exc`` is a UNIQUE refusing a duplicate (SQLSTATE 23505; SQLite's own message), not another rule."""
    cause = exc.__cause__
    return getattr(cause, "sqlstate", None) == "23505" or str(exc).startswith("UNIQUE constraint failed")


# What Django's own list filters (after a field's name) and date hierarchy put in a change list's URL.
_FILTER_SUFFIXES = ("", "__exact", "__isnull", "__isempty", "__id__exact", "__gte", "__lt")
_DATE_SUFFIXES = ("__year", "__month", "__day")


class AutoDirection:
    """Text in the admin reads in its own direction: an Arabic name right to left in an English page.

    Text inputs and text areas get ``dir="auto"`` (the direction of their first strong character);
    read-only values and list cells the same through CSS (``unicode-bidi: plaintext``).
    """

    formfield_overrides = {
        models.CharField: {"widget": widgets.AdminTextInputWidget(attrs={"dir": "auto"})},
        models.TextField: {"widget": widgets.AdminTextareaWidget(attrs={"dir": "auto"})},
    }

    class Media:
        css = {"all": ["frontend/admin-direction.css"]}


class ListedFiltersOnly(AutoDirection):
    """The change list filters as its ``list_filter`` and ``date_hierarchy`` do, nothing else (400).

    Every model admin of the project uses it, so each also reads text in its own direction (``AutoDirection``).

    Django lets a URL filter on any field of the model itself (``?body__contains=4829``): the count
    it answers reads a secret field (an in-app OTP's body, a pending notification's params) one
    guess at a time, though the page never shows it; and ``?created_at__year=99999`` was a 500.
    """

    def lookup_allowed(self, lookup: str, value: str, request) -> bool:
        fields = [item if isinstance(item, str) else item[0] for item in self.list_filter if not isinstance(item, type)]
        allowed = {field + suffix for field in fields for suffix in _FILTER_SUFFIXES}
        if self.date_hierarchy:
            allowed |= {self.date_hierarchy + suffix for suffix in _FILTER_SUFFIXES + _DATE_SUFFIXES}
        # A filter class of our own (CreatedWithin) reads its own parameter and checks its value.
        allowed |= {item.parameter_name for item in self.list_filter if isinstance(item, type)}
        return lookup in allowed and super().lookup_allowed(lookup, value, request)


class CreatedWithin(admin.SimpleListFilter):
    """A change list of a history table shows a window of it: the last hour, day (the default) or week, or all.

    Such a list sorts its rows by time and counts them, which over the whole history (90 days, millions
    of rows) read and sorted every row at each page: 0.9 s at 1,000,000 notifications. A window is
    found through a BRIN index on ``field`` (notifications migrations 0021 and 0028, inbox 0003), so
    a page costs what that window holds. "Any time" reads everything, when someone asks for it; the support
    explorer (``/support/``) finds one notification by its indexed keys at any age.
    """

    title = "created"
    parameter_name = "within"
    field = "created_at"
    DEFAULT = "day"
    WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7), "all": None}

    def lookups(self, request, model_admin):
        return [("hour", "Last hour"), ("day", "Last 24 hours"), ("week", "Last 7 days"), ("all", "Any time")]

    def choices(self, changelist):
        current = self.value() or self.DEFAULT
        for lookup, title in self.lookup_choices:
            query = changelist.get_query_string({self.parameter_name: lookup})
            yield {"selected": current == lookup, "query_string": query, "display": title}

    def queryset(self, request, queryset):
        value = self.value() or self.DEFAULT
        if value not in self.WINDOWS:
            raise IncorrectLookupParameters(f"{self.parameter_name}={value!r} is not one of {', '.join(self.WINDOWS)}.")
        window = self.WINDOWS[value]
        return queryset if window is None else queryset.filter(**{f"{self.field}__gte": timezone.now() - window})


class StartedWithin(CreatedWithin):
    """``CreatedWithin`` for attempts, by the time their provider call started."""

    title = "started"
    field = "started_at"


class ProviderFilter(admin.SimpleListFilter):
    """Attempts by provider, one choice per configured provider: Django's own filter read every attempt for them."""

    title = "provider"
    parameter_name = "provider"

    def lookups(self, request, model_admin):
        return [(name, name) for name in aggregates.configured_providers()]

    def queryset(self, request, queryset):
        return queryset.filter(provider=self.value()) if self.value() else queryset


@admin.register(Kind)
class KindAdmin(UniqueRaceAnswered, DeletableWhileUnused, ListedFiltersOnly, admin.ModelAdmin):
    """Kinds; one may be deleted only while no template, campaign, notification or preference has it.

    The first three PROTECT it (for a kind with 180,000 notifications the confirmation page loaded
    180,000 rows, two queries each); preferences would go with it (CASCADE), and a kind made again
    under that name would find a person's opt-out gone.
    """

    list_display = ["name", "category", "priority", "channels", "opt_out_allowed", "over_limit", "validity_seconds"]
    list_filter = ["category", "priority", "opt_out_allowed"]
    search_fields = ["name", "description"]

    def in_use(self, obj: Kind) -> bool:
        """Templates and campaigns first, both indexed by kind.

        A notification is rendered from a template of its kind, so the notification table, which has no
        index on kind (each delivery would pay for one twice), is read only for a kind with neither.
        """
        from campaigns.models import Campaign

        return (
            TemplateVersion.objects.filter(kind=obj).exists()
            or Campaign.objects.filter(kind=obj).exists()
            or Notification.objects.filter(kind=obj).exists()
            or Preference.objects.filter(kind=obj).exists()
        )


@admin.register(TemplateVersion)
class TemplateVersionAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    """Versions and their approvals, read-only: the editor page saves drafts and approves what it shows."""

    list_display = ["kind", "language", "channel", "version", "status", "created_by", "approved_by", "approved_at",
                    "editor_link"]  # fmt: skip
    list_filter = ["status", "channel", "language", "kind"]
    search_fields = ["subject", "text_body"]
    list_select_related = ["kind", "created_by", "approved_by"]
    fields = ["kind", "language", "channel", "version", "status", "subject", "text_body", "html_body",
              "content_hash", "created_by", "created_at", "approved_by", "approved_at", "editor_link"]  # fmt: skip
    readonly_fields = fields

    @admin.display(description="Editor")
    def editor_link(self, version: TemplateVersion) -> str:
        label = "review and approve" if version.status == TemplateVersion.Status.DRAFT else "open"
        return format_html('<a href="{}">{}</a>', reverse("frontend:template-version", args=[version.pk]), label)


class PreferenceInline(ReadOnly, AutoDirection, admin.TabularInline):
    """A person's choices, with who made each: they change through ``actions.set_preference`` only.

    Editable here they bypassed its rules: a security kind switched off, a channel the kind is not sent
    on, the digest; and nobody recorded who (``changed_by``), so support told a user they had done it.
    """

    model = Preference
    extra = 0
    fields = ["kind", "channel", "enabled", "updated_at", "changed_by"]
    readonly_fields = fields


class ContactsMasked:
    """Contact data (email, phone, push tokens) masked for staff who are not superusers, and searched for whole only.

    The support explorer shows contact data masked and reveals a value only through an audited button
    (``support.reveal_contact``, a ``ContactReveal`` row); the admin audits nothing, so it shows no
    more than the explorer does, and a prefix search (``+9665``) cannot spell a number out digit by
    digit. ``masked`` maps each contact field to the method showing it masked, in lists and forms;
    ``searched_whole`` names the search fields matched whole (Django's ``=``: case-insensitive, exact).
    """

    masked: dict[str, str] = {}
    searched_whole: tuple[str, ...] = ()

    def get_list_display(self, request):
        shown = super().get_list_display(request)
        return shown if request.user.is_superuser else [self.masked.get(f, f) for f in shown]

    def get_search_fields(self, request):
        fields = super().get_search_fields(request)
        return fields if request.user.is_superuser else [f"={f}" if f in self.searched_whole else f for f in fields]

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        return fields if request.user.is_superuser else [self.masked.get(f, f) for f in fields]

    def get_readonly_fields(self, request, obj=None):
        readonly = list(super().get_readonly_fields(request, obj))
        return readonly if request.user.is_superuser else [*readonly, *self.masked.values()]


class DeviceInline(ContactsMasked, AutoDirection, admin.TabularInline):
    model = Device
    extra = 0
    fields = ["platform", "token", "last_seen_at", "disabled_at", "disabled_reason"]
    readonly_fields = ["last_seen_at", "disabled_at", "disabled_reason"]
    masked = {"token": "masked_token"}

    @admin.display(description="token")
    def masked_token(self, device: Device) -> str:
        return masking.mask_push_token(device.platform, device.token)


@admin.register(Recipient)
class RecipientAdmin(ContactsMasked, UniqueRaceAnswered, ListedFiltersOnly, admin.ModelAdmin):
    inlines = [DeviceInline, PreferenceInline]
    list_display = ["user_id", "email", "phone", "language", "time_zone", "email_bounced_at", "phone_disabled_at"]
    list_filter = ["language"]
    search_fields = ["user_id", "email", "phone"]
    masked = {"email": "masked_email", "phone": "masked_phone"}
    searched_whole = ("email", "phone")

    @admin.display(description="email")
    def masked_email(self, recipient: Recipient) -> str:
        return masking.mask_email(recipient.email)

    @admin.display(description="phone")
    def masked_phone(self, recipient: Recipient) -> str:
        return masking.mask_phone(recipient.phone)

    def has_delete_permission(self, request, obj=None) -> bool:
        """Never here: erasing a person is ``DELETE /api/v1/users/{id}`` (``erasure.py``), which takes their
        notifications with them and records that it happened; a delete here did neither."""
        return False


class StateChangeInline(ReadOnly, admin.TabularInline):
    model = StateChange
    extra = 0
    readonly_fields = ["from_state", "to_state", "reason", "at"]


class AttemptInline(ReadOnly, admin.TabularInline):
    model = Attempt
    extra = 0
    readonly_fields = ["number", "provider", "started_at", "latency_ms", "result", "error", "provider_ref"]


@admin.register(Notification)
class NotificationAdmin(ContactsMasked, ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    list_display = [
        "created_at",
        "recipient",
        "kind",
        "channel",
        "priority",
        "state",
        "reason",
        "attempt_count",
        "preview",
    ]
    list_filter = [CreatedWithin, "state", "channel", "priority", "kind"]
    show_full_result_count = False  # "3 of 1,000,000 total" counted every notification
    search_fields = [
        "=id",
        "idempotency_key",
        "recipient__user_id",
        "recipient__email",
        "recipient__phone",
        "provider_ref",
    ]
    list_select_related = ["recipient", "kind"]
    searched_whole = ("recipient__email", "recipient__phone")
    inlines = [StateChangeInline, AttemptInline]
    # Params only through masked_params: secret ones (OTP codes) are never shown (masking.py).
    exclude = ["params"]
    readonly_fields = [f.name if f.name != "params" else "masked_params" for f in Notification._meta.fields]

    @admin.display(description="params")
    def masked_params(self, obj: Notification) -> str:
        """The params as sent, each secret one shown as ••••••."""
        return json.dumps(masking.masked_params(obj.kind, obj.params), ensure_ascii=False)


@admin.register(Attempt)
class AttemptAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    list_display = ["notification", "number", "provider", "started_at", "latency_ms", "result", "provider_ref"]
    list_filter = [StartedWithin, ProviderFilter, "result"]
    search_fields = ["provider_ref", "notification__id"]
    readonly_fields = [f.name for f in Attempt._meta.fields]
    ordering = ["-started_at"]
    show_full_result_count = False  # "3 of 1,000,000 total" counted every attempt


@admin.register(DeadLetter)
class DeadLetterAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    """Dead letters: notifications whose retries ran out. Replay one or many (never past validity)."""

    list_display = ["created_at", "notification", "provider", "attempts", "last_error", "replayed_at", "replayed_by"]
    list_filter = ["provider", ("replayed_at", admin.EmptyFieldListFilter), "notification__kind"]
    search_fields = ["notification__id", "notification__recipient__user_id", "last_error"]
    list_select_related = ["notification__kind", "notification__recipient"]
    readonly_fields = [f.name for f in DeadLetter._meta.fields]
    actions = ["replay_selected"]

    def has_replay_permission(self, request) -> bool:
        # The demo's support role holds change_deadletter for this (the record itself stays read-only).
        return request.user.has_perm("notifications.change_deadletter")

    @admin.action(description="Replay selected dead letters", permissions=["replay"])
    def replay_selected(self, request, queryset):
        outcomes: dict[str, int] = {}
        for letter in queryset.select_related("notification__kind"):
            outcome = actions.replay(letter, by=request.user.get_username())
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        self.message_user(request, ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())))


@admin.register(BreakerEvent)
class BreakerEventAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    list_display = ["at", "provider", "from_state", "to_state", "reason"]
    list_filter = ["provider", "to_state"]
    readonly_fields = [f.name for f in BreakerEvent._meta.fields]


@admin.register(ApiClient)
class ApiClientAdmin(UniqueRaceAnswered, DeletableWhileUnused, ListedFiltersOnly, admin.ModelAdmin):
    """API clients: a new one's key is shown once; one that sent anything is revoked (``is_active``), not deleted.

    Deleting a client detaches its notifications (a write of each) and a client of the same name made
    again has another idempotency scope, so the service's retries would be accepted twice. A client
    with no notification (a mistake) may be deleted.
    """

    list_display = ["name", "key_hint", "is_active", "kinds", "rate", "created_at", "last_used_at"]
    list_filter = ["is_active"]
    search_fields = ["name"]
    fields = [
        "name", "is_active", "reads_all_notifications", "every_kind", "allowed_kinds", "rate_limit",
        "may_erase", "key_hint", "created_at", "last_used_at",
    ]  # fmt: skip
    readonly_fields = ["key_hint", "created_at", "last_used_at"]
    filter_horizontal = ["allowed_kinds"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("allowed_kinds")

    @admin.display(description="may send")
    def kinds(self, obj: ApiClient) -> str:
        if obj.every_kind:
            return "every kind"
        return ", ".join(sorted(kind.name for kind in obj.allowed_kinds.all())) or "nothing"

    @admin.display(description="notifications a second")
    def rate(self, obj: ApiClient) -> str:
        rate, _ = caller_rate.rate_of(obj)
        return f"{rate:,.0f}" if obj.rate_limit else f"{rate:,.0f} (default)"

    def save_model(self, request, obj, form, change):
        key = None if change else obj.set_new_key()
        super().save_model(request, obj, form, change)
        if key:
            # Once committed: a save rolled back after this (and tried again) never shows a key that is not stored.
            message = f"API key for {obj.name} (shown once, copy it now): {key}"
            transaction.on_commit(lambda: messages.warning(request, message))

    def in_use(self, obj: ApiClient) -> bool:
        return Notification.objects.filter(client=obj).exists()


@admin.register(VelocityAlarm)
class VelocityAlarmAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    """OTP SMS bursts to one country: look for SMS pumping (bots requesting codes to premium numbers)."""

    list_display = ["at", "country", "count", "threshold"]
    list_filter = ["country"]
    readonly_fields = [f.name for f in VelocityAlarm._meta.fields]


@admin.register(Erasure)
class ErasureAdmin(ReadOnly, admin.ModelAdmin):
    """Users erased on request (``DELETE /api/v1/users/{id}``): when, by whom and what went, never who.

    Search by a user id: it is compared by its digest (``Erasure.digest_of``), which is all the table keeps.
    """

    list_display = ["at", "requested_by", "notifications", "devices", "preferences", "inbox_messages",
                    "segment_memberships"]  # fmt: skip
    readonly_fields = [f.name for f in Erasure._meta.fields]
    search_fields = ["=user_id_digest"]
    search_help_text = "A user id: was it erased?"

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        return (queryset.filter(user_id_digest=Erasure.digest_of(term)), False) if term else (queryset, False)


@admin.register(StaffContact)
class StaffContactAdmin(ListedFiltersOnly, admin.ModelAdmin):
    """A staff member's own phone and inbox for "Send a test to me" (their email is the user's): set by an admin."""

    list_display = ["user", "phone", "inbox_user_id"]
    search_fields = ["user__username", "phone", "inbox_user_id"]
    list_select_related = ["user"]


@admin.register(TemplateEvent)
class TemplateEventAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    """The audit of template actions: saves, approvals, reviews with their comments, tests sent to self."""

    list_display = ["at", "actor_name", "action", "version"]
    list_filter = ["action"]
    search_fields = ["actor_name", "comment"]
    list_select_related = ["version__kind"]
    readonly_fields = [f.name for f in TemplateEvent._meta.fields]
