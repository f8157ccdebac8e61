"""The demo's API key, the same on every start: kept in a file beside the demo's database."""

import os
import secrets
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from backend.notifications.models import ApiClient
from backend.notifications.models.client import KEY_PREFIX, NAME_RULE, hash_api_key


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600), replacing what was there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text + "\n")


class Command(BaseCommand):
    help = (
        "Print the demo client's API key (the last line): the key kept in --file while it still authenticates, "
        "else a new one, which is then kept there. Only bin/demo needs this: a real key is shown once (create_api_key)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--file", required=True, help="Where the key is kept between starts (mode 0600).")
        parser.add_argument("--name", default="demo", help="The client's name (default: demo).")

    def handle(self, file: str, name: str, **options):
        try:
            NAME_RULE(name)
        except ValidationError as exc:
            raise CommandError(f"--name {name!r}: {' '.join(exc.messages)}") from exc
        path = Path(file)
        kept = path.read_text().strip() if path.exists() else ""
        if kept and ApiClient.objects.filter(name=name, key_hash=hash_api_key(kept), is_active=True).exists():
            # The demo's client may try every endpoint, erasure included (README "Erasure").
            ApiClient.objects.filter(name=name).update(may_erase=True)
            self.stdout.write(kept)
            return
        # The same client row gets the new key: the notifications it sent stay its own (GET answers them).
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        ApiClient.objects.update_or_create(
            name=name,
            defaults={"key_hash": hash_api_key(key), "key_hint": key[:10], "is_active": True, "may_erase": True},
        )
        _write_private(path, key)
        self.stdout.write(key)
