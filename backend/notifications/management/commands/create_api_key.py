from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from backend.notifications.models import ApiClient, Kind
from backend.notifications.models.client import MAX_RATE, NAME_RULE


class Command(BaseCommand):
    help = "Create an API client and print its key (the last line of output). The key is shown once."

    def add_arguments(self, parser):
        parser.add_argument("name", help="The calling service's name, e.g. orders.")
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="Replace the key of an existing client, which keeps its notifications.",
        )
        parser.add_argument(
            "--kinds",
            help="Comma-separated kinds a new client may send (e.g. shipped,promo); left out: every kind.",
        )
        parser.add_argument(
            "--rate", type=int, help="Notifications a second a new client may submit; left out: NOTIFY_API_CLIENT_RATE."
        )
        parser.add_argument(
            "--may-erase",
            action="store_true",
            help="A new client may erase users (DELETE /api/v1/users/{id}): for the erasure-request service only.",
        )

    def handle(self, name: str, rotate: bool, kinds: str | None, rate: int | None, may_erase: bool, **options):
        try:
            NAME_RULE(name)
        except ValidationError as exc:
            raise CommandError(f"{name!r}: {' '.join(exc.messages)}") from exc
        if rotate and (kinds is not None or rate is not None or may_erase):
            raise CommandError(
                "--kinds, --rate and --may-erase are for a new client; change an existing one in the admin."
            )
        if rate is not None and not 1 <= rate <= MAX_RATE:
            raise CommandError(f"--rate {rate}: give notifications a second, from 1 to {MAX_RATE:,}.")
        allowed = self._kinds(kinds)
        existing = ApiClient.objects.filter(name=name).first()
        if existing and not rotate:
            raise CommandError(f"A client named {name!r} exists; pass --rotate to replace its key.")
        if rotate and not existing:
            raise CommandError(f"No client is named {name!r}: nothing to rotate (leave out --rotate to create it).")
        # Rotating keeps the client: deleting it would detach its notifications from it (a write of every
        # one) and give the service a new idempotency scope, so retries sent across the rotation made duplicates.
        try:
            with transaction.atomic():
                client, key = (existing, existing.rotate_key()) if existing else ApiClient.issue(name)
                if not existing:
                    self._limit(client, allowed, rate, may_erase)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        if not client.is_active:
            # Revoked after a leak, say: the new key waits until someone turns the client on again.
            self.stdout.write(f"{client.name} is revoked: this key is refused until the client is active again.")
        self.stdout.write(f"API key for {client.name} (store it now, it is not kept):")
        self.stdout.write(key)

    @staticmethod
    def _kinds(names: str | None) -> list[Kind] | None:
        """The kinds ``--kinds`` names (None when left out); ``CommandError`` naming any that does not exist."""
        if names is None:
            return None
        wanted = [name.strip() for name in names.split(",") if name.strip()]
        found = {kind.name: kind for kind in Kind.objects.filter(name__in=wanted)}
        unknown = [name for name in wanted if name not in found]
        if unknown or not wanted:
            raise CommandError(f"--kinds: no kind is named {', '.join(unknown) or repr(names)}.")
        return [found[name] for name in wanted]

    @staticmethod
    def _limit(client: ApiClient, kinds: list[Kind] | None, rate: int | None, may_erase: bool) -> None:
        if kinds is not None:
            client.every_kind = False
            client.allowed_kinds.set(kinds)
        client.rate_limit, client.may_erase = rate, may_erase
        client.save(update_fields=["every_kind", "rate_limit", "may_erase"])
