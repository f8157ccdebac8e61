from django.contrib import admin, messages

from backend.notifications.models import ApiClient, Attempt, Kind, Notification, Recipient, StateChange, TemplateVersion


@admin.register(Kind)
class KindAdmin(admin.ModelAdmin):
    list_display = ["name", "category", "priority", "default_channel", "default_language"]
    list_filter = ["category", "priority", "default_channel"]
    search_fields = ["name", "description"]


@admin.register(TemplateVersion)
class TemplateVersionAdmin(admin.ModelAdmin):
    list_display = ["kind", "language", "channel", "version", "status", "subject", "approved_at"]
    list_filter = ["status", "channel", "language", "kind"]
    search_fields = ["subject", "text_body"]


@admin.register(Recipient)
class RecipientAdmin(admin.ModelAdmin):
    list_display = ["user_id", "email", "phone", "language", "time_zone", "updated_at"]
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
    readonly_fields = [f.name for f in Notification._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = ["notification", "number", "provider", "started_at", "latency_ms", "result", "provider_ref"]
    list_filter = ["provider", "result"]
    search_fields = ["provider_ref", "notification__id"]
    readonly_fields = [
        "notification",
        "number",
        "provider",
        "started_at",
        "latency_ms",
        "result",
        "error",
        "provider_ref",
    ]


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
