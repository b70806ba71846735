"""The one HTTP server of a k2k process: ``/metrics``, the health probes and the status page.

Runs on: driver (``k2k start -t``), the Offset Mapping app, or ``k2k status --serve``; one
server per process, on ``OTEL_EXPORTER_PROMETHEUS_HOST``:``PORT``. Routes:

* ``/metrics``: prometheus_client's WSGI app (the OpenTelemetry Prometheus reader's registry);
* ``/healthz``: 200 ``ok`` while the process serves (liveness);
* ``/readyz``: 200 ``ready: <reason>`` or 503 ``not ready: <reason>`` from ``health()``;
* ``/``: the status page; ``/static/<file>``: its vendored files, and nothing else;
* ``/api/status``: the JSON document of ``status()`` (docs/operations.md#status-page);
  404 when the process has no status source.

Requests are served in daemon threads and are not logged: a scraper every few seconds
would drown the process's own log.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from importlib import resources
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from k2k.errors import ConfigError
from k2k.observability.readiness import Health

__all__ = ["STATIC_FILES", "StatusServer", "WSGIApp", "always_ready", "parse_listen"]

log = logging.getLogger("k2k.metrics")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: The files ``/static/`` serves, with their content types: an allow-list, so no request
#: path ever reaches the file system.
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "status.js": "text/javascript; charset=utf-8",
    "status.css": "text/css; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
    "uPlot.LICENSE": "text/plain; charset=utf-8",
}


def parse_listen(value: str, option: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``:PORT`` means 127.0.0.1) as a bind address.

    >>> parse_listen("0.0.0.0:9465"), parse_listen("[::1]:80"), parse_listen(":0")
    (('0.0.0.0', 9465), ('::1', 80), ('127.0.0.1', 0))
    >>> parse_listen("localhost")
    Traceback (most recent call last):
    ...
    k2k.errors.ConfigError: --listen: not HOST:PORT, got 'localhost'; expected e.g. 127.0.0.1:9465
    """
    host, sep, port = value.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{option}: not HOST:PORT, got {value!r}; expected e.g. 127.0.0.1:9465")
    return host, int(port)


def always_ready() -> Health:
    """The readiness of a process that has no source for it: ready, saying so."""
    return Health(True, "no readiness source")


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """One daemon thread per request: a slow client never holds up a scrape, and open
    connections never keep the process from exiting."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("http: error serving %s", client_address, exc_info=True)


def _server_class(host: str, port: int) -> tuple[type[_ThreadingServer], str]:
    """The server class for the address family ``host`` resolves to (IPv6 hosts too)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]

    class Server(_ThreadingServer):
        address_family = family

    return Server, str(sockaddr[0])


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class StatusServer:
    """Binds ``host:port`` at once (an :class:`OSError` such as "address in use"
    propagates, for the caller's one-line error) and serves until :meth:`close`.

    ``health`` and ``status`` may be replaced later with :meth:`attach`: the process that
    starts the server may learn its readiness only once its pipeline runs.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        metrics_app: WSGIApp | None,
        health: Callable[[], Health] = always_ready,
        status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._metrics_app = metrics_app
        self.health = health
        self.status = status
        cls, bind_host = _server_class(host, port)
        self._httpd = make_server(
            bind_host, port, self._app, server_class=cls, handler_class=_QuietHandler
        )
        self.address: tuple[str, int] = (host, self._httpd.server_port)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="k2k-http", daemon=True
        )
        self._thread.start()

    def attach(
        self,
        *,
        health: Callable[[], Health] | None = None,
        status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        """Replace the readiness and/or status source (None keeps the current one)."""
        if health is not None:
            self.health = health
        if status is not None:
            self.status = status

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/metrics":
            if self._metrics_app is None:
                return _reply(start_response, 404, "text/plain", b"no metrics in this process\n")
            return self._metrics_app(environ, start_response)
        if method != "GET":
            return _reply(start_response, 405, "text/plain", b"use GET\n", [("Allow", "GET")])
        if path == "/healthz":
            return _reply(start_response, 200, "text/plain", b"ok\n")
        if path == "/readyz":
            return self._readyz(start_response)
        if path == "/api/status":
            return self._api_status(start_response)
        if path in ("/", "/index.html"):
            return _static(start_response, "index.html")
        if path.startswith("/static/") and path[len("/static/") :] in STATIC_FILES:
            return _static(start_response, path[len("/static/") :])
        return _reply(start_response, 404, "text/plain", b"not found\n")

    def _readyz(self, start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            health = self.health()
        except Exception as exc:  # a readiness source that fails means not ready, not a 500
            health = Health(False, f"readiness check failed: {exc}")
        code, word = (200, "ready") if health.ready else (503, "not ready")
        return _reply(start_response, code, "text/plain", f"{word}: {health.reason}\n".encode())

    def _api_status(self, start_response: Callable[..., Any]) -> Iterable[bytes]:
        status = self.status
        if status is None:
            return _reply(start_response, 404, "text/plain", b"no status source\n")
        try:
            body = json.dumps(status(), separators=(",", ":"), default=str).encode()
        except Exception as exc:  # shown on the page as an error, never a dropped connection
            log.warning("http: /api/status: %s", exc)
            body = json.dumps({"v": 1, "error": f"{type(exc).__name__}: {exc}"}).encode()
            return _reply(start_response, 500, "application/json", body)
        return _reply(start_response, 200, "application/json", body)


_REASONS = {
    200: "OK",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Error",
    503: "Unavailable",
}


def _reply(
    start_response: Callable[..., Any],
    code: int,
    content_type: str,
    body: bytes,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
        *(extra or []),
    ]
    start_response(f"{code} {_REASONS[code]}", headers)
    return [body]


def _static(start_response: Callable[..., Any], name: str) -> list[bytes]:
    """One vendored file from the package (read per request: they are small and rarely
    asked for, and an installed wheel may be a zip)."""
    body = resources.files(__package__).joinpath("static", name).read_bytes()
    return _reply(start_response, 200, STATIC_FILES[name], body)
