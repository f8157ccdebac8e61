from pathlib import Path

from django.core.management.base import BaseCommand

from backend.notifications.providers.webpush import generate_vapid_private_key

TEMPLATE = """\
# Written by `manage.py demo_providers` for the demo: every provider on the local stub
# (`manage.py provider_stub`). The format is documented in README.md ("Providers file").
[channels]
sms = ["twilio", "vonage"]
push = ["fcm", "webpush"]

[providers.twilio]
type = "twilio"
base_url = "{stub}"
account_sid = "ACdemo"
auth_token = "demo"
from = "+15005550006"
rate = 50
burst = 50
high_share = 0.3
concurrency = 20
timeout = 3.0

[providers.vonage]
type = "vonage"
base_url = "{stub}"
api_key = "demo"
api_secret = "demo"
from = "Notify"
rate = 50
burst = 50
high_share = 0.3
concurrency = 20
timeout = 3.0

[providers.fcm]
type = "fcm"
base_url = "{stub}"
project_id = "demo"
access_token = "demo"
rate = 100
concurrency = 20
timeout = 3.0

[providers.webpush]
type = "webpush"
vapid_private_key = "{vapid}"
vapid_subject = "mailto:ops@example.com"
timeout = 3.0
"""


class Command(BaseCommand):
    help = "Write a providers file (TOML) that points every SMS and push provider at the local stub."
    # It writes the file the system checks read (notify.E003): it must run before the file exists.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--stub-url", default="http://127.0.0.1:8025")
        parser.add_argument("--out", required=True, help="Where to write the file.")

    def handle(self, stub_url: str, out: str, **options):
        path = Path(out)
        path.write_text(TEMPLATE.format(stub=stub_url.rstrip("/"), vapid=generate_vapid_private_key()))
        self.stdout.write(f"Providers file written to {path}.")
