"""Every render is bounded in memory and time; staff previews also run in a worker process with a timeout.

Outside testing found ``{{ 'A' * 10**9 }}`` took daphne to ~4 GB for ~12 s and
nested ``range`` loops would hold it for minutes: each template below used to
build gigabytes or spin, and is now refused before doing the work.
"""

import time

import pytest

from backend.notifications import rendering, sandbox
from backend.notifications.models import TemplateVersion
from backend.notifications.rendering import RenderError
from frontend.editor import preview, worker

TOO_LONG = "would make {:,} characters or items, over 100,000"
BITS = "template error: the template makes a number of more than 4,096 bits"
STEPS = "template error: the template runs more than 50,000 loop iterations and calls"


@pytest.fixture(autouse=True)
def stopped_clock(monkeypatch):
    """The render's clock stands still: which bound a test meets must not depend on the machine's load."""
    monkeypatch.setattr(sandbox, "_clock", lambda: 0.0)


def render_text(source: str, **params) -> str:
    return rendering.render(TemplateVersion(language="en", text_body=source), params).text


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ 'A' * 10**9 }}", "template error: a repetition with * " + TOO_LONG.format(10**9)),
        ("{{ 10**9 * [1] }}", "template error: a repetition with * " + TOO_LONG.format(10**9)),
        ("{{ big * 2 }}", "template error: a repetition with * " + TOO_LONG.format(200_000)),
        ("{{ big + big }}", "template error: a concatenation with + " + TOO_LONG.format(200_000)),
        ("{{ big ~ 'x' }}", "template error: a concatenation with ~ " + TOO_LONG.format(100_001)),
        ("{{ 10 ** (10 ** 10) }}", BITS),
        ("{{ (2 ** 4000) * (2 ** 4000) }}", BITS),
        ("{% for i in range(10**9) %}x{% endfor %}", "template error: range() of 10,000 numbers at most"),
        ("{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}", STEPS),
        ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}", STEPS),
        ("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "template error: recursive loops are not allowed"),
        ("{{ 'a'|center(10**9) }}", "template error: a padding width " + TOO_LONG.format(10**9)),
        ("{{ 'a'.ljust(10**9) }}", "template error: a padding width " + TOO_LONG.format(10**9)),
        ("{{ '{:>1000000000}'.format(1) }}", "template error: a format width " + TOO_LONG.format(10**9)),
        ("{{ '{:{w}}'.format(1, w=10**9) }}", "template error: a format width " + TOO_LONG.format(10**9)),
        # A computed width is the argument's text: a string or a float of digits is a width too.
        ("{{ '{:{}}'.format('a', '1000000000') }}", "template error: a format width " + TOO_LONG.format(10**9)),
        (
            "{{ '{a:{w}}'.format_map({'a': 'x', 'w': '>1000000000'}) }}",
            "template error: a format width " + TOO_LONG.format(10**9),
        ),
        ("{{ '{:{}}'.format('a', 1e9) }}", "template error: a format width " + TOO_LONG.format(10**9)),
        # The value printed again and again by one format, or a list of many references to one long string.
        ("{{ ('{0}' * 2000).format(big) }}", "template error: a format " + TOO_LONG.format(200_006_000)),
        ("{{ ('%(a)s' * 2000) % {'a': big} }}", "template error: a format " + TOO_LONG.format(200_010_000)),
        ("{{ ('%s' * 2000)|format(big) }}", "template error: a format " + TOO_LONG.format(200_004_000)),
        ("{{ ('{0:90000}' * 900).format('x') }}", "template error: a format " + TOO_LONG.format(81_008_100)),
        ("{{ ('%(a)90000s' * 900) % {'a': 'x'} }}", "template error: a format " + TOO_LONG.format(81_009_000)),
        (
            "{{ ([big] * 100000)|string }}",
            "template error: the template makes a list or object of more than 5,000,000 characters",
        ),
        ("{{ '%1000000000d' % 1 }}", "template error: a format width " + TOO_LONG.format(10**9)),
        ("{{ '%*d' % (10**9, 1) }}", "template error: a format width " + TOO_LONG.format(10**9)),
        ("{{ '%1000000000d'|format(1) }}", "template error: a format width " + TOO_LONG.format(10**9)),
        ("{{ range(10000)|join(big) }}", "template error: a join " + TOO_LONG.format(999_910_000)),
        ("{{ big.join(['a', 'b', 'c']) }}", "template error: a join " + TOO_LONG.format(200_003)),
        ("{{ big|replace('a', 'bb') }}", "template error: a replace " + TOO_LONG.format(200_000)),
        ("{{ 'x\\ny'|indent(big) }}", "template error: an indent " + TOO_LONG.format(200_003)),
        ("{{ big|wordwrap(1, wrapstring='--') }}", "template error: a wordwrap " + TOO_LONG.format(300_000)),
        ("{{ [big, big]|sum(start='') }}", "template error: a sum " + TOO_LONG.format(200_000)),
        ("{{ [1]|batch(10**9, 0)|list }}", "template error: a batch or slice count " + TOO_LONG.format(10**9)),
        (
            "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
            "template error: a concatenation with ~ " + TOO_LONG.format(131_072),
        ),
        (
            "{% set x %}{% for i in range(100) %}{{ big }}{% endfor %}{% endset %}",
            "template error: the template builds more than 5,000,000 characters in all",
        ),
        (
            "{% for i in range(10000) %}{{ 'x' * 11 }}{% endfor %}",
            "template error: the rendered text has more than 100,000 characters",
        ),
        ("{% set l = [1] %}{{ l.extend(l) }}", "template error: SecurityError: access to attribute 'extend'"),
    ],
)
def test_a_template_that_would_exhaust_the_process_is_refused(source, message):
    with pytest.raises(RenderError) as exc:
        render_text(source, big="a" * 100_000)
    assert str(exc.value).startswith(message)
    assert not exc.value.caused_by_params


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ '-' * 3 }} {{ 2 ** 64 }} {{ ([0] * 2)|join }}|{{ 'a' + 'b' }}", "--- 18446744073709551616 00|ab"),
        ("{% for i in range(3) %}{{ i }}{% endfor %} {{ items|join(', ') }}", "012 x, y"),
        ("{{ '%05.1f'|format(2.5) }} {{ '{:>4}'.format(7) }} {{ 'ab'|center(4) }}", "002.5    7  ab "),
        ("{% for i in range(10000) %}{% endfor %}{{ ('a' * 100000)|length }}", "100000"),
        ("{{ 'A' ~ order ~ '!' }}", "AA1!"),
        (
            "{{ items|join(d='+') }} {{ people|join(', ', attribute='name') }} {{ [1, 2]|sum(start=10) }}",
            "x+y Ali, Mona 13",
        ),
        ("{{ people|map(attribute='name')|join('/') }} {{ (people|map(attribute='age')|sum) }}", "Ali/Mona 70"),
    ],
)
def test_ordinary_templates_stay_inside_the_bounds(source, expected):
    people = [{"name": "Ali", "age": 30}, {"name": "Mona", "age": 40}]
    assert render_text(source, items=["x", "y"], order="A1", people=people) == expected


def test_a_render_past_its_time_stops_at_the_next_step(monkeypatch):
    ticks = iter(range(1000))
    monkeypatch.setattr(sandbox, "_clock", lambda: next(ticks) * 0.1)  # each look at the clock: 0.1 s later
    with pytest.raises(RenderError, match=r"^template error: the template took longer than 1 s$"):
        render_text("{% for i in range(100) %}{{ i }}{% endfor %}")


def test_a_bound_does_not_leak_into_the_next_render():
    with pytest.raises(RenderError):
        render_text("{% for i in range(10000) %}{% for j in range(10) %}{% endfor %}{% endfor %}")
    assert render_text("{% for i in range(10000) %}{% endfor %}done") == "done"


# --- the preview worker ---------------------------------------------------------------------------------------------


def test_the_worker_answers_what_the_call_returns_or_raises():
    assert worker.run(len, "abc") == 3
    with pytest.raises(ValueError, match="invalid literal for int"):
        worker.run(int, "x")
    [failed] = worker.run(preview.render_fields, "en", "sms", "", "{{ nobody }}", "", [{}])
    assert failed.missing == ["nobody"]  # a RenderError crosses the process whole


def test_a_call_past_the_timeout_is_stopped_and_the_worker_replaced():
    worker.run(len, "")
    before = worker._worker.process
    with pytest.raises(worker.PreviewTimeout, match=r"^the preview took longer than 0.2 s and was stopped$"):
        worker.run(time.sleep, 30, timeout=0.2)
    assert not before.is_alive()
    assert worker.run(len, "ab") == 2
    assert worker._worker.process.pid != before.pid


def test_a_render_cannot_take_more_memory_than_the_limit():
    with pytest.raises(MemoryError):
        worker.run(bytearray, 2**30)  # 1 GiB, over the 256 MiB limit
    assert worker.run(len, "still here") == 10
