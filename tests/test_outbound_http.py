"""Outbound HTTP to user-supplied URLs (Web Push endpoints): SSRF guards, over real HTTP to local servers.

No test sends a packet off this machine: a "public" address a fake resolver hands out is refused at
the connect call (``refuse_public_connects``) before any socket is made.
"""

import ipaddress
import socket

import pytest
import requests
import urllib3.util.connection

from backend.notifications.delivery import dispatch
from backend.notifications.models import Attempt, Device, Recipient, State
from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, ProviderError, provider_named
from tests.http_servers import tls_server_context
from tests.providers_setup import browser_subscription

PUBLIC = "93.184.215.14"  # what the fake resolver answers first; never connected to


class FakeDns(dict):
    """Answers for test names: ``dns["name.test"] = [["1.2.3.4"], ["127.0.0.1"]]``, one list per lookup,
    the last one repeating; ``lookups`` counts the lookups by name."""

    def __init__(self):
        super().__init__()
        self.lookups: dict[str, int] = {}

    def answer(self, host: str, port) -> list[tuple]:
        count = self.lookups[host] = self.lookups.get(host, 0) + 1
        addresses = self[host][min(count, len(self[host])) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, int(port))) for a in addresses]


@pytest.fixture
def fake_dns(monkeypatch) -> FakeDns:
    """``socket.getaddrinfo`` answering test names from a ``FakeDns``; other names resolve as usual."""
    real = socket.getaddrinfo
    dns = FakeDns()

    def getaddrinfo(host, port, *args, **kwargs):
        return dns.answer(host, port) if host in dns else real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return dns


@pytest.fixture
def refuse_public_connects(monkeypatch):
    """urllib3's connect, recording the address it resolved to and refusing any non-loopback one."""
    real = urllib3.util.connection.create_connection
    connected: list[str] = []

    def create_connection(address, *args, **kwargs):
        host, port = address
        ip = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0]
        connected.append(ip)
        if not ipaddress.ip_address(ip).is_loopback:
            raise ConnectionRefusedError(f"test: no traffic to {ip} leaves this machine")
        return real((ip, port), *args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)
    return connected


def push_message(endpoint: str) -> OutboundMessage:
    subscription = browser_subscription("http://unused", "x")
    return OutboundMessage(
        notification_id="n-1", channel="push", to=endpoint, subject="Hi", text="Hello", subscription=subscription
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("demo_data")
def test_a_redirecting_push_endpoint_is_not_followed_and_the_device_is_disabled(send, stub_providers, servers):
    """Even with private endpoints allowed (the stub's setting), a 307 is an answer, never a second request."""
    internal = servers()
    bouncer = servers(lambda handler: (307, {"Location": f"{internal.url}/admin/flush"}))
    recipient = Recipient.objects.get(user_id="u-ar-1")
    recipient.devices.all().delete()
    subscription = browser_subscription(bouncer.url, "browser-1")
    device = Device.objects.create(
        recipient=recipient, platform="webpush", token=subscription["endpoint"], subscription=subscription
    )
    response = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}, "channel": "push"})

    dispatch.deliver(response.json()["id"])

    assert [r["path"] for r in bouncer.requests] == ["/push/browser-1"]
    assert internal.requests == []
    attempt = Attempt.objects.get()
    assert (attempt.notification.state, attempt.result) == (State.FAILED, Attempt.Result.PERMANENT)
    device.refresh_from_db()
    assert device.disabled_at is not None
    assert device.disabled_reason == f"webpush 307: redirect to '{internal.url}/admin/flush' not followed"


def test_a_name_that_rebinds_to_loopback_after_the_check_is_never_reached(
    stub_providers, settings, fake_dns, refuse_public_connects
):
    """DNS rebinding: the check sees a public address, a second lookup would give loopback."""
    settings.NOTIFY = {**settings.NOTIFY, "ALLOW_PRIVATE_PUSH_ENDPOINTS": False}
    port = stub_providers.url.rsplit(":", 1)[1]
    fake_dns["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]

    with pytest.raises(ProviderError) as raised:
        provider_named("webpush").send(push_message(f"http://rebind.test:{port}/push/browser-1"))

    assert (raised.value.permanent, str(raised.value)) == (
        False,
        f"connection failed: ConnectionError: http://rebind.test:{port}/push/browser-1",
    )
    assert refuse_public_connects == [PUBLIC]  # the address that was checked, and nothing else
    assert fake_dns.lookups == {"rebind.test": 1}
    assert stub_providers.state.messages == []


def test_every_address_of_a_name_is_checked(settings, fake_dns, servers):
    settings.NOTIFY = {**settings.NOTIFY, "ALLOW_PRIVATE_PUSH_ENDPOINTS": False}
    server = servers()
    fake_dns["mixed.test"] = [[PUBLIC, "127.0.0.1"]]

    with pytest.raises(ProviderError) as raised:
        http.post_public(f"http://mixed.test:{server.port}/push/x", timeout=2, data=b"x")

    assert (raised.value.permanent, raised.value.address_invalid) == (True, True)
    assert str(raised.value) == (
        f"refused URL 'http://mixed.test:{server.port}/push/x': mixed.test resolves to the non-public address 127.0.0.1"
    )
    assert server.requests == []


def test_the_pinned_connection_keeps_the_name_in_the_host_header(settings, fake_dns, servers):
    settings.NOTIFY = {**settings.NOTIFY, "ALLOW_PRIVATE_PUSH_ENDPOINTS": True}
    server = servers()
    fake_dns["push.test"] = [["127.0.0.1"], ["203.0.113.9"]]  # a second lookup would fail to connect

    response = http.post_public(f"http://push.test:{server.port}/push/x?a=1", timeout=2, data=b"payload")

    assert response.status_code == 201
    assert server.requests == [{"path": "/push/x?a=1", "host": f"push.test:{server.port}", "body": b"payload"}]
    assert fake_dns.lookups == {"push.test": 1}


def test_over_tls_the_pinned_connection_sends_sni_and_checks_the_certificate_for_the_name(
    settings, fake_dns, servers, tls_authority, tmp_path
):
    settings.NOTIFY = {**settings.NOTIFY, "ALLOW_PRIVATE_PUSH_ENDPOINTS": True}
    server = servers(tls=tls_server_context(tls_authority, "push.test"))
    fake_dns["push.test"] = [["127.0.0.1"]]
    bundle = tmp_path / "ca.pem"
    tls_authority.cert_pem.write_to_path(str(bundle))

    response = http.post_public(f"https://push.test:{server.port}/push/x", timeout=2, data=b"x", verify=str(bundle))

    assert response.status_code == 201
    assert server.sni == ["push.test"]
    assert [r["host"] for r in server.requests] == [f"push.test:{server.port}"]


def test_over_tls_a_certificate_for_another_name_is_refused(settings, fake_dns, servers, tls_authority, tmp_path):
    settings.NOTIFY = {**settings.NOTIFY, "ALLOW_PRIVATE_PUSH_ENDPOINTS": True}
    server = servers(tls=tls_server_context(tls_authority, "other.test"))
    fake_dns["push.test"] = [["127.0.0.1"]]
    bundle = tmp_path / "ca.pem"
    tls_authority.cert_pem.write_to_path(str(bundle))

    with pytest.raises(ProviderError) as raised:
        http.post_public(f"https://push.test:{server.port}/push/x", timeout=2, data=b"x", verify=str(bundle))

    assert str(raised.value) == f"connection failed: SSLError: https://push.test:{server.port}/push/x"
    assert server.requests == []


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
        "224.0.0.1", "224.0.1.1", "239.255.255.250", "255.255.255.255", "240.0.0.1", "192.0.2.1", "198.18.0.1",
        "::1", "::", "fe80::1", "fec0::1", "feff::1", "fc00::1", "ff02::1", "ff0e::1", "2001:db8::1",
        "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::7f00:1", "2002:7f00:1::", "2002:a9fe:a9fe::", "64:ff9b::7f00:1",
    ],
)  # fmt: skip
def test_non_public_addresses_are_refused(address):
    assert http.is_public(ipaddress.ip_address(address)) is False


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "2002:808:808::"])
def test_public_addresses_pass(address):
    assert http.is_public(ipaddress.ip_address(address)) is True


@pytest.mark.parametrize(("value", "seconds"), [("7", 7.0), ("²", None), ("soon", None), ("", None)])
def test_retry_after_reads_seconds_and_ignores_what_is_no_number(value, seconds):
    response = requests.Response()
    response.headers["Retry-After"] = value
    assert http.retry_after_seconds(response) == seconds
