from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from backend.notifications.models import Recipient
from inbox import tokens


class Command(BaseCommand):
    help = "Print the signed link of a user's inbox page (valid NOTIFY_INBOX_LINK_TTL seconds, default 7 days)."

    def add_arguments(self, parser):
        parser.add_argument("user_id")
        parser.add_argument(
            "--base-url", default=None, help="Where the product is served; default NOTIFY_PUBLIC_URL, as mail links."
        )

    def handle(self, user_id: str, base_url: str | None, **options):
        if not Recipient.objects.filter(user_id=user_id).exists():
            raise CommandError(f"No user with id {user_id!r}: create it with PUT /api/v1/users/{{user_id}}.")
        base_url = base_url or settings.NOTIFY["PUBLIC_URL"]
        self.stdout.write(f"{base_url.rstrip('/')}/inbox/{tokens.page_link(user_id)}/")
