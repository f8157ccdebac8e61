import json

from aiohttp import web
from django.core.management.base import BaseCommand

from backend.stubs.provider_server import StubState, make_app


class Command(BaseCommand):
    help = "Run the local stub SMS/push providers (Twilio, Vonage, FCM, Web Push APIs) with fault injection."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8025)
        parser.add_argument(
            "--faults", help="A JSON file of faults per provider (see backend/stubs/provider_server.py)."
        )

    def handle(self, host: str, port: int, faults: str | None, **options):
        state = StubState()
        if faults:
            with open(faults) as handle:
                state.faults = json.load(handle)
        self.stdout.write(f"Stub providers on http://{host}:{port} (control: /_stub/messages, /_stub/faults)")
        web.run_app(make_app(state), host=host, port=port, print=None, access_log=None, backlog=1024)
