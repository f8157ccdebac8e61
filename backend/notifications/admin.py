import json

from django.contrib import admin, messages

from backend.notifications import actions, masking
from backend.notifications.models import (
    ApiClient,
    Attempt,
    BreakerEvent,
    DeadLetter,
    Device,
    Kind,
    Notification,
    Preference,
    Recipient,
    StateChange,
    TemplateVersion,
    VelocityAlarm,
)
from backend.notifications.rendering import sanitize_html


@admin.register(Kind)
class KindAdmin(admin.ModelAdmin):
    list_display = ["name", "category", "priority", "channels", "opt_out_allowed", "over_limit", "validity_seconds"]
    list_filter = ["category", "priority", "opt_out_allowed"]
    search_fields = ["name", "description"]


@admin.register(TemplateVersion)
class TemplateVersionAdmin(admin.ModelAdmin):
    """Drafts are edited; approved versions are frozen ("Save as new" makes the next draft)."""

    list_display = ["kind", "language", "channel", "version", "status", "created_by", "approved_by", "approved_at"]
    list_filter = ["status", "channel", "language", "kind"]
    search_fields = ["subject", "text_body"]
    fields = ["kind", "language", "channel", "subject", "text_body", "html_body", "version", "status",
              "created_by", "approved_by", "approved_at"]  # fmt: skip
    readonly_fields = ["version", "status", "created_by", "approved_by", "approved_at"]
    save_as = True
    actions = ["approve_selected"]

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.status == TemplateVersion.Status.APPROVED and "_saveasnew" not in request.POST:
            return False
        return super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        if change:  # a draft: approved versions are read-only above
            obj.html_body = sanitize_html(obj.html_body)
            super().save_model(request, obj, form, change)
            return
        saved = actions.save_template_draft(
            obj.kind, obj.language, obj.channel, request.user,
            subject=obj.subject, text_body=obj.text_body, html_body=obj.html_body,
        )  # fmt: skip
        obj.pk, obj.version, obj.status, obj.created_by = saved.pk, saved.version, saved.status, saved.created_by
        obj.html_body = saved.html_body

    @admin.action(description="Approve selected drafts (not your own)")
    def approve_selected(self, request, queryset):
        for version in queryset:
            try:
                actions.approve_template(version, request.user)
            except actions.ApprovalRefused as exc:
                self.message_user(request, str(exc), level=messages.ERROR)
            else:
                self.message_user(request, f"{version} approved.")


class DeviceInline(admin.TabularInline):
    model = Device
    extra = 0
    fields = ["platform", "token", "last_seen_at", "disabled_at", "disabled_reason"]
    readonly_fields = ["last_seen_at", "disabled_at", "disabled_reason"]


class PreferenceInline(admin.TabularInline):
    model = Preference
    extra = 0
    fields = ["kind", "channel", "enabled", "updated_at"]
    readonly_fields = ["updated_at"]


@admin.register(Recipient)
class RecipientAdmin(admin.ModelAdmin):
    inlines = [DeviceInline, PreferenceInline]
    list_display = ["user_id", "email", "phone", "language", "time_zone", "email_bounced_at", "phone_disabled_at"]
    list_filter = ["language"]
    search_fields = ["user_id", "email", "phone"]


class StateChangeInline(admin.TabularInline):
    model = StateChange
    extra = 0
    can_delete = False
    readonly_fields = ["from_state", "to_state", "reason", "at"]

    def has_add_permission(self, request, obj=None):
        return False


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    readonly_fields = ["number", "provider", "started_at", "latency_ms", "result", "error", "provider_ref"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
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
    list_filter = ["state", "channel", "priority", "kind"]
    search_fields = [
        "=id",
        "idempotency_key",
        "recipient__user_id",
        "recipient__email",
        "recipient__phone",
        "provider_ref",
    ]
    list_select_related = ["recipient", "kind"]
    date_hierarchy = "created_at"
    inlines = [StateChangeInline, AttemptInline]
    # Params only through masked_params: secret ones (OTP codes) are never shown (masking.py).
    exclude = ["params"]
    readonly_fields = [f.name if f.name != "params" else "masked_params" for f in Notification._meta.fields]

    def has_add_permission(self, request):
        return False

    @admin.display(description="params")
    def masked_params(self, obj: Notification) -> str:
        """The params as sent, each secret one shown as ••••••."""
        return json.dumps(masking.masked_params(obj.kind, obj.params), ensure_ascii=False)


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = ["notification", "number", "provider", "started_at", "latency_ms", "result", "provider_ref"]
    list_filter = ["provider", "result"]
    search_fields = ["provider_ref", "notification__id"]
    readonly_fields = [f.name for f in Attempt._meta.fields]


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    """Dead letters: notifications whose retries ran out. Replay one or many (never past validity)."""

    list_display = ["created_at", "notification", "provider", "attempts", "last_error", "replayed_at", "replayed_by"]
    list_filter = ["provider", ("replayed_at", admin.EmptyFieldListFilter), "notification__kind"]
    search_fields = ["notification__id", "notification__recipient__user_id", "last_error"]
    list_select_related = ["notification__kind", "notification__recipient"]
    readonly_fields = [f.name for f in DeadLetter._meta.fields]
    actions = ["replay_selected"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Replay selected dead letters", permissions=["change"])
    def replay_selected(self, request, queryset):
        outcomes: dict[str, int] = {}
        for letter in queryset.select_related("notification__kind"):
            outcome = actions.replay(letter, by=request.user.get_username())
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        self.message_user(request, ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())))


@admin.register(BreakerEvent)
class BreakerEventAdmin(admin.ModelAdmin):
    list_display = ["at", "provider", "from_state", "to_state", "reason"]
    list_filter = ["provider", "to_state"]
    readonly_fields = [f.name for f in BreakerEvent._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(ApiClient)
class ApiClientAdmin(admin.ModelAdmin):
    list_display = ["name", "key_hint", "is_active", "created_at", "last_used_at"]
    list_filter = ["is_active"]
    search_fields = ["name"]
    fields = ["name", "is_active", "key_hint", "created_at", "last_used_at"]
    readonly_fields = ["key_hint", "created_at", "last_used_at"]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        client, key = ApiClient.issue(obj.name)
        obj.pk, obj.key_hash, obj.key_hint = client.pk, client.key_hash, client.key_hint
        messages.warning(request, f"API key for {client.name} (shown once, copy it now): {key}")


@admin.register(VelocityAlarm)
class VelocityAlarmAdmin(admin.ModelAdmin):
    """OTP SMS bursts to one country: look for SMS pumping (bots requesting codes to premium numbers)."""

    list_display = ["at", "country", "count", "threshold"]
    list_filter = ["country"]
    readonly_fields = [f.name for f in VelocityAlarm._meta.fields]

    def has_add_permission(self, request):
        return False
