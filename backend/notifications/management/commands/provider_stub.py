import json

from aiohttp import web
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from backend.stubs.provider_server import StubState, make_app


class Command(BaseCommand):
    help = "Run the local stub SMS/push providers (Twilio, Vonage, FCM, Web Push APIs) with fault injection."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8025)
        parser.add_argument(
            "--faults", help="A JSON file of faults per provider (see backend/stubs/provider_server.py)."
        )
        parser.add_argument(
            "--receipt-delay", type=float, default=settings.NOTIFY["STUB_RECEIPT_DELAY"],
            help="Seconds after a message until its delivery receipts are posted.",
        )  # fmt: skip
        parser.add_argument(
            "--receipt-outcome", default=settings.NOTIFY["STUB_RECEIPT_OUTCOME"],
            help="What the receipts say: delivered, undelivered, undelivered:<code> or none.",
        )  # fmt: skip

    def handle(self, host: str, port: int, faults: str | None, receipt_delay: float, receipt_outcome: str, **options):
        if receipt_outcome.partition(":")[0] not in ("delivered", "undelivered", "none"):
            raise CommandError(
                f"--receipt-outcome {receipt_outcome!r}: use delivered, undelivered, undelivered:<code> or none."
            )
        state = StubState()
        state.receipts = {"delay": receipt_delay, "outcome": receipt_outcome}
        if faults:
            with open(faults) as handle:
                state.faults = json.load(handle)
        control = "/_stub/messages, /_stub/faults, /_stub/receipts"
        self.stdout.write(f"Stub providers on http://{host}:{port} (control: {control})")
        web.run_app(make_app(state), host=host, port=port, print=None, access_log=None, backlog=1024)
