"""The OTP promise under a worker's death: kill -9 of a high-tier worker during 100 OTPs, real processes.

The drill (manage.py drill_otp) runs against the test PostgreSQL and Redis and the stub providers: every
OTP must reach a provider within 10 s of its acceptance, with no more duplicates than calls in flight.
"""

import io

import pytest

from backend.notifications.management.commands.drill_otp import run_drill
from backend.notifications.models import Notification, State
from backend.stubs.provider_server import StubServer
from tests.processes import Processes, wait_until, worker_env
from tests.providers_setup import write_providers_file

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]


@pytest.fixture(params=[False, True], ids=["cut-calls-land", "cut-calls-lost"])
def stub(request, tmp_path, settings):
    """The stub providers; with "cut-calls-lost" a call cut by the kill never reaches them, as if not yet sent."""
    server = StubServer(drop_on_hang_up=request.param)
    path = write_providers_file(tmp_path / "providers.toml", server.url)
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}
    yield server
    server.stop()


def test_a_high_tier_worker_killed_mid_burst_delays_no_otp_past_ten_seconds(stub, smtp_sink, settings):
    env = worker_env(smtp_sink.port, NOTIFY_PROVIDERS_FILE=settings.NOTIFY["PROVIDERS_FILE"], LOG_LEVEL="WARNING")
    out = io.StringIO()

    report = run_drill(env, stub.url, otps=100, rate=20, latency_ms=300, kill_after=40, out=out)

    assert report.reached == 100
    assert report.longest <= 10.0, sorted(report.latencies)[-5:]
    assert report.duplicates <= report.in_flight
    assert sum(n for (state, _), n in report.states.items() if state == State.SENT) == 100
    assert max(report.recorded) <= 10.0  # the dead worker's claims were freed within seconds too
    assert report.lease_expired > 0, out.getvalue()  # the dead worker did hold claims only recovery could deliver


def test_a_live_worker_on_a_call_three_times_its_lease_long_is_never_sent_twice(
    stub_providers, smtp_sink, send, settings
):
    """The heartbeat renews the lease while the call lasts: a short lease costs no duplicate of a slow call."""
    stub_providers.state.faults = {"twilio": {"latency_ms": 1800}}
    env = worker_env(
        smtp_sink.port, NOTIFY_PROVIDERS_FILE=settings.NOTIFY["PROVIDERS_FILE"], NOTIFY_HIGH_LEASE="0.6",
        NOTIFY_HIGH_SWEEP_INTERVAL="0.1", NOTIFY_SWEEP_INTERVAL="0.1", NOTIFY_VISIBILITY_TIMEOUT="0.6",
        NOTIFY_HIGH_VISIBILITY_TIMEOUT="0.6",
    )  # fmt: skip
    processes = Processes(env)
    try:
        processes.start("run_scheduler")
        processes.start("run_worker", "high")
        processes.start("run_worker", "high")
        pk = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "271828"}}, key="login-slow").json()["id"]
        wait_until(lambda: Notification.objects.get(pk=pk).state == State.SENT, 30, "the OTP sent")
    finally:
        processes.stop_all()

    assert [m["provider"] for m in stub_providers.state.messages] == ["twilio"]
    history = Notification.objects.get(pk=pk).state_changes.values_list("to_state", "reason")
    assert list(history) == [("queued", ""), ("sending", ""), ("sent", "")]
