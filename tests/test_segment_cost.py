"""What a segment filter may cost: a budget of tests before it runs, a time bound while it counts.

The attack these guard against: 100 rows of ``country in "VI, BS"`` (regions on +1, each one
a run of regular expressions) made the live preview and every load of the segment list run
past the proxy's 60 s. The budget refuses such a filter at the row that crosses it; the time
bound turns a count that runs too long into a message instead of a 503.
"""

import re
import sqlite3
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.db.utils import ConnectionHandler

from backend.notifications.models import Recipient
from campaigns import actions, audience, preflight, segment_query
from campaigns.models import Segment
from campaigns.segment_query import MAX_TESTS, CountTimeout, DefinitionError, deadline_handler, time_bound
from tests.campaigns_setup import draft

pytestmark = pytest.mark.django_db

SLOW = "pg_sleep(1) IS NOT NULL"  # a second per recipient: any count of the demo users runs past 0.1 s


def countries(*values: str, rows: int = 1) -> dict:
    return {"all": [{"field": "country", "op": "in", "value": list(values)} for _ in range(rows)]}


# --- the budget -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "refused_at"),
    [
        (countries("SA"), None),  # one prefix test
        (countries("US", "CA"), None),  # 1 + 8 regular expressions
        (countries(*[r for r in ("US", "AG", "AI", "AS", "BB", "BM", "BS", "CA", "DM", "DO", "GD", "GU", "JM",
                                 "KN", "KY", "LC", "MP", "MS", "PR", "SX", "TC", "TT", "VC", "VG", "VI")]), None),
         # every region of +1 in one row: 1 + 2 + … + 25 = 325
        (countries("VI", "BS", rows=12), None),  # 12 × (25 + 7) = 384
        (countries("VI", "BS", rows=13), "all[12]"),  # 416: the thirteenth row crosses 400
        (countries("VI", "BS", rows=100), "all[12]"),  # the attack
        (countries("VI", rows=16), None),  # 400: the budget exactly
        (countries("VI", rows=17), "all[16]"),
        ({"all": [{"any": [countries("VI", rows=16), countries("VI")]}]}, "all[0].any[1].all[0]"),  # nested
        (countries("SA", "AE", "QA", "KW", rows=100), None),  # 400 prefix tests
        ({"all": [{"field": "language", "op": "in", "value": ["ar"] * 1000}] * 100}, None),  # one IN list a row
    ],
)  # fmt: skip
def test_a_filter_is_refused_at_the_row_that_takes_it_past_the_budget(document, refused_at):
    if refused_at is None:
        validate = segment_query.validate_definition(document)
        assert validate.mode in ("all", "any")
        return
    with pytest.raises(DefinitionError) as refused:
        segment_query.validate_definition(document)
    assert refused.value.path == refused_at
    assert f"over {MAX_TESTS}" in refused.value.problem and "Remove rows or values" in refused.value.problem


@pytest.mark.parametrize(
    ("field", "op", "value", "tests"),
    [
        ("country", "eq", "SA", 1),
        ("country", "eq", "US", 1),
        ("country", "eq", "CA", 8),
        ("country", "eq", "VI", 25),
        ("country", "in", ["VI", "BS"], 32),
        ("country", "eq", "KZ", 2),  # +7: RU, then KZ
        ("country", "eq", "JE", 4),  # +44: GB, GG, IM, JE
        ("language", "in", ["ar", "fa", "en"], 1),
        ("has_address", "eq", "push", 1),
        ("attributes.orders", "between", [3, 10], 2),
        ("attributes.plan", "in", ["gold", "silver"], 1),
    ],
)
def test_the_tests_a_condition_costs(field, op, value, tests):
    definition = segment_query.validate_definition({"all": [{"field": field, "op": op, "value": value}]})
    assert segment_query.tests(definition.items[0]) == tests


def test_a_too_costly_filter_is_refused_on_its_row_in_the_live_preview(client, marketer):
    client.force_login(marketer)
    body = {"name": "", "field": ["country"] * 100, "key": [""] * 100, "op": ["in"] * 100, "value": ["VI, BS"] * 100}
    response = client.post("/campaigns/segments/preview", body, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    errors = dict(re.findall(r'id="seg-row-error-(\d+)"[^>]*>([^<]*)</p>', html))
    assert errors["12"] == (
        "This filter is too costly to count: this row adds 32 tests per recipient and takes it to 416, over 400 "
        "(a country sharing a calling code, such as +1, costs one test per region tried before it). "
        "Remove rows or values."
    )
    assert {row for row, error in errors.items() if error} == {"12"}


# --- the time bound -------------------------------------------------------------------------------------------------


def _statement_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return cursor.fetchone()[0]


def test_postgresql_stops_a_count_past_its_time_and_restores_the_setting():
    with transaction.atomic():  # as in submit: the bound is a savepoint inside the caller's transaction
        before = _statement_timeout()
        with pytest.raises(CountTimeout) as stopped, time_bound(0.1), connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(5)")
        assert str(stopped.value) == (
            "Could not count the recipients in 0.1 s: simplify the filter (fewer rows or values)."
        )
        assert _statement_timeout() == before
        with time_bound(0.1):
            assert _statement_timeout() == "100ms"
            assert Recipient.objects.count() == 0  # a query runs under it
        assert _statement_timeout() == before


def test_other_database_errors_pass_through_the_bound():
    with pytest.raises(Exception) as failed, time_bound(1), connection.cursor() as cursor:
        cursor.execute("SELECT 1 / 0")
    assert not isinstance(failed.value, CountTimeout)


@pytest.mark.parametrize(("now", "deadline", "answer"), [(9.0, 10.0, 0), (10.0, 10.0, 0), (10.5, 10.0, 1)])
def test_the_sqlite_progress_handler_aborts_once_past_the_deadline(now, deadline, answer):
    assert deadline_handler(deadline, clock=lambda: now)() == answer


def test_sqlite_stops_a_runaway_count_with_a_clear_error():
    """The default embedded database: the progress handler interrupts the statement (a count that never ends)."""
    sqlite = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}})["default"]
    forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n"
    try:
        with pytest.raises(CountTimeout), time_bound(0.0, using=sqlite), sqlite.cursor() as cursor:
            cursor.execute(forever)
        with sqlite.cursor() as cursor:  # the handler is gone: the connection counts again
            cursor.execute("SELECT COUNT(*) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                           "WHERE i < 100000) SELECT i FROM n)")  # fmt: skip
            assert cursor.fetchone() == (100000,)
    finally:
        sqlite.close()


def test_a_raw_sqlite_connection_is_interrupted_by_the_handler():
    raw = sqlite3.connect(":memory:")
    raw.set_progress_handler(deadline_handler(0.0, clock=lambda: 1.0), 1000)
    with pytest.raises(sqlite3.OperationalError, match=r"^interrupted$"):
        raw.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n")
    raw.close()


@pytest.fixture
def slow_filter(settings, monkeypatch):
    """A filter segment whose query takes a second per recipient, bounded at 0.1 s."""
    segment = email_filter()
    slow_down(settings, monkeypatch)
    return segment


def email_filter() -> Segment:
    definition = {"all": [{"field": "has_address", "value": "email"}]}
    return Segment.objects.create(name="Slow", kind=Segment.Kind.FILTER, definition=definition)


def slow_down(settings, monkeypatch) -> None:
    """Every filter's query takes a second per recipient from now on, and counts are bounded at 0.1 s."""
    settings.NOTIFY = {**settings.NOTIFY, "SEGMENT_COUNT_TIMEOUT": 0.1}
    monkeypatch.setattr(segment_query, "recipients", lambda definition: Recipient.objects.extra(where=[SLOW]))
    monkeypatch.setattr(segment_query, "count", lambda definition: Recipient.objects.extra(where=[SLOW]).count())


def test_submit_refuses_a_segment_that_cannot_be_counted_in_time(marketer, slow_filter):
    campaign = draft(marketer, segment=slow_filter)
    with pytest.raises(actions.CampaignRefused) as refused:
        actions.submit(campaign, marketer)
    assert str(refused.value) == (
        "Segment 'Slow': Could not count the recipients in 0.1 s: simplify the filter (fewer rows or values)."
    )


def test_the_preflight_of_a_segment_that_cannot_be_counted_in_time_is_unavailable(marketer, slow_filter):
    campaign = draft(marketer, segment=slow_filter)
    with pytest.raises(audience.AudienceUnavailable, match=r"^Segment 'Slow': Could not count the recipients in 0.1 s"):
        preflight.preflight(campaign, datetime(2026, 12, 1, 9, tzinfo=UTC))


def test_the_live_preview_says_a_count_ran_out_of_time(client, marketer, slow_filter):
    client.force_login(marketer)
    body = {"name": "", "field": ["has_address"], "key": [""], "op": ["eq"], "value": ["email"]}
    partial = client.post("/campaigns/segments/preview", body, HTTP_HX_REQUEST="true")
    assert partial.status_code == 200  # HTMX swaps only a 2xx in
    assert '<p class="tpl-error" role="alert" id="seg-count">Could not count the recipients in 0.1 s' in (
        partial.content.decode()
    )
    page = client.post("/campaigns/segments/preview", body)
    assert page.status_code == 422
    assert "Could not count the recipients in 0.1 s: simplify the filter" in page.content.decode()


def test_a_filter_size_in_the_list_says_it_ran_out_of_time(client, approver, slow_filter):
    client.force_login(approver)
    response = client.get(f"/campaigns/segments/{slow_filter.pk}/size")
    assert response.status_code == 200
    assert "Could not count the recipients in 0.1 s: simplify the filter" in response.content.decode()


def test_a_list_segment_is_not_bounded(marketer, settings, monkeypatch):
    """A list's cost is its size, capped at upload: a big list must not be refused at submit for taking long."""
    settings.NOTIFY = {**settings.NOTIFY, "SEGMENT_COUNT_TIMEOUT": 0.1}
    bounds = []
    monkeypatch.setattr(segment_query, "time_bound", lambda: bounds.append("bounded"))
    campaign = actions.submit(draft(marketer), marketer)
    assert (campaign.state, campaign.preflight["audience"], bounds) == ("submitted", 3, [])


def test_approving_a_filter_that_cannot_be_counted_in_time_says_why(client, marketer, approver, settings, monkeypatch):
    """Approve recounts the audience for the content hash: a count past its time is a 422 on the review page."""
    campaign = actions.submit(draft(marketer, segment=email_filter()), marketer)
    slow_down(settings, monkeypatch)  # the filter counted in time at submit, no longer
    client.force_login(approver)
    response = client.post(
        f"/campaigns/{campaign.pk}/review", {"decision": "approve", "content_hash": campaign.content_hash}
    )
    assert response.status_code == 422
    assert "Segment &#x27;Slow&#x27;: Could not count the recipients in 0.1 s" in response.content.decode()
    campaign.refresh_from_db()
    assert campaign.state == "submitted"
