from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from backend.stubs.providers_file import stub_providers_toml

# The demo's budgets: small enough that the drill shows the token bucket and the high-tier reserve at work.
SMS_BUDGET = {"rate": 50, "burst": 50, "high_share": 0.3, "concurrency": 20}


class Command(BaseCommand):
    help = "Write a providers file (TOML) that points every SMS and push provider at the local stub."
    # It writes the file the system checks read (notify.E003): it must run before the file exists.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--stub-url", default="http://127.0.0.1:8025")
        parser.add_argument("--out", required=True, help="Where to write the file.")
        parser.add_argument(
            "--callback-base",
            default=settings.NOTIFY["WEBHOOK_BASE_URL"] or settings.NOTIFY["PUBLIC_URL"],
            help="This service's URL as the stub reaches it: the SMS providers post delivery receipts there.",
        )

    def handle(self, stub_url: str, out: str, callback_base: str, **options):
        path = Path(out)
        text = stub_providers_toml(
            stub_url.rstrip("/"), timeout=3.0, callback_base=callback_base, twilio=SMS_BUDGET, vonage=SMS_BUDGET,
            fcm={"rate": 100, "concurrency": 20},
        )  # fmt: skip
        path.write_text("# Written by `manage.py demo_providers`: every provider on the local stub.\n" + text)
        self.stdout.write(f"Providers file written to {path}.")
