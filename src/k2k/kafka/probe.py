"""Socket-level probes of one bootstrap address: name resolution, TCP, TLS, a Kafka request.

They answer what librdkafka's own errors blur (an unreachable cluster, a TLS handshake that
"failed", a plaintext client talking to a TLS listener) with Python's ``socket`` and ``ssl``
modules and the configured client settings (librdkafka names, as translated by the config
model). Used by :mod:`k2k.kafka.diagnose`; none of them writes anything to a cluster.

Each probe returns ``None`` when the step passed, else a :class:`Failure` (what happened, and
what to fix). Secrets (key passwords, PEM keys) are read from the settings, never echoed.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "Failure",
    "kafka_answers",
    "parse_bootstrap",
    "resolve",
    "tcp_connect",
    "tls_context",
    "tls_handshake",
    "uses_sasl",
    "uses_tls",
]

#: ApiVersions (key 18) version 0 with correlation id 0x6b326b (``k2k``): every Kafka
#: listener answers it before authentication, in plaintext or inside TLS.
_CORRELATION_ID = 0x6B326B
_CLIENT_ID = b"k2k-diagnose"
_API_VERSIONS = struct.pack(">hhih", 18, 0, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
_API_VERSIONS_REQUEST = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS


@dataclass(frozen=True)
class Failure:
    """A failed step: ``what`` happened, and the operator's ``fix``."""

    what: str
    fix: str


def uses_tls(conf: Mapping[str, str]) -> bool:
    """Whether ``security.protocol`` is SSL or SASL_SSL.

    >>> uses_tls({"security.protocol": "sasl_ssl"}), uses_tls({})
    (True, False)
    """
    return conf.get("security.protocol", "plaintext").lower() in ("ssl", "sasl_ssl")


def uses_sasl(conf: Mapping[str, str]) -> bool:
    """Whether ``security.protocol`` is SASL_PLAINTEXT or SASL_SSL."""
    return conf.get("security.protocol", "plaintext").lower().startswith("sasl_")


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port`` pairs of ``bootstrap.servers`` (the config model checked the syntax).

    >>> parse_bootstrap("a:9092, SSL://b:9093,[::1]:9094")
    [('a', 9092), ('b', 9093), ('::1', 9094)]
    """
    pairs = []
    for item in filter(None, (s.strip() for s in servers.split(","))):
        address = item.split("://", 1)[-1]
        host, _, port = address.rpartition(":")
        pairs.append((host.strip("[]"), int(port)))
    return pairs


def resolve(host: str, port: int) -> list[str] | Failure:
    """The addresses ``host`` resolves to."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return Failure(
            f"{host!r} does not resolve ({exc.strerror})",
            "correct the host name, or the DNS / /etc/hosts of this machine",
        )
    return sorted({str(info[4][0]) for info in infos})


def tcp_connect(host: str, port: int, timeout_s: float) -> socket.socket | Failure:
    """An open TCP connection to ``host:port``."""
    try:
        return socket.create_connection((host, port), timeout=timeout_s)
    except ConnectionRefusedError:
        return Failure(
            f"{host}:{port} refused the connection",
            "check the port (a broker listener's) and that the brokers run",
        )
    except TimeoutError:
        return Failure(
            f"no answer from {host}:{port} within {timeout_s:g} s",
            "check firewalls and routes between this machine and the brokers",
        )
    except OSError as exc:
        return Failure(
            f"cannot connect to {host}:{port}: {exc.strerror or exc}", "check the network"
        )


def kafka_answers(sock: socket.socket) -> bool:
    """Whether the peer answers a Kafka ApiVersions request on ``sock`` (False when it closes
    the connection, times out, or answers something else, e.g. a TLS alert)."""
    try:
        sock.sendall(_API_VERSIONS_REQUEST)
        head = _read_exactly(sock, 8)
    except (OSError, ssl.SSLError):
        return False
    return head is not None and struct.unpack(">ii", head)[1] == _CORRELATION_ID


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def tls_context(conf: Mapping[str, str]) -> ssl.SSLContext | Failure:
    """An SSL context with the client's CA, client certificate and verification settings."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    verify = conf.get("enable.ssl.certificate.verification", "true").lower() != "false"
    identify = conf.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
    context.check_hostname = verify and identify
    context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    try:
        _load_trust(context, conf)
    except (OSError, ssl.SSLError) as exc:
        return Failure(
            f"cannot load the CA certificates: {_reason(exc)}",
            "check ssl.truststore.location (ssl.ca.location): a PEM file of CA certificates",
        )
    try:
        with _client_identity(conf) as identity:
            if identity is not None:
                context.load_cert_chain(*identity, password=conf.get("ssl.key.password"))
    except (OSError, ssl.SSLError) as exc:
        return Failure(
            f"cannot load the client certificate or key: {_reason(exc)}",
            "check ssl.keystore.* (ssl.certificate.location, ssl.key.location) and "
            "ssl.key.password",
        )
    return context


def _load_trust(context: ssl.SSLContext, conf: Mapping[str, str]) -> None:
    location, pem = conf.get("ssl.ca.location"), conf.get("ssl.ca.pem")
    if pem:
        context.load_verify_locations(cadata=pem)
    elif location and location != "probe":
        if os.path.isdir(location):
            context.load_verify_locations(capath=location)
        else:
            context.load_verify_locations(cafile=location)
    else:
        context.load_default_certs()


@contextmanager
def _client_identity(conf: Mapping[str, str]) -> Iterator[tuple[str, str | None] | None]:
    """(certificate file, key file) of the client, inline PEM written to a private temporary
    directory for the handshake's duration; None without a client certificate (a PKCS#12
    keystore is left to librdkafka's step)."""
    cert, key = conf.get("ssl.certificate.location"), conf.get("ssl.key.location")
    cert_pem, key_pem = conf.get("ssl.certificate.pem"), conf.get("ssl.key.pem")
    if cert:
        yield cert, key
    elif cert_pem:
        with tempfile.TemporaryDirectory(prefix="k2k-tls-") as directory:
            cert_file = os.path.join(directory, "cert.pem")
            key_file = os.path.join(directory, "key.pem") if key_pem else None
            _write_private(cert_file, cert_pem)
            if key_file is not None and key_pem is not None:
                _write_private(key_file, key_pem)
            yield cert_file, key_file
    else:
        yield None


def _write_private(path: str, text: str) -> None:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)


def tls_handshake(context: ssl.SSLContext, host: str, port: int, timeout_s: float) -> str | Failure:
    """A TLS handshake with ``host:port`` and one Kafka request inside it (a broker that
    refuses the client's certificate says so after a TLS 1.3 handshake); returns the
    negotiated TLS version."""
    sock = tcp_connect(host, port, timeout_s)
    if isinstance(sock, Failure):
        return sock
    try:
        with context.wrap_socket(sock, server_hostname=host) as tls:
            version = tls.version() or "TLS"
            tls.sendall(_API_VERSIONS_REQUEST)
            if _read_exactly(tls, 8) is None:
                raise ssl.SSLEOFError("the broker closed the connection after the handshake")
            return version
    except ssl.SSLCertVerificationError as exc:
        return _verification_failure(exc)
    except ssl.SSLError as exc:
        return _handshake_failure(host, port, timeout_s, _reason(exc))
    except OSError as exc:  # reset or EOF before any TLS answer
        return _handshake_failure(host, port, timeout_s, exc.strerror or str(exc))
    finally:
        sock.close()


def _verification_failure(exc: ssl.SSLCertVerificationError) -> Failure:
    message = exc.verify_message or _reason(exc)
    if "hostname" in message.lower() or "ip address mismatch" in message.lower():
        fix = (
            "use a bootstrap host name the broker certificate names (SAN), or set "
            "ssl.endpoint.identification.algorithm to none (not recommended)"
        )
    else:
        fix = (
            "set ssl.truststore.location (ssl.ca.location) to the CA certificates that "
            "signed the brokers' certificates"
        )
    return Failure(f"the broker's certificate is not trusted: {message}", fix)


def _handshake_failure(host: str, port: int, timeout_s: float, reason: str) -> Failure:
    if "certificate" in reason.lower() and "alert" in reason.lower():
        return Failure(
            f"the broker refused this client's certificate ({reason})",
            "the listener requires a client certificate it trusts: check ssl.keystore.* "
            "(or ssl.certificate.location and ssl.key.location)",
        )
    if _speaks_plaintext(host, port, timeout_s):
        return Failure(
            f"{host}:{port} is a plaintext listener (it answers Kafka requests without TLS)",
            "use the port of the TLS listener, or set security.protocol to PLAINTEXT or "
            "SASL_PLAINTEXT",
        )
    return Failure(f"TLS handshake with {host}:{port} failed: {reason}", "check ssl.* settings")


def _speaks_plaintext(host: str, port: int, timeout_s: float) -> bool:
    sock = tcp_connect(host, port, timeout_s)
    if isinstance(sock, Failure):
        return False
    with sock:
        return kafka_answers(sock)


def _reason(exc: BaseException) -> str:
    """The words of an ``ssl``/OS error (``strerror`` holds OpenSSL's, e.g. ``[SSL: ...]``)."""
    return getattr(exc, "strerror", None) or str(exc)
