"""The segment pages (frontend/campaigns/): who may use them, the live count, the CSV upload, its report and save."""

import asyncio
import csv
import io
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile

from backend.body_limit import BodyLimit
from backend.notifications.actions import upsert_recipient
from backend.notifications.masking import mask_email, mask_phone
from campaigns import csv_upload, segment_query
from campaigns.models import Segment, SegmentMember
from frontend.campaigns import uploads
from tests.campaigns_setup import list_segment
from tests.processes import Processes, worker_env
from tests.test_body_limit import raw_post

pytestmark = pytest.mark.usefixtures("demo_data")

LIST = "/campaigns/segments/"
NEW = "/campaigns/segments/new"
PREVIEW = "/campaigns/segments/preview"
SAVE = "/campaigns/segments/save"
UPLOAD_FORM = "/campaigns/segments/upload/new"
UPLOAD = "/campaigns/segments/upload"
UPLOAD_SAVE = "/campaigns/segments/upload/save"
HTMX = {"HTTP_HX_REQUEST": "true"}
PAGES = [LIST, NEW, UPLOAD_FORM]


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


@pytest.fixture
def as_marketer(client, marketer):
    client.force_login(marketer)
    return client


def figure(response, element_id: str) -> str:
    """The text of the element with this id in an HTML answer."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', response.content.decode(), re.S)
    assert found, f"no #{element_id} in the answer"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def rows(*conditions: tuple[str, str, str, str], name: str = "") -> dict:
    """The filter form's body: one (field, key, op, value) per row."""
    columns = list(zip(*conditions, strict=True))
    return {"name": name, "field": columns[0], "key": columns[1], "op": columns[2], "value": columns[3]}


def upload(client, data: bytes, name: str = "VIP list"):
    return client.post(UPLOAD, {"name": name, "file": SimpleUploadedFile("vip.csv", data, "text/csv")})


# --- who may do what ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", PAGES)
def test_an_anonymous_visitor_is_sent_to_the_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={url}"


@pytest.mark.parametrize("persona", ["editor", "outsider"])
@pytest.mark.parametrize("url", PAGES)
def test_staff_without_segment_permissions_are_refused(client, request, persona, url):
    client.force_login(request.getfixturevalue(persona))
    assert client.get(url).status_code == 403


def test_an_approver_sees_the_list_but_may_not_build_or_upload(client, approver):
    client.force_login(approver)
    page = client.get(LIST)
    assert page.status_code == 200
    assert "Upload a CSV" not in page.content.decode()
    assert client.get(NEW).status_code == 403
    assert client.get(UPLOAD_FORM).status_code == 403
    assert upload(client, b"u-ar-1\n").status_code == 403
    assert client.post(SAVE, rows(("language", "", "eq", "ar"), name="x")).status_code == 403
    assert not Segment.objects.exists()


def test_the_home_page_links_the_segments_for_those_who_may_see_them(client, marketer, editor):
    client.force_login(marketer)
    assert 'href="/campaigns/segments/">Segments</a>' in client.get("/").content.decode()
    client.force_login(editor)
    assert "/campaigns/segments/" not in client.get("/").content.decode()


@pytest.mark.parametrize("url", PAGES)
def test_a_marketer_uses_every_page(as_marketer, url):
    assert as_marketer.get(url).status_code == 200


# --- the list -------------------------------------------------------------------------------------------------------


def test_the_list_shows_each_segment_with_its_size_now_newest_first(as_marketer, marketer):
    list_segment(("u-ar-1", "u-fa-1"), name="Two users")
    arabic = Segment.objects.create(
        name="Arabic speakers",
        kind=Segment.Kind.FILTER,
        definition={"all": [{"field": "language", "op": "eq", "value": "ar"}]},
        created_by=marketer,
    )
    page = as_marketer.get(LIST).content.decode()
    found = re.findall(
        r"<tr><td><bdi>([^<]+)</bdi></td><td>([^<]+)</td>\s*<td([^>]*)>(.*?)</td>\s*<td>(.*?)</td>", page
    )
    size_url = f"/campaigns/segments/{arabic.pk}/size"
    assert found == [
        ("Arabic speakers", "Filter over contact data",
         f' class="seg-number" id="seg-size-{arabic.pk}" hx-get="{size_url}" hx-trigger="revealed"',
         f'<a href="{size_url}">count</a>', "<bdi>marketer</bdi>"),
        ("Two users", "Uploaded list of users", ' class="seg-number"', "2", "—"),
    ]  # fmt: skip
    assert as_marketer.get(size_url).content.decode().strip() == "1"


def test_the_list_costs_the_same_queries_however_many_segments(as_marketer, marketer, django_assert_num_queries):
    as_marketer.get(LIST)  # warm the session and permission caches of this process
    definition = {"all": [{"field": "has_address", "value": "sms"}]}
    Segment.objects.create(name="f0", kind=Segment.Kind.FILTER, definition=definition, created_by=marketer)
    list_segment(name="l0")
    with django_assert_num_queries(5):  # session, user, 2 × permissions, segments (filters are counted later)
        as_marketer.get(LIST)
    for number in range(1, 6):
        Segment.objects.create(name=f"f{number}", kind=Segment.Kind.FILTER, definition=definition)
        list_segment(name=f"l{number}")
    with django_assert_num_queries(5):
        page = as_marketer.get(LIST).content.decode()
    assert page.count("<tr><td><bdi>") == 12


def test_the_list_never_counts_a_filter_itself(as_marketer, marketer, monkeypatch):
    """A costly filter once made every load of the list run past the proxy's 60 s; now each row counts alone."""
    definition = {"all": [{"field": "country", "op": "in", "value": ["VI", "BS"]}]}
    Segment.objects.create(name="Islands", kind=Segment.Kind.FILTER, definition=definition, created_by=marketer)

    def refuse(*args, **kwargs):
        raise AssertionError("the list counted a filter")

    monkeypatch.setattr(segment_query, "validate_definition", refuse)
    monkeypatch.setattr(segment_query, "count", refuse)
    response = as_marketer.get(LIST)
    assert response.status_code == 200
    assert "<bdi>Islands</bdi>" in response.content.decode()


def test_a_stored_filter_that_no_longer_validates_shows_as_unavailable(as_marketer):
    old = Segment.objects.create(name="Old", kind=Segment.Kind.FILTER, definition={"all": [{"field": "plan"}]})
    cell = as_marketer.get(f"/campaigns/segments/{old.pk}/size").content.decode()
    assert "unavailable</span>" in cell and "Its filter no longer validates: all[0].field: Unknown field" in cell


def test_only_a_filter_segment_has_a_size_to_count(as_marketer):
    assert as_marketer.get(f"/campaigns/segments/{list_segment().pk}/size").status_code == 404
    assert as_marketer.get("/campaigns/segments/999999/size").status_code == 404


def test_the_english_page_stays_left_to_right_for_an_arabic_staff_member(as_marketer):
    # Its lines are English: laid out right to left they read "of 20 handed over or final 20".
    page = as_marketer.get(LIST, HTTP_ACCEPT_LANGUAGE="ar").content.decode()
    assert '<html lang="en" dir="ltr">' in page


# --- a filter segment -----------------------------------------------------------------------------------------------


def test_the_live_partial_counts_and_samples_with_masked_addresses(as_marketer):
    upsert_recipient("مستخدم-١", {"language": "ar", "phone": "+966551112222", "time_zone": "Asia/Riyadh"})
    body = rows(("language", "", "in", "ar, fa"), ("has_address", "", "eq", "sms"), ("", "", "eq", ""))
    response = as_marketer.post(PREVIEW, body, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert '<p class="seg-count" id="seg-count"><strong>3</strong> recipients match now.</p>' in html
    sample = re.findall(r"<tr><td dir=\"auto\">([^<]+)</td><td>(\w+)</td><td dir=\"ltr\">([^<]*)</td>"
                        r"<td dir=\"ltr\">([^<]*)</td><td dir=\"ltr\">([^<]*)</td></tr>", html)  # fmt: skip
    assert sample == [
        ("u-ar-1", "ar", "+9665••••567", "l•••@example.com", "Asia/Riyadh"),
        ("u-fa-1", "fa", "+9891••••567", "d•••@example.com", "Asia/Tehran"),
        ("مستخدم-١", "ar", "+9665••••222", "", "Asia/Riyadh"),
    ]
    assert "+966501234567" not in html and "layla@" not in html


def test_a_bad_condition_shows_its_message_next_to_its_row(as_marketer):
    body = rows(("language", "", "eq", "ar"), ("", "", "eq", ""), ("language", "", "in", "ar, zz"))
    response = as_marketer.post(PREVIEW, body, **HTMX)
    html = response.content.decode()
    assert (
        figure(response, "seg-row-error-2")
        == "Unknown language code &#x27;zz&#x27;; use an ISO 639-1 code such as en, ar or fa."
    )
    assert '<p class="seg-row-error" id="seg-row-error-0" hx-swap-oob="true"></p>' in html
    assert 'id="seg-count">Fix the rows marked above' in html


def test_a_new_filter_asks_for_a_condition_not_for_fixes(as_marketer):
    html = as_marketer.get(NEW).content.decode()
    assert 'id="seg-count">Fill in a condition above to see who matches.' in html
    assert "Fix the rows marked above" not in html


def test_an_attribute_range_row_needs_numbers(as_marketer):
    response = as_marketer.post(PREVIEW, rows(("attribute", "orders", "between", "3, ten")), **HTMX)
    assert figure(response, "seg-row-error-0") == "&#x27;ten&#x27; is not a number."


@pytest.mark.parametrize("field", ["attribute", "language", "time_zone"])
def test_a_nul_in_a_value_is_an_error_on_its_row_not_a_500(as_marketer, field):
    response = as_marketer.post(PREVIEW, rows((field, "plan", "eq", "gold\x00")), **HTMX)
    assert response.status_code == 200
    assert figure(response, "seg-row-error-0") == "Remove the control character (a tab, a NUL…) from this row."


def test_saving_a_filter_stores_its_normalised_document(as_marketer, marketer):
    upsert_recipient("u-gold", {"language": "en", "attributes": {"plan": "gold", "orders": 4}})
    body = rows(
        ("country", "", "eq", "sa"), ("attribute", "plan", "in", 'gold, "7"'),
        ("attribute", "orders", "gte", "3"), name="Gold in Saudi Arabia",
    )  # fmt: skip
    response = as_marketer.post(SAVE, body)
    assert response.status_code == 302 and response["Location"] == LIST
    segment = Segment.objects.get()
    assert (segment.name, segment.kind, segment.created_by) == ("Gold in Saudi Arabia", "filter", marketer)
    assert segment.definition == {"all": [
        {"field": "country", "op": "eq", "value": "SA"},
        {"field": "attributes.plan", "op": "in", "value": ["gold", "7"]},
        {"field": "attributes.orders", "op": "between", "value": [3, 2**53]},
    ]}  # fmt: skip


def test_a_filter_without_a_name_or_condition_is_not_saved(as_marketer):
    response = as_marketer.post(SAVE, rows(("", "", "eq", "")))
    assert response.status_code == 400
    assert figure(response, "seg-name-error") == "Give the segment a name."
    assert figure(response, "seg-filter-error").startswith("Add at least one condition")
    assert not Segment.objects.exists()


def test_add_a_condition_gives_the_page_one_more_row(as_marketer):
    page = as_marketer.post(PREVIEW, {**rows(("language", "", "eq", "ar")), "add": "1"}).content.decode()
    assert page.count('<li class="seg-row">') == 2


# --- a CSV upload ---------------------------------------------------------------------------------------------------

CSV = "\ufeffuser_id\r\nu-ar-1\r\n\r\nu-en-1\r\nu-ar-1\r\nnobody-1\r\nمستخدم-٢\r\n".encode()


def test_the_upload_report_gives_the_figures_and_lists_unknown_ids(as_marketer):
    response = upload(as_marketer, CSV)
    assert response.status_code == 200
    figures = {name: figure(response, name) for name in ("rows-read", "duplicates", "blank-lines", "known", "unknown")}
    assert figures == {"rows-read": "5", "duplicates": "1", "blank-lines": "1", "known": "2", "unknown": "2"}
    assert re.findall(r'<li dir="auto">([^<]+)</li>', response.content.decode()) == ["nobody-1", "مستخدم-٢"]
    assert not Segment.objects.exists()  # nothing saved before "save segment"
    assert "VIP list" not in as_marketer.get(LIST).content.decode()


def test_the_unknown_ids_download_as_csv(as_marketer):
    token = re.search(r'name="token" value="([^"]+)"', upload(as_marketer, CSV).content.decode()).group(1)
    response = as_marketer.get(f"/campaigns/segments/upload/{token}/unknown.csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert b"".join(response.streaming_content).decode() == '\ufeff"user_id"\r\n"nobody-1"\r\n"مستخدم-٢"\r\n'


def test_unknown_ids_download_as_text_a_spreadsheet_does_not_run(as_marketer):
    ids = ['=HYPERLINK("http://x")', "+1-202", "-2+3", "@SUM(A1)", "plain", "a=b"]
    data = io.StringIO()
    csv.writer(data, lineterminator="\r\n").writerows([["user_id"], ["u-ar-1"], *[[i] for i in ids]])
    report = upload(as_marketer, data.getvalue().encode()).content.decode()
    token = re.search(r'name="token" value="([^"]+)"', report)
    assert token, report
    response = as_marketer.get(f"/campaigns/segments/upload/{token.group(1)}/unknown.csv")
    cells = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    assert cells == [["user_id"], *[[f"'{i}"] for i in ids[:4]], ["plain"], ["a=b"]]


def test_save_creates_exactly_the_known_members_without_the_file_again(as_marketer, marketer, data_dir):
    token = re.search(r'name="token" value="([^"]+)"', upload(as_marketer, CSV).content.decode()).group(1)
    response = as_marketer.post(UPLOAD_SAVE, {"token": token, "name": "VIP list"})
    assert response.status_code == 302 and response["Location"] == LIST
    segment = Segment.objects.get()
    assert (segment.name, segment.kind, segment.created_by, segment.definition) == ("VIP list", "list", marketer, {})
    members = SegmentMember.objects.filter(segment=segment).values_list("recipient__user_id", flat=True)
    assert sorted(members) == ["u-ar-1", "u-en-1"]
    assert list((data_dir / "segment-uploads").iterdir()) == []
    again = as_marketer.post(UPLOAD_SAVE, {"token": token, "name": "VIP list"})  # a double click
    assert again["Location"] == UPLOAD_FORM and Segment.objects.count() == 1


def test_a_claimed_upload_cannot_be_saved_twice(marketer):
    token = uploads.keep(marketer.pk, ["u-ar-1"], [])
    first = uploads.claim(marketer.pk, token)
    assert first is not None and list(uploads.read(first)) == ["u-ar-1"]
    assert uploads.claim(marketer.pk, token) is None


def test_an_upload_saves_in_batches(as_marketer, monkeypatch):
    monkeypatch.setattr("frontend.campaigns.views.INSERT_BATCH", 2)
    for number in range(5):
        upsert_recipient(f"b-{number}", {"language": "en"})
    data = "".join(f"b-{number}\n" for number in range(5)).encode()
    token = re.search(r'name="token" value="([^"]+)"', upload(as_marketer, data).content.decode()).group(1)
    as_marketer.post(UPLOAD_SAVE, {"token": token, "name": "Five"})
    assert SegmentMember.objects.filter(segment__name="Five").count() == 5


def test_nobody_else_can_save_or_download_an_upload(as_marketer, client, marketer):
    token = uploads.keep(marketer.pk + 1000, ["u-ar-1"], ["nobody"])
    assert as_marketer.post(UPLOAD_SAVE, {"token": token, "name": "Theirs"})["Location"] == UPLOAD_FORM
    assert as_marketer.get(f"/campaigns/segments/upload/{token}/unknown.csv").status_code == 404
    assert as_marketer.post(UPLOAD_SAVE, {"token": "../../etc/passwd", "name": "x"})["Location"] == UPLOAD_FORM
    assert not Segment.objects.exists()


def test_a_malformed_multipart_body_is_a_400(as_marketer):
    body = b"--b\r\nContent-Disposition: form-data; name=file; filename=x.csv\r\n\r\nu-ar-1"
    response = as_marketer.post(UPLOAD, body, content_type="multipart/form-data; boundary=b")
    assert response.status_code == 400
    assert figure(response, "seg-upload-error") == "Choose a CSV file of user ids."


def test_a_latin1_upload_is_refused_with_the_message(as_marketer):
    response = upload(as_marketer, "user_id\nu-ar-1\nJosé\n".encode("latin-1"))
    assert response.status_code == 400
    assert figure(response, "seg-upload-error") == (
        "The file is not UTF-8 (line 3, byte 18): save it as UTF-8 (CSV UTF-8 in Excel)."
    )


def test_an_upload_without_a_file_is_refused(as_marketer):
    response = as_marketer.post(UPLOAD, {"name": "x"})
    assert response.status_code == 400
    assert figure(response, "seg-upload-error") == "Choose a CSV file of user ids."


# --- the body limit's one exception ---------------------------------------------------------------------------------


def through_the_web_limits(path: str, size: int) -> int:
    """The status the web process's BodyLimit (as backend/asgi.py builds it) gives a body of ``size`` bytes."""
    from backend import asgi

    async def app(scope, receive, send):
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    guard = BodyLimit(app, asgi.http_app.limit, asgi.http_app.per_path)
    chunks = [b"x" * 65536] * (size // 65536) + [b"x" * (size % 65536)]
    queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent = []

    async def receive():
        return queue.pop(0)

    async def send(message):
        sent.append(message)

    headers = [(b"content-length", str(size).encode())]
    asyncio.run(guard({"type": "http", "method": "POST", "path": path, "headers": headers}, receive, send))
    return sent[0]["status"]


def test_only_the_upload_path_takes_a_body_over_one_mib():
    two_mb = 2 * 1024 * 1024
    assert through_the_web_limits("/api/v1/notifications", two_mb) == 413
    assert through_the_web_limits(SAVE, two_mb) == 413
    assert through_the_web_limits(UPLOAD + "/", two_mb) == 413
    assert through_the_web_limits(UPLOAD, two_mb) == 200
    assert through_the_web_limits(UPLOAD, 20 * 1024 * 1024 + 64 * 1024) == 200
    assert through_the_web_limits(UPLOAD, 20 * 1024 * 1024 + 64 * 1024 + 1) == 413


@pytest.fixture
def processes(smtp_sink):
    procs = Processes(worker_env(smtp_sink.port))
    yield procs
    procs.stop_all()


@pytest.mark.django_db(transaction=True)
def test_a_real_daphne_lets_two_mb_through_to_the_upload_alone(processes):
    url = processes.start_web()
    body = b"--b\r\nContent-Disposition: form-data; name=file; filename=ids.csv\r\n\r\n"
    body += b"u-ar-1\n" * (2 * 1024 * 1024 // 7) + b"\r\n--b--\r\n"
    answers = {}
    for path in (UPLOAD, SAVE):
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=b\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        answers[path] = raw_post(url, head, body).split(b"\r\n", 1)[0]
    # Past the body limit, the upload meets Django's CSRF check (no cookie here); the filter save never gets there.
    assert answers == {UPLOAD: b"HTTP/1.1 403 Forbidden", SAVE: b"HTTP/1.1 413 Request Entity Too Large"}


def test_a_two_mb_csv_is_accepted_and_read_from_disk(as_marketer, monkeypatch):
    read = []
    parse = csv_upload.parse_upload
    monkeypatch.setattr(
        csv_upload, "parse_upload", lambda stream, size: read.append(type(stream)) or parse(stream, size)
    )
    ids = [f"big-{number:07d}" for number in range(200_000)]
    data = ("\n".join(["u-ar-1", *ids]) + "\n").encode()
    assert len(data) > 2 * 1024 * 1024
    response = upload(as_marketer, data)
    assert response.status_code == 200
    assert (figure(response, "rows-read"), figure(response, "known")) == ("200001", "1")
    assert read == [TemporaryUploadedFile]  # spooled to disk, not held in memory


def test_masks_keep_only_what_tells_addresses_apart():
    assert mask_phone("+966501234567") == "+9665••••567"
    assert mask_phone("+1234") == "••••"
    assert mask_phone("") == ""
    assert mask_email("layla@example.com") == "l•••@example.com"
    assert mask_email("") == ""
