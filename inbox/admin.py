from django.contrib import admin

from backend.notifications import masking
from backend.notifications.admin import CreatedWithin, ListedFiltersOnly
from inbox.models import InboxMessage


@admin.register(InboxMessage)
class InboxMessageAdmin(ListedFiltersOnly, admin.ModelAdmin):
    """Read-only for support ("did it reach the inbox? was it read?"); changes go through inbox.actions.

    The message of a kind with secret params (an OTP sent in-app) is the code itself: staff see
    the notification's masked preview instead of its title and body (masking.py).
    """

    list_display = ["id", "recipient", "kind", "shown_title", "created_at", "read_at", "archived_at"]
    list_filter = [CreatedWithin, "kind"]
    show_full_result_count = False  # messages are never purged: "3 of N total" counted all of them
    search_fields = ["recipient__user_id"]
    list_select_related = ["recipient", "notification__kind"]
    fields = [
        "recipient", "notification", "kind", "language", "shown_title", "shown_body", "link",
        "created_at", "read_at", "archived_at",
    ]  # fmt: skip
    readonly_fields = fields

    @staticmethod
    def _secret(obj: InboxMessage) -> bool:
        return obj.notification is not None and bool(masking.secret_names(obj.notification.kind))

    @admin.display(description="title")
    def shown_title(self, obj: InboxMessage) -> str:
        return obj.notification.preview if self._secret(obj) else obj.title

    @admin.display(description="body")
    def shown_body(self, obj: InboxMessage) -> str:
        return masking.MASK if self._secret(obj) else obj.body

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
