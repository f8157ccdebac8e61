from django.contrib import admin

from inbox.models import InboxMessage


@admin.register(InboxMessage)
class InboxMessageAdmin(admin.ModelAdmin):
    """Read-only for support ("did it reach the inbox? was it read?"); changes go through inbox.actions."""

    list_display = ["id", "recipient", "kind", "title", "created_at", "read_at", "archived_at"]
    list_filter = ["kind"]
    search_fields = ["recipient__user_id", "title"]
    list_select_related = ["recipient"]
    readonly_fields = [field.name for field in InboxMessage._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
