"""Staff pages for segments: the list, a new filter segment with its live count, a CSV upload and its save.

Staff with ``campaigns.view_segment`` see the list (approvers, marketers);
``campaigns.add_segment`` (marketers) builds, uploads and saves. Anonymous
visitors go to the login page (``staff_only``, as for the template editor).
The sample of a filter shows phones and emails masked (``+9665••••567``,
``l•••@example.com``): a marketer needs to see who matches, not their addresses.

An upload is reported first and saved after, without sending the file again:
its ids wait in files under ``NOTIFY_DATA_DIR`` (``frontend/campaigns/uploads.py``).
"""

import csv
import itertools

from django.contrib import messages
from django.db import connection, transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from backend.notifications.masking import mask_email, mask_phone
from backend.notifications.models import Recipient
from backend.spreadsheet import BOM, QUOTING, spreadsheet_text
from campaigns import csv_upload, segment_query
from campaigns.models import Segment, SegmentMember
from frontend.campaigns import conditions, uploads
from frontend.editor.forms import language_choices
from frontend.editor.views import _answer, staff_only

VIEW = "campaigns.view_segment"
ADD = "campaigns.add_segment"
LIST_LIMIT = 200
SAMPLE_SIZE = 20
UNKNOWN_SHOWN = 100
INSERT_BATCH = 10_000
MAX_NAME = Segment._meta.get_field("name").max_length


# --- the list -------------------------------------------------------------------------------------------------------


@require_GET
@staff_only(VIEW, ADD)
def segment_list(request: HttpRequest) -> HttpResponse:
    """The newest ``LIST_LIMIT`` segments: a list's size (two queries, however many segments), a filter's later.

    A filter's size is counted by its own request (``segment_size``, HTMX when the row is shown): the page
    answers at once whatever the filters cost, and one slow filter spoils only its own cell.
    """
    members = SegmentMember.objects.filter(segment=OuterRef("pk")).values("segment").annotate(n=Count("pk"))
    segments = list(
        Segment.objects.select_related("created_by")
        .annotate(member_count=Coalesce(Subquery(members.values("n")), 0))
        .order_by("-created_at", "-pk")[:LIST_LIMIT]
    )
    context = {"segments": segments, "can_add": request.user.has_perm(ADD), "limit": LIST_LIMIT}
    return _answer(render(request, "frontend/campaigns/segment_list.html", context))


@require_GET
@staff_only(VIEW, ADD)
def segment_size(request: HttpRequest, pk: int) -> HttpResponse:
    """A filter segment's size now (a table cell's content, HTMX), or why it has none.

    The count is bounded by ``NOTIFY["SEGMENT_COUNT_TIMEOUT"]`` seconds; a filter that no longer
    validates or runs past it says so (200: the cell shows the message).
    """
    segment = Segment.objects.filter(pk=pk, kind=Segment.Kind.FILTER).first()
    if segment is None:
        raise Http404("No such filter segment.")
    context = {"size": None, "problem": ""}
    try:
        definition = segment_query.validate_definition(segment.definition)
        with segment_query.time_bound():
            context["size"] = segment_query.count(definition)
    except segment_query.DefinitionError as exc:
        context["problem"] = f"Its filter no longer validates: {exc}"
    except segment_query.CountTimeout as exc:
        context["problem"] = str(exc)
    return _answer(render(request, "frontend/campaigns/_segment_size.html", context))


# --- a filter segment -----------------------------------------------------------------------------------------------


@require_GET
@staff_only(ADD)
def filter_new(request: HttpRequest) -> HttpResponse:
    """An empty filter form: three blank rows."""
    return _filter_page(request, conditions.Built([conditions.Row() for _ in range(3)]), name="")


@require_POST
@staff_only(ADD)
def filter_preview(request: HttpRequest) -> HttpResponse:
    """The live count and sample as the filter changes (HTMX partial), or the page with one more row."""
    built = conditions.build(conditions.rows_from(request.POST))
    if request.htmx:  # 200 even for a count past its time: HTMX swaps only a 2xx answer in, and says why
        return _answer(render(request, "frontend/campaigns/_filter_result.html", _result_context(built, oob=True)))
    if request.POST.get("add") and len(built.rows) < conditions.MAX_ROWS:
        built.rows.append(conditions.Row())
    return _filter_page(request, built, name=request.POST.get("name", ""))


@require_POST
@staff_only(ADD)
def filter_save(request: HttpRequest) -> HttpResponse:
    """Save the filter as a segment (its normalised document); a bad row or name shows the page again, 400."""
    built = conditions.build(conditions.rows_from(request.POST))
    name = request.POST.get("name", "").strip()
    name_error = _name_problem(name)
    if built.definition is None or name_error:
        return _filter_page(request, built, name=name, name_error=name_error, status=400)
    segment = Segment.objects.create(
        name=name, kind=Segment.Kind.FILTER, definition=built.definition.to_document(), created_by=request.user
    )
    messages.success(request, f"Saved the filter segment {segment.name!r}.")
    return redirect("frontend:segments")


def _name_problem(name: str) -> str:
    if not name:
        return "Give the segment a name."
    if len(name) > MAX_NAME or not name.isprintable():
        return f"A name is up to {MAX_NAME} printable characters."
    return ""


def _filter_page(request: HttpRequest, built: conditions.Built, name: str, name_error: str = "", status: int = 200):
    context = {
        **_result_context(built, oob=False),
        "name": name,
        "name_error": name_error,
        "fields": conditions.FIELDS,
        "ops": conditions.OPS,
        "languages": language_choices(),
        "channels": segment_query.ADDRESS_CHANNELS,
    }
    if context["count_error"] and status == 200:
        status = 422  # the filter reads but cannot be counted in time
    return _answer(render(request, "frontend/campaigns/filter_new.html", context, status=status))


def _result_context(built: conditions.Built, oob: bool) -> dict:
    """The count and a sample of ``SAMPLE_SIZE`` when the filter is valid (two queries, time-bounded).

    A count past ``NOTIFY["SEGMENT_COUNT_TIMEOUT"]`` seconds gives ``count_error`` instead.
    """
    context = {"built": built, "oob": oob, "count": None, "sample": [], "count_error": ""}
    if built.definition is not None:
        try:
            with segment_query.time_bound():
                context["count"] = segment_query.count(built.definition)
                context["sample"] = [_masked(r) for r in segment_query.sample(built.definition, SAMPLE_SIZE)]
        except segment_query.CountTimeout as exc:
            context |= {"count": None, "sample": [], "count_error": str(exc)}
    return context


def _masked(recipient: Recipient) -> dict:
    return {
        "user_id": recipient.user_id,
        "language": recipient.language,
        "phone": mask_phone(recipient.phone),
        "email": mask_email(recipient.email),
        "time_zone": recipient.time_zone,
    }


# --- a CSV upload ---------------------------------------------------------------------------------------------------


@require_GET
@staff_only(ADD)
def upload_new(request: HttpRequest) -> HttpResponse:
    """The upload form."""
    return _answer(render(request, "frontend/campaigns/upload.html", {"max_mb": csv_upload.MAX_BYTES // 2**20}))


@require_POST
@staff_only(ADD)
def upload(request: HttpRequest) -> HttpResponse:
    """Read an uploaded CSV and show its report; the ids wait server-side for the save (uploads.py).

    A file above ``FILE_UPLOAD_MAX_MEMORY_SIZE`` is on disk (Django's temporary
    upload handler) and read one line at a time. A refusal is the form again, 400.
    """
    file = request.FILES.get("file")
    context = {"max_mb": csv_upload.MAX_BYTES // 2**20, "name": request.POST.get("name", "").strip()}
    if file is None:
        context["error"] = "Choose a CSV file of user ids."
        return _answer(render(request, "frontend/campaigns/upload.html", context, status=400))
    try:
        report = csv_upload.parse_upload(file, size=file.size)
    except csv_upload.UploadRefused as exc:
        context["error"] = str(exc)
        return _answer(render(request, "frontend/campaigns/upload.html", context, status=400))
    token = uploads.keep(request.user.pk, report.known_ids, report.unknown_ids)
    context |= {
        "report": report,
        "token": token,
        "file_name": file.name,
        "unknown_shown": report.unknown_ids[:UNKNOWN_SHOWN],
        "name": context["name"] or file.name.rsplit(".", 1)[0][:MAX_NAME],
    }
    return _answer(render(request, "frontend/campaigns/upload_report.html", context))


@require_GET
@staff_only(ADD)
def upload_unknown(request: HttpRequest, token: str) -> StreamingHttpResponse:
    """The unknown ids of a pending upload as a CSV (a ``user_id`` header, one id a line)."""
    ids = uploads.unknown_ids(request.user.pk, token)
    if ids is None:
        raise Http404("No such upload: upload the file again.")
    writer = csv.writer(_Echo(), lineterminator="\r\n", quoting=QUOTING)
    ids = (spreadsheet_text(user_id) for user_id in ids)  # an id comes from the uploaded file, as written
    rows = itertools.chain([BOM + writer.writerow(["user_id"])], (writer.writerow([user_id]) for user_id in ids))
    response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="unknown-user-ids.csv"'
    return _answer(response)


class _Echo:
    """A file-like object whose ``write`` returns the text: csv.writer then yields rows for streaming."""

    def write(self, text: str) -> str:
        return text


@require_POST
@staff_only(ADD)
def upload_save(request: HttpRequest) -> HttpResponse:
    """Create the list segment of a pending upload's known ids (set-based, in batches), then show the list."""
    token = request.POST.get("token", "")
    name = request.POST.get("name", "").strip()
    if problem := _name_problem(name):
        messages.error(request, f"{problem} Upload the file again.")
        return redirect("frontend:segment-upload-form")
    claimed = uploads.claim(request.user.pk, token)
    if claimed is None:
        messages.error(request, "That upload is no longer here (saved already, or over a day old): upload it again.")
        return redirect("frontend:segment-upload-form")
    with transaction.atomic():
        segment = Segment.objects.create(name=name, kind=Segment.Kind.LIST, created_by=request.user)
        size = sum(_insert_members(segment, batch) for batch in _batches(uploads.read(claimed)))
    uploads.forget(request.user.pk, token, claimed)
    messages.success(request, f"Saved the list segment {segment.name!r} with {size:,} users.")
    return redirect("frontend:segments")


def _batches(ids):
    while batch := list(itertools.islice(ids, INSERT_BATCH)):
        yield batch


def _insert_members(segment: Segment, user_ids: list[str]) -> int:
    """Add the recipients of ``user_ids`` to ``segment`` in one statement; returns how many rows went in.

    A recipient deleted since the report is skipped.
    """
    if connection.vendor == "postgresql":
        sql = (
            f"INSERT INTO {SegmentMember._meta.db_table} (segment_id, recipient_id) "
            f"SELECT %s, id FROM {Recipient._meta.db_table} WHERE user_id = ANY(%s) ON CONFLICT DO NOTHING"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [segment.pk, user_ids])
            return cursor.rowcount
    pks = Recipient.objects.filter(user_id__in=user_ids).values_list("pk", flat=True)
    created = SegmentMember.objects.bulk_create(
        [SegmentMember(segment=segment, recipient_id=pk) for pk in pks], ignore_conflicts=True
    )
    return len(created)
