"""schemathesis over the whole /api/v1 OpenAPI schema against a real daphne: the target is 0 answers 5xx.

    bin/bench schemathesis_api [--max-examples 25] [--max-time 900] [--seed 1]

bin/bench gives it a throwaway PostgreSQL and Redis with the demo data. This script issues an API
key and an inbox token, starts daphne as deploy/Procfile does (with an access log) on a free port,
and runs ``schemathesis run`` on every operation, valid and invalid inputs alike (``--mode all``),
bounded by ``--max-examples`` per operation and ``--max-time`` for the whole run. Each security
scheme of the schema gets its credential (``apiKey``: the key; ``inboxToken``: Layla's inbox
token), and the inbox operations are pinned to her user id, so they reach their real logic instead
of stopping at 403. The figures come from
daphne's access log, so they count every request whoever decided it: requests, answers by status
class, and each 5xx with its request line. Exit status 0 only when no answer was a 5xx.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from backend.bench.harness import answers_healthz

ROOT = Path(__file__).resolve().parent.parent.parent
# daphne's access log: 127.0.0.1:51234 - - [30/Nov/2026:16:00:00] "POST /api/v1/notifications" 400 123
ACCESS_LINE = re.compile(r'"(?P<request>[A-Z]+ [^"]*)" (?P<status>\d{3}) ')


INBOX_USER = "u-ar-1"  # Layla, from the demo data
# The inbox token must outlive the run; daphne reads this, the token is only signed here.
INBOX_TOKEN_TTL = "7200"


def write_config(path: Path) -> None:
    """schemathesis.toml: a credential per security scheme, the inbox pinned to the token's user."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    import django

    django.setup()
    from backend.notifications.models import ApiClient
    from inbox import tokens

    key = ApiClient.issue("schemathesis")[1]
    path.write_text(
        f'[auth.openapi.apiKey]\nbearer = "{key}"\n\n'
        f'[auth.openapi.inboxToken]\nbearer = "{tokens.issue(INBOX_USER).value}"\n\n'
        f'[[operations]]\ninclude-path-regex = "/inbox"\nparameters = {{ user_id = "{INBOX_USER}" }}\n'
    )


def start_daphne(access_log: Path) -> tuple[subprocess.Popen, str]:
    """daphne with the Procfile's flags on a free loopback port; its base URL once /healthz answers."""
    from backend.stubs.smtp_sink import free_port

    port = free_port()
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "--proxy-headers"]
    argv += ["--http-timeout", "60", "--application-close-timeout", "10", "--access-log", str(access_log)]
    env = {**os.environ, "NOTIFY_INBOX_TOKEN_TTL": INBOX_TOKEN_TTL}
    daphne = subprocess.Popen([*argv, "backend.asgi:application"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    if answers_healthz(daphne, url):
        return daphne, url
    daphne.kill()
    raise SystemExit("daphne did not start")


def run_schemathesis(url: str, config: Path, args: argparse.Namespace) -> int:
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(config),
        "run",
        f"{url}/api/v1/openapi.json",
        "--checks",
        "not_a_server_error",
        "--mode",
        "all",
        "--max-examples",
        str(args.max_examples),
        "--max-time",
        str(args.max_time),
        "--seed",
        str(args.seed),
        "--workers",
        "1",
        "--no-color",
        "--continue-on-failure",
    ]
    # Run in the throwaway folder: schemathesis keeps a cache (.schemathesis/) in its working directory.
    return subprocess.run(command, cwd=config.parent).returncode


def summarize(access_log: Path) -> tuple[Counter, list[str]]:
    """Answers by status class ("2xx", …) and the request line of each 5xx."""
    classes: Counter = Counter()
    errors = []
    for line in access_log.read_text(errors="replace").splitlines():
        match = ACCESS_LINE.search(line)
        if match is None or "/healthz" in match["request"]:
            continue
        classes[match["status"][0] + "xx"] += 1
        if match["status"].startswith("5"):
            errors.append(f"{match['status']} {match['request']}")
    return classes, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=25, help="examples per operation and phase (default 25)")
    parser.add_argument("--max-time", type=int, default=900, help="seconds for the whole run (default 900)")
    parser.add_argument("--seed", type=int, default=1, help="hypothesis seed, for a repeatable run (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        config, access_log = Path(folder) / "schemathesis.toml", Path(folder) / "access.log"
        write_config(config)
        daphne, url = start_daphne(access_log)
        try:
            status = run_schemathesis(url, config, args)
        finally:
            daphne.terminate()
            daphne.wait(10)
        classes, errors = summarize(access_log)
    total = sum(classes.values())
    print(f"\nschemathesis_api: {total} requests to daphne; " + ", ".join(f"{c} {classes[c]}" for c in sorted(classes)))
    for line in errors:
        print(f"  5xx: {line}")
    print(f"5xx answers: {len(errors)} (schemathesis exit status {status})")
    sys.exit(1 if errors or status else 0)


if __name__ == "__main__":
    main()
