from django.contrib import admin
from django.db.models import OuterRef, Subquery

from backend.notifications import masking
from backend.notifications.admin import CreatedWithin, ListedFiltersOnly
from backend.notifications.models import Kind
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
    list_select_related = ["recipient", "notification"]
    fields = [
        "recipient", "notification", "kind", "language", "shown_title", "shown_body", "link",
        "created_at", "read_at", "archived_at",
    ]  # fmt: skip
    readonly_fields = fields

    def get_queryset(self, request):
        # The message's kind by its stored name: retention sets ``notification`` NULL after 90 days, and the
        # message must stay masked without it. One subquery, not a query per row of the list.
        declared = Kind.objects.filter(name=OuterRef("kind")).values("params")[:1]
        return super().get_queryset(request).annotate(kind_params=Subquery(declared))

    @staticmethod
    def _secret(obj: InboxMessage) -> bool:
        """Its kind declares a secret param, or its kind is gone and nobody can tell (then masked too)."""
        params = getattr(obj, "kind_params", None)
        return params is None or any(spec.get("secret") is True for spec in params.values())

    @admin.display(description="title")
    def shown_title(self, obj: InboxMessage) -> str:
        if not self._secret(obj):
            return obj.title
        return obj.notification.preview if obj.notification is not None else masking.MASK

    @admin.display(description="body")
    def shown_body(self, obj: InboxMessage) -> str:
        return masking.MASK if self._secret(obj) else obj.body

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
