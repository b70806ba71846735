"""The status server on a real socket: each route's answer, the static allow-list, quiet
serving, and binding errors raised to the caller."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from k2k.observability.http.server import STATIC_FILES, StatusServer
from k2k.observability.readiness import Health


def _get(server: StatusServer, path: str) -> tuple[int, str, bytes]:
    """Status, content type and body of GET ``path`` (error statuses too)."""
    url = f"http://127.0.0.1:{server.address[1]}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


def _metrics_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4")])
    return [b"k2k_up 1\n"]


@pytest.fixture(scope="module")
def server() -> Iterator[StatusServer]:
    srv = StatusServer(
        "127.0.0.1",
        0,
        metrics_app=_metrics_app,
        health=lambda: Health(False, "target unreachable for 65 s"),
        status=lambda: {"pipeline": "orders", "v": 1},
    )
    try:
        yield srv
    finally:
        srv.close()


def test_each_route_answers_what_the_contract_says(server: StatusServer):
    assert _get(server, "/metrics") == (200, "text/plain; version=0.0.4", b"k2k_up 1\n")
    assert _get(server, "/healthz")[::2] == (200, b"ok\n")
    assert _get(server, "/readyz")[::2] == (503, b"not ready: target unreachable for 65 s\n")
    code, ctype, body = _get(server, "/api/status")
    assert (code, ctype, json.loads(body)) == (
        200,
        "application/json",
        {"pipeline": "orders", "v": 1},
    )
    code, ctype, body = _get(server, "/")
    assert (code, ctype) == (200, "text/html; charset=utf-8")
    assert b'src="static/status.js"' in body and b"static/uPlot.iife.min.js" in body


def test_readiness_and_status_can_be_attached_later():
    srv = StatusServer("127.0.0.1", 0, metrics_app=None)
    try:
        assert _get(srv, "/readyz")[::2] == (200, b"ready: no readiness source\n")
        assert _get(srv, "/api/status")[0] == 404
        assert _get(srv, "/metrics")[0] == 404
        srv.attach(health=lambda: Health(True, "caught up"), status=lambda: {"v": 1})
        assert _get(srv, "/readyz")[::2] == (200, b"ready: caught up\n")
        assert json.loads(_get(srv, "/api/status")[2]) == {"v": 1}
    finally:
        srv.close()


def test_failing_sources_answer_not_ready_and_a_json_error():
    def broken() -> dict:
        raise RuntimeError("control topic unreadable")

    def no_health() -> Health:
        raise RuntimeError("driver gone")

    srv = StatusServer("127.0.0.1", 0, metrics_app=None, health=no_health, status=broken)
    try:
        assert _get(srv, "/readyz")[::2] == (
            503,
            b"not ready: readiness check failed: driver gone\n",
        )
        code, _ctype, body = _get(srv, "/api/status")
        assert code == 500
        assert json.loads(body)["error"] == "RuntimeError: control topic unreadable"
    finally:
        srv.close()


@pytest.mark.parametrize("name", sorted(STATIC_FILES))
def test_every_vendored_file_is_served_with_its_type(server: StatusServer, name: str):
    code, ctype, body = _get(server, f"/static/{name}")
    assert (code, ctype) == (200, STATIC_FILES[name])
    assert len(body) > 100


@pytest.mark.parametrize(
    "path",
    [
        "/static/../server.py",
        "/static/%2e%2e/server.py",
        "/static/..%2fserver.py",
        "/static/../../../../etc/passwd",
        "/static/",
        "/static/status.js/",
        "/static//etc/passwd",
        "/server.py",
        "/favicon.ico",
    ],
)
def test_nothing_outside_the_allow_list_is_served(server: StatusServer, path: str):
    code, _ctype, body = _get(server, path)
    assert (code, body) == (404, b"not found\n")


def test_other_methods_are_refused(server: StatusServer):
    req = urllib.request.Request(
        f"http://127.0.0.1:{server.address[1]}/api/status", data=b"x", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 405


def test_requests_are_not_logged(server: StatusServer, capfd: pytest.CaptureFixture[str]):
    for path in ("/", "/healthz", "/nope"):
        _get(server, path)
    assert capfd.readouterr().err == ""


def test_a_busy_port_raises_before_returning_and_close_frees_the_port():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(OSError):
            StatusServer("127.0.0.1", port, metrics_app=None)
    srv = StatusServer("127.0.0.1", 0, metrics_app=None)
    port = srv.address[1]
    srv.close()
    again = StatusServer("127.0.0.1", port, metrics_app=None)  # the port is free again
    again.close()


def test_an_ipv6_host_is_served_when_the_machine_has_ipv6():
    try:
        srv = StatusServer("::1", 0, metrics_app=None)
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    try:
        with urllib.request.urlopen(f"http://[::1]:{srv.address[1]}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        srv.close()
