"""Local stand-ins for the SMS and push providers, speaking their HTTP APIs, with fault injection.

One aiohttp server answers like Twilio (``/2010-04-01/Accounts/{sid}/Messages.json``),
Vonage (``/sms/json``), FCM HTTP v1 (``/v1/projects/{p}/messages:send``) and a Web Push
service (``/push/{subscription}``). Every accepted message is kept for inspection.

Faults, per provider (``twilio``, ``vonage``, ``fcm``, ``webpush``), as JSON::

    {"twilio": {"error_rate": 0.2,              # share of calls answered with `error`
                "error": "500",                 # 500 | 429 | timeout
                "latency_ms": 40,               # added to every answer
                "outage": [t0, t1],             # epoch seconds: every call inside fails with `error`
                "rules": {"+15550000001": "invalid-number",          # per recipient, see OUTCOMES
                          "+15550000002": {"outcome": "500", "times": 2}}}}  # the first 2 calls only

FCM also knows the outcomes named in ``FCM_ERRORS`` (payload faults, sender mismatch, …).

Delivery receipts, as the real providers post them: for a Twilio message sent with a
``StatusCallback`` and a Vonage one with a ``callback``, after ``delay`` seconds the stub posts
"sent" (Twilio) / "accepted" (Vonage) and then the outcome, signed like the real ones (Twilio with
the auth token of the call's basic auth, Vonage with ``VONAGE_SIGNATURE``)::

    {"delay": 1.0, "outcome": "delivered",      # delivered | undelivered[:code] | none
     "rules": {"+15550000003": "undelivered:30007"}}   # per recipient

Control endpoints: ``GET/DELETE /_stub/messages``, ``GET/PUT /_stub/faults``,
``POST /_stub/outage`` ``{"provider", "seconds", "error"?}``, ``GET/PUT /_stub/receipts`` (and
``GET /_stub/receipts/posted``: each receipt posted and the answer it got).
"""

import asyncio
import base64
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from backend.notifications.receipts.signatures import twilio_signature, vonage_signature

OUTCOMES = ("ok", "invalid-number", "opted-out", "unregistered", "429", "500", "timeout")
# A "timeout" answer comes this late: far past any client's timeout, yet finite.
TIMEOUT_SECONDS = 30.0
# The stub Vonage account's signature secret and method (the demo's providers file names the same);
# 32 bytes, the least RFC 7518 §3.2 allows an HS256 key (the JWT-signed receipts).
VONAGE_SIGNATURE = ("stub-vonage-signature-secret-32b", "sha256")
# An "undelivered" receipt without a code: the number cannot be reached (both disable the number).
UNDELIVERED_CODES = {"twilio": "30003", "vonage": "3"}


@dataclass
class StubState:
    """What the stub received and how it is told to misbehave."""

    faults: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    receipts: dict[str, Any] = field(default_factory=lambda: {"delay": 1.0, "outcome": "delivered"})
    posted: list[dict[str, Any]] = field(default_factory=list)
    tasks: set[asyncio.Task] = field(default_factory=set)

    def outcome(self, provider: str, recipient: str) -> str:
        """Decide this call's fate: a per-recipient rule, an outage, a random error, or ok."""
        self.calls[provider] = self.calls.get(provider, 0) + 1
        faults = self.faults.get(provider, {})
        rule = faults.get("rules", {}).get(recipient)
        if isinstance(rule, dict):
            if rule.get("times", 0) > 0:
                rule["times"] -= 1
                return str(rule["outcome"])
        elif rule:
            return rule
        outage = faults.get("outage")
        if outage and outage[0] <= time.time() < outage[1]:
            return str(faults.get("error", "500"))
        if faults.get("error_rate") and self.rng.random() < float(faults["error_rate"]):
            return str(faults.get("error", "500"))
        return "ok"

    def keep(self, provider: str, to: str, text: str, reference: str) -> None:
        self.messages.append({"provider": provider, "to": to, "text": text, "ref": reference, "at": time.time()})

    def receipt_outcome(self, provider: str, to: str) -> tuple[str, str]:
        """What the receipt for a message to ``to`` says: ("delivered" | "undelivered" | "none", code)."""
        outcome = str(self.receipts.get("rules", {}).get(to, self.receipts.get("outcome", "delivered")))
        outcome, _, code = outcome.partition(":")
        return outcome, code or (UNDELIVERED_CODES[provider] if outcome == "undelivered" else "")

    def post_later(self, url: str, receipts: list[tuple[dict[str, str], dict[str, str]]]) -> None:
        """Post each (form, headers) to ``url``, in order, ``receipts["delay"]`` seconds from now."""
        task = asyncio.get_running_loop().create_task(self._post(url, receipts))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _post(self, url: str, receipts: list[tuple[dict[str, str], dict[str, str]]]) -> None:
        await asyncio.sleep(float(self.receipts.get("delay", 1.0)))
        async with ClientSession(timeout=ClientTimeout(total=10)) as session:
            for form, headers in receipts:
                record: dict[str, Any] = {"url": url, "form": form}
                try:
                    async with session.post(url, data=form, headers=headers) as response:
                        record["answer"] = response.status
                except (ClientError, TimeoutError) as exc:
                    record["answer"] = f"{type(exc).__name__}: {exc}"
                self.posted.append(record)


STATE = web.AppKey("state", StubState)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(data, status=status, headers=headers)


async def _delay(state: StubState, provider: str, outcome: str) -> None:
    latency = float(state.faults.get(provider, {}).get("latency_ms", 0)) / 1000
    if outcome == "timeout":
        latency += TIMEOUT_SECONDS
    if latency:
        await asyncio.sleep(latency)


async def twilio(request: web.Request) -> web.Response:
    state: StubState = request.app[STATE]
    if not request.headers.get("Authorization", "").startswith("Basic "):
        return _json({"code": 20003, "message": "Authenticate", "status": 401}, 401)
    form = await request.post()
    to, body = str(form.get("To", "")), str(form.get("Body", ""))
    outcome = state.outcome("twilio", to)
    await _delay(state, "twilio", outcome)
    if outcome == "ok":
        sid = "SM" + uuid.uuid4().hex
        state.keep("twilio", to, body, sid)
        if form.get("StatusCallback"):
            _twilio_receipts(state, request, form, sid)
        return _json({"sid": sid, "status": "queued", "to": to, "body": body}, 201)
    errors = {
        "invalid-number": (400, {"code": 21211, "message": f"The 'To' number {to} is not a valid phone number."}),
        "opted-out": (400, {"code": 21610, "message": "Attempt to send to unsubscribed recipient"}),
        "429": (429, {"code": 20429, "message": "Too Many Requests"}),
    }
    status, error = errors.get(outcome, (500, {"code": 20500, "message": "Internal Server Error"}))
    return _json({**error, "status": status}, status, headers={"Retry-After": "1"} if status == 429 else None)


def _twilio_receipts(state: StubState, request: web.Request, form: Any, sid: str) -> None:
    """Twilio's status callbacks for ``sid``: "sent", then the outcome, signed with the caller's auth token."""
    outcome, code = state.receipt_outcome("twilio", str(form["To"]))
    if outcome == "none":
        return
    url = str(form["StatusCallback"])
    credentials = base64.b64decode(request.headers["Authorization"].removeprefix("Basic ")).decode()
    account, _, token = credentials.partition(":")
    base = {"MessageSid": sid, "SmsSid": sid, "AccountSid": account, "From": str(form.get("From", "")),
            "To": str(form["To"]), "ApiVersion": "2010-04-01"}  # fmt: skip
    forms = [{**base, "MessageStatus": "sent", "SmsStatus": "sent"}]
    final = {**base, "MessageStatus": outcome, "SmsStatus": outcome}
    forms.append({**final, "ErrorCode": code} if code else final)
    state.post_later(url, [(f, {"X-Twilio-Signature": twilio_signature(token, url, f.items())}) for f in forms])


def _vonage_receipts(state: StubState, form: Any, message_id: str) -> None:
    """Vonage's DLRs for ``message_id``: "accepted", then the outcome, signed with ``VONAGE_SIGNATURE``."""
    to = "+" + str(form.get("to", ""))
    outcome, code = state.receipt_outcome("vonage", to)
    if outcome == "none":
        return
    now = time.gmtime()
    base = {"msisdn": to.lstrip("+"), "to": str(form.get("from", "")), "network-code": "42001",
            "messageId": message_id, "price": "0.03330000", "scts": time.strftime("%y%m%d%H%M", now),
            "api-key": str(form.get("api_key", "")), "message-timestamp": time.strftime("%Y-%m-%d %H:%M:%S", now),
            "timestamp": str(int(time.time()))}  # fmt: skip
    if form.get("client-ref"):
        base["client-ref"] = str(form["client-ref"])
    final = {"delivered": ("delivered", "0")}.get(outcome, ("failed", code))
    forms = [{**base, "status": "accepted", "err-code": "0"}, {**base, "status": final[0], "err-code": final[1]}]
    secret, method = VONAGE_SIGNATURE
    state.post_later(str(form["callback"]), [({**f, "sig": vonage_signature(f, secret, method)}, {}) for f in forms])


async def vonage(request: web.Request) -> web.Response:
    state: StubState = request.app[STATE]
    form = await request.post()
    to, text = "+" + str(form.get("to", "")), str(form.get("text", ""))
    outcome = state.outcome("vonage", to)
    await _delay(state, "vonage", outcome)
    if outcome == "500":
        return web.Response(status=500, text="Internal Server Error")
    statuses = {"ok": "0", "429": "1", "invalid-number": "6", "opted-out": "7"}
    status = statuses.get(outcome, "5")
    part: dict[str, Any] = {"to": to.lstrip("+"), "status": status}
    if status == "0":
        part["message-id"] = uuid.uuid4().hex[:16].upper()
        state.keep("vonage", to, text, part["message-id"])
        if form.get("callback"):
            _vonage_receipts(state, form, part["message-id"])
    else:
        part["error-text"] = {"1": "Throttled", "6": "Invalid Message", "7": "Number barred"}.get(
            status, "Internal Error"
        )
    return _json({"message-count": "1", "messages": [part]})


async def fcm(request: web.Request) -> web.Response:
    state: StubState = request.app[STATE]
    if not request.headers.get("Authorization", "").startswith("Bearer "):
        return _json({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "no token"}}, 401)
    message = (await request.json()).get("message", {})
    token = str(message.get("token", ""))
    outcome = state.outcome("fcm", token)
    await _delay(state, "fcm", outcome)
    if outcome == "ok":
        name = f"projects/{request.match_info['project']}/messages/0:{uuid.uuid4().hex}"
        state.keep("fcm", token, message.get("notification", {}).get("body", ""), name)
        return _json({"name": name})
    status, error = fcm_error(outcome)
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    return _json({"error": error}, status, headers)


def _bad_request(field: str, description: str) -> dict[str, Any]:
    violation = {"field": field, "description": description}
    return {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}


# outcome → (HTTP status, canonical status, FCM errorCode, message, extra details), shaped like FCM's
# answers (https://firebase.google.com/docs/cloud-messaging/error-codes, examples 1 and 2).
FCM_ERRORS: dict[str, tuple[int, str, str, str, list[dict[str, Any]]]] = {
    "unregistered": (404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.", []),
    "invalid-number": (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "The registration token is not a valid.", []),
    "invalid-token": (
        400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", []
    ),
    "invalid-token-field": (
        400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Request contains an invalid argument.",
        [_bad_request("message.token", "Invalid registration token")],
    ),
    "message-too-big": (
        400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Request contains an invalid argument.",
        [_bad_request("message", "Message is too big. Limit: 4096 bytes.")],
    ),
    "invalid-data": (
        400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.data[0].value' (TYPE_STRING), 12",
        [_bad_request("message.data[0].value", "Invalid value at 'message.data[0].value' (TYPE_STRING), 12")],
    ),
    "invalid-argument": (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Request contains an invalid argument.", []),
    "sender-id-mismatch": (403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch", []),
    "third-party-auth": (
        401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "Auth error from APNS or Web Push Service", []
    ),
    "429": (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.", []),
    "internal": (500, "INTERNAL", "INTERNAL", "Internal error encountered.", []),
}  # fmt: skip


def fcm_error(outcome: str) -> tuple[int, dict[str, Any]]:
    """The HTTP status and ``error`` object FCM answers for ``outcome`` (503 UNAVAILABLE when unnamed)."""
    status, name, code, text, extra = FCM_ERRORS.get(
        outcome, (503, "UNAVAILABLE", "UNAVAILABLE", "The service is unavailable.", [])
    )
    details = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}, *extra]
    return status, {"code": status, "message": text, "status": name, "details": details}


async def webpush(request: web.Request) -> web.Response:
    state: StubState = request.app[STATE]
    endpoint = str(request.url)
    await request.read()
    outcome = state.outcome("webpush", endpoint)
    await _delay(state, "webpush", outcome)
    if outcome == "ok":
        location = f"{request.url.origin()}/push-message/{uuid.uuid4().hex}"
        state.keep("webpush", endpoint, f"{request.content_length} encrypted bytes", location)
        return web.Response(status=201, headers={"Location": location})
    status = {"unregistered": 410, "invalid-number": 404, "429": 429}.get(outcome, 503)
    return web.Response(status=status, headers={"Retry-After": "1"} if status == 429 else None)


async def get_messages(request: web.Request) -> web.Response:
    state: StubState = request.app[STATE]
    provider = request.query.get("provider")
    return _json([m for m in state.messages if provider in (None, m["provider"])])


async def delete_messages(request: web.Request) -> web.Response:
    request.app[STATE].messages.clear()
    return web.Response(status=204)


async def get_faults(request: web.Request) -> web.Response:
    return _json(request.app[STATE].faults)


async def put_faults(request: web.Request) -> web.Response:
    request.app[STATE].faults = await request.json()
    return _json(request.app[STATE].faults)


async def get_receipts(request: web.Request) -> web.Response:
    return _json(request.app[STATE].receipts)


async def put_receipts(request: web.Request) -> web.Response:
    request.app[STATE].receipts = await request.json()
    return _json(request.app[STATE].receipts)


async def get_posted(request: web.Request) -> web.Response:
    return _json(request.app[STATE].posted)


async def post_outage(request: web.Request) -> web.Response:
    body = await request.json()
    faults = request.app[STATE].faults.setdefault(body["provider"], {})
    faults["outage"] = [time.time(), time.time() + float(body["seconds"])]
    faults["error"] = str(body.get("error", "500"))
    return _json(faults)


def make_app(state: StubState | None = None) -> web.Application:
    """The stub as an aiohttp application; ``app[STATE]`` is its ``StubState``."""
    app = web.Application()
    app[STATE] = state or StubState()
    app.add_routes(
        [
            web.post("/2010-04-01/Accounts/{sid}/Messages.json", twilio),
            web.post("/sms/json", vonage),
            web.post("/v1/projects/{project}/messages:send", fcm),
            web.post("/push/{subscription}", webpush),
            web.get("/_stub/messages", get_messages),
            web.delete("/_stub/messages", delete_messages),
            web.get("/_stub/faults", get_faults),
            web.put("/_stub/faults", put_faults),
            web.post("/_stub/outage", post_outage),
            web.get("/_stub/receipts", get_receipts),
            web.put("/_stub/receipts", put_receipts),
            web.get("/_stub/receipts/posted", get_posted),
        ]
    )
    return app


class StubServer:
    """The stub running in a background thread, for tests: ``.url``, ``.state``, ``.stop()``.

    ``drop_on_hang_up``: a call whose client went away before the answer (a worker killed mid-call) is
    dropped, never kept, as by a provider that had not yet committed it; by default it is kept.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, state: StubState | None = None, drop_on_hang_up: bool = False
    ):
        self.state = state or StubState()
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(make_app(self.state), access_log=None, handler_cancellation=drop_on_hang_up)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, host, port, backlog=1024)
        self._loop.run_until_complete(site.start())
        bound = self._runner.addresses[0]
        self.url = f"http://{bound[0]}:{bound[1]}"
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="provider-stub")
        self._thread.start()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
