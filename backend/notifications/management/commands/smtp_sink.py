import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from backend.stubs.smtp_sink import SinkRules, start_sink


class Command(BaseCommand):
    help = "Run a local SMTP sink that keeps every mail as an .eml file (the demo's mail server)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=settings.EMAIL_PORT)
        parser.add_argument("--dir", default=str(settings.DATA_DIR / "mail"), help="Folder for the .eml files.")
        parser.add_argument(
            "--never-answer-domain",
            action="append",
            default=[],
            help="Stall RCPT TO for addresses at this domain for an hour: a mailbox that never answers (drill).",
        )

    def handle(self, host: str, port: int, dir: str, never_answer_domain: list[str], **options):
        rules = SinkRules(delays={f"@{domain.lower()}": 3600.0 for domain in never_answer_domain})
        controller = start_sink(dir, host=host, port=port, rules=rules)
        self.stdout.write(f"SMTP sink on {host}:{controller.port}, mail kept in {dir}", ending="\n")
        self.stdout.flush()
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
        finally:
            controller.stop()
