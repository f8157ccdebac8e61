from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from backend.notifications import retention


class Command(BaseCommand):
    help = (
        "Delete the notifications that ended more than NOTIFY_RETENTION_DAYS days ago, with their history, once "
        "(the scheduler does it every NOTIFY_RETENTION_INTERVAL seconds); freeze the figures of campaigns that "
        "ended before then first."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--days", type=int, help="Keep this many days instead of NOTIFY_RETENTION_DAYS (at least 1)."
        )
        parser.add_argument("--dry-run", action="store_true", help="Count what would go; change nothing.")

    def handle(self, days: int | None, dry_run: bool, **options):
        if days is not None and days < 1:
            raise CommandError(f"--days {days}: keep at least 1 day (NOTIFY_RETENTION_DAYS=0 turns retention off).")
        days = settings.NOTIFY["RETENTION_DAYS"] if days is None else days
        report = retention.purge(days=days, dry_run=dry_run, pause=0)
        if report is None:
            self.stdout.write("NOTIFY_RETENTION_DAYS is 0: every notification is kept.")
            return
        verb = "would delete" if dry_run else "deleted"
        frozen = ", ".join(map(str, report.frozen_campaigns)) or "none"
        self.stdout.write(
            f"{verb} {report.deleted} notifications that ended before {report.cutoff:%Y-%m-%d %H:%M} UTC "
            f"({days} days); campaigns {'to freeze' if dry_run else 'frozen'}: {frozen}; "
            f"{report.slices} slices in {report.seconds:.1f} s."
        )
