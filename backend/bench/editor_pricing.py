"""Server time of the template editor's live pricing round trip (DESIGN.md §8: ≤ 50 ms).

Run by ``bin/bench editor_pricing`` (throwaway PostgreSQL + Redis, demo data),
or from the repository root against a migrated database that has the demo
data (``python manage.py demo_data``)::

    python -m backend.bench.editor_pricing [--calls 300]

Each call is what the editor sends 300 ms after the author stops typing: an
HTMX ``POST /templates/preview/`` of the whole form, as the demo ``editor``,
with a text that differs from the previous call's (a keystroke: nothing cached),
through Django's whole request path in this process (session and permission
lookups, CSRF, the form, three sandboxed renders — example params, worst case,
encoding flip —, four encodings, pricing for every provider of the country,
and the panel partial with its out-of-band parts). The time is taken around
the call: no network, no server process. The login session is made inside a
transaction that is rolled back at the end.
"""

import os
import time

from backend.bench.harness import client_benchmark_main, nearest_rank

COUNTRY = "SA"
TARGET_MS = 50.0
WARM_UP = 20
_TAIL = "{{ order }}"
_FILL = 1000 - len(_TAIL)  # the template is 1,000 characters
TEXTS = {
    # Arabic with Latin order numbers: UCS-2, every letter a (merged) mark in the highlighted copy.
    "mixed Arabic + Latin": ("طلبك رقم 5012 في الطريق إليك. Order 5012 (Nike Air) is on its way. " * 20)[:_FILL]
    + _TAIL,
    # GSM-7 with extension characters ([ ] €): escapes fall on part boundaries.
    "pure GSM-7": ("Order shipped [ref A-17], total 49€; track it at example.com/t/5012. " * 20)[:_FILL] + _TAIL,
    # Pasted from a word processor: ~250 look-alikes, each one a fix button in the highlighted copy.
    "smart punctuation": ("“Hi” – it’s on its way… " * 50)[:_FILL] + _TAIL,
}


def measure(client, text: str, calls: int) -> tuple[list[float], str]:
    """Milliseconds of each of ``calls`` POSTs after a warm-up, and the last answer's HTML."""
    form = {"kind": "shipped", "language": "en", "channel": "sms", "text_body": text, "country": COUNTRY,
            "audience": "100000"}  # fmt: skip
    timings = []
    for index in range(WARM_UP + calls):
        # A new text each call, as each keystroke is: the sandbox compiles it afresh (its cache never hits).
        form["text_body"] = f"{index:04d}{text[4:]}"
        started = time.perf_counter()
        response = client.post("/templates/preview/", form, HTTP_HX_REQUEST="true")
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200 or b'id="sms-segments"' not in response.content:
            raise SystemExit(f"unexpected answer {response.status_code}: {response.content[:300]!r}")
        if index >= WARM_UP:
            timings.append(elapsed)
    return sorted(timings), response.content.decode()


def _figure(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    return html[html.index(">", start) + 1 : html.index("<", start)]


def run(calls: int) -> bool:
    """Measure every text, print the table; True when every p95 meets the target."""
    from django.contrib.auth.models import User
    from django.db import connection, transaction
    from django.test import Client

    editor = User.objects.filter(username="editor").first()
    if editor is None:
        raise SystemExit("No demo data: run `python manage.py demo_data` first.")
    print(f"$ python -m backend.bench.editor_pricing --calls {calls}   (database: {connection.vendor})")
    print(f"HTMX POST /templates/preview/, 1,000-character SMS template, priced for {COUNTRY}; {calls} calls each")
    print(f"{'text':<22} {'encoding':<8} {'segments':>8} {'worst':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    ok = True
    with transaction.atomic():
        client = Client()
        client.force_login(editor)
        for name, text in TEXTS.items():
            timings, html = measure(client, text, calls)
            p50, p95, p99 = (nearest_rank(timings, q) for q in (50, 95, 99))
            ok = ok and p95 <= TARGET_MS
            encoding, segments = _figure(html, "sms-encoding"), _figure(html, "sms-segments")
            worst = _figure(html, "sms-worst-segments")
            print(f"{name:<22} {encoding:<8} {segments:>8} {worst:>6} {p50:>8.2f} {p95:>8.2f} {p99:>8.2f}")
        transaction.set_rollback(True)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    verdict = "met" if ok else "MISSED"
    print(f"target: p95 ≤ {TARGET_MS:.0f} ms — {verdict}   (load average {load} on {os.cpu_count()} CPUs)")
    return ok


def main() -> None:
    client_benchmark_main(run, __doc__.splitlines()[0], default_calls=300)


if __name__ == "__main__":
    main()
