"""The dashboard page and the figures it polls, for support agents and administrators.

Who: active staff with ``notifications.view_notification`` (the support role; an
administrator holds every permission); others get 403, anonymous visitors the login
page. The page is a frame of empty charts; ``dashboard.js`` fetches ``data`` for
the chosen window every ``REFRESH[window]`` seconds and redraws them.
"""

from datetime import UTC, datetime
from decimal import Decimal

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET

from backend.notifications import aggregates
from backend.notifications.aggregates import WINDOWS, Window
from frontend.editor.views import staff_only

VIEW = "notifications.view_notification"
# Seconds between two refreshes: a minute bucket changes every few seconds, an hour one slowly.
REFRESH = {"hour": 10, "day": 60, "week": 300}


def _window(request: HttpRequest) -> Window | None:
    return WINDOWS.get(request.GET.get("window", "hour"))


def _unknown_window(request: HttpRequest) -> HttpResponse:
    given = request.GET.get("window", "")[:20]
    return HttpResponseBadRequest(
        f"Unknown window {given!r}: choose one of {', '.join(WINDOWS)}.", content_type="text/plain; charset=utf-8"
    )


@require_GET
@staff_only(VIEW)
def page(request: HttpRequest) -> HttpResponse:
    """The dashboard for ``?window=hour|day|week`` (hour by default); 400 for another window."""
    window = _window(request)
    if window is None:
        return _unknown_window(request)
    context = {
        "window": window.name,
        "windows": list(WINDOWS),
        "data_url": f"{reverse('dashboard:data')}?window={window.name}",
        "refresh": REFRESH[window.name],
    }
    response = render(request, "frontend/dashboard/page.html", context)
    add_never_cache_headers(response)
    return response


def _lines(series: dict[str, list]) -> list[dict]:
    return [{"name": name, "values": values} for name, values in series.items()]


def figures(window: Window, now: datetime) -> dict:
    """Everything the page draws for ``window`` at ``now``, as JSON-ready data.

    ``labels`` are the bucket starts (ISO 8601, UTC) shared by the time charts; ``cost`` has
    its own labels (UTC days) and ``delivered`` one bar per provider. Rates are 0–1.
    """
    cost = aggregates.sms_cost_per_kind_per_day(window, now)
    kinds = sorted({kind for day in cost.values() for kind in day})
    delivered = aggregates.delivered_ratio_per_provider(window, now)
    failures = aggregates.failure_rate_per_provider(window, now)
    providers = sorted(set(aggregates.configured_providers()) | set(failures) | set(delivered))
    return {
        "window": window.name,
        "unit": window.unit,
        "generated_at": now.astimezone(UTC).isoformat(),
        "labels": [bucket.isoformat() for bucket in aggregates.buckets(window, now)],
        "sent": _lines(aggregates.sent_per_channel(window, now)),
        "latency": _lines(aggregates.latency_per_tier(window, now)),
        "failures": _lines(failures),
        "dead_letters": _lines(aggregates.dead_letters(window, now)),
        "queue": _lines(aggregates.queue_depth_per_tier(window, now)),
        "cost": {
            "labels": list(cost),
            "series": [{"name": k, "values": [float(cost[d].get(k, Decimal(0))) for d in cost]} for k in kinds],
        },
        "delivered": {"labels": list(delivered), "providers": delivered},
        "breakers": aggregates.breaker_states(providers),
        "open_dead_letters": aggregates.open_dead_letters(),
        "queued_now": aggregates.queued_now(),
    }


@require_GET
@staff_only(VIEW)
def data(request: HttpRequest) -> HttpResponse:
    """The figures of ``?window=`` as JSON (see ``figures``); 400 for an unknown window."""
    window = _window(request)
    if window is None:
        return _unknown_window(request)
    response = JsonResponse(figures(window, timezone.now()))
    add_never_cache_headers(response)
    return response
