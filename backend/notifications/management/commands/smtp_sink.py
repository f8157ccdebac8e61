import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from backend.stubs.smtp_sink import start_sink


class Command(BaseCommand):
    help = "Run a local SMTP sink that keeps every mail as an .eml file (the demo's mail server)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=settings.EMAIL_PORT)
        parser.add_argument("--dir", default=str(settings.DATA_DIR / "mail"), help="Folder for the .eml files.")

    def handle(self, host: str, port: int, dir: str, **options):
        controller = start_sink(dir, host=host, port=port)
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
