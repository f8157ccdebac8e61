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
            "--days",
            type=int,
            help=f"Keep this many days instead of NOTIFY_RETENTION_DAYS (1 to {retention.MAX_DAYS}); runs even "
            "when NOTIFY_RETENTION_DAYS is 0.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Count what would go; change nothing.")

    def handle(self, days: int | None, dry_run: bool, **options):
        if days is not None and not 1 <= days <= retention.MAX_DAYS:
            raise CommandError(
                f"--days {days}: keep 1 to {retention.MAX_DAYS} days (NOTIFY_RETENTION_DAYS=0 turns retention off)."
            )
        days = settings.NOTIFY["RETENTION_DAYS"] if days is None else days
        report = retention.purge(days=days, dry_run=dry_run, pause=0)
        if report is None:
            self.stdout.write("NOTIFY_RETENTION_DAYS is 0: every notification is kept (pass --days to purge once).")
            return
        frozen = ", ".join(map(str, report.frozen_campaigns)) or "none"
        self.stdout.write(
            f"{'would delete' if dry_run else 'deleted'} {counted(report.deleted, 'notification')} that ended before "
            f"{report.cutoff:%Y-%m-%d %H:%M} UTC (kept {counted(days, 'day')}); campaigns "
            f"{'to freeze' if dry_run else 'frozen'}: {frozen}; {counted(report.slices, 'slice')} in "
            f"{report.seconds:.1f} s."
        )
        if report.skipped_slices:
            self.stderr.write(
                f"{counted(report.skipped_slices, 'slice')} skipped on a lock (logged): the next run takes them."
            )


def counted(n: int, noun: str) -> str:
    """``1 day``, ``2 days``, ``1,000 notifications``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
