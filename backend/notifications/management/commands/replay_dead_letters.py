from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from backend.notifications import actions
from backend.notifications.models import DeadLetter


class Command(BaseCommand):
    help = (
        "Replay dead letters: one by id, or every open one matching the filters. A notification past its "
        "validity window is expired instead, never sent late."
    )

    def add_arguments(self, parser):
        parser.add_argument("--id", type=int, action="append", dest="ids", help="A dead letter id (repeatable).")
        parser.add_argument("--kind", help="Only notifications of this kind.")
        parser.add_argument("--provider", help="Only dead letters whose last attempt went to this provider.")
        parser.add_argument("--since", help="Only dead letters created at or after this ISO 8601 instant.")
        parser.add_argument("--all", action="store_true", help="Every open dead letter (when no other filter).")
        parser.add_argument("--dry-run", action="store_true", help="List what would be replayed.")

    def handle(self, ids, kind, provider, since, all, dry_run, **options):
        letters = DeadLetter.objects.filter(replayed_at__isnull=True).select_related("notification__kind")
        if not (ids or kind or provider or since or all):
            raise CommandError("Name what to replay: --id, --kind, --provider, --since, or --all.")
        if ids:
            letters = letters.filter(pk__in=ids)
        if kind:
            letters = letters.filter(notification__kind__name=kind)
        if provider:
            letters = letters.filter(provider=provider)
        if since:
            instant = parse_datetime(since)
            if instant is None or instant.tzinfo is None:
                raise CommandError(f"--since {since!r}: give an ISO 8601 instant with an offset.")
            letters = letters.filter(created_at__gte=instant)
        outcomes: dict[str, int] = {}
        for letter in letters.order_by("created_at"):
            outcome = "would replay" if dry_run else actions.replay(letter, by="manage.py replay_dead_letters")
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            self.stdout.write(f"{letter.pk}\t{letter.notification_id}\t{letter.notification.kind.name}\t{outcome}")
        summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())) or "nothing to replay"
        self.stdout.write(summary)
