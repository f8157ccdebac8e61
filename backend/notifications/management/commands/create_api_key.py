from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from backend.notifications.models import ApiClient
from backend.notifications.models.client import NAME_RULE


class Command(BaseCommand):
    help = "Create an API client and print its key (the last line of output). The key is shown once."

    def add_arguments(self, parser):
        parser.add_argument("name", help="The calling service's name, e.g. orders.")
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="Replace the key of an existing client, which keeps its notifications.",
        )

    def handle(self, name: str, rotate: bool, **options):
        try:
            NAME_RULE(name)
        except ValidationError as exc:
            raise CommandError(f"{name!r}: {' '.join(exc.messages)}") from exc
        existing = ApiClient.objects.filter(name=name).first()
        if existing and not rotate:
            raise CommandError(f"A client named {name!r} exists; pass --rotate to replace its key.")
        if rotate and not existing:
            raise CommandError(f"No client is named {name!r}: nothing to rotate (leave out --rotate to create it).")
        # Rotating keeps the client: deleting it would detach its notifications from it (a write of every
        # one) and give the service a new idempotency scope, so retries sent across the rotation made duplicates.
        try:
            client, key = (existing, existing.rotate_key()) if existing else ApiClient.issue(name)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        if not client.is_active:
            # Revoked after a leak, say: the new key waits until someone turns the client on again.
            self.stdout.write(f"{client.name} is revoked: this key is refused until the client is active again.")
        self.stdout.write(f"API key for {client.name} (store it now, it is not kept):")
        self.stdout.write(key)
