"""Loopback ports for the embedded clusters: a free one from the OS, whether one is free, and
whether something listens on one yet."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable

__all__ = ["HOST", "accepts_connections", "free_port", "free_ports", "port_is_free"]

HOST = "127.0.0.1"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that the OS just reported free (bind to port 0).

    The port is released before returning, so another process could take it in between; for
    loopback test clusters that window is acceptable and far safer than random numbers.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, taken: Iterable[int] = ()) -> list[int]:
    """``count`` different free ports (see :func:`free_port`), none of them in ``taken``: the
    OS may hand back a port it reported a moment ago, since each is released at once."""
    avoid, ports = set(taken), list[int]()
    while len(ports) < count:
        port = free_port()
        if port not in avoid:
            avoid.add(port)
            ports.append(port)
    return ports


def port_is_free(port: int) -> bool:
    """Return True when a listener could bind ``127.0.0.1:port`` right now.

    Uses ``SO_REUSEADDR`` like the JVM does, so sockets lingering in TIME_WAIT after a broker
    stopped do not count as "in use", while any live listener (also on 0.0.0.0) does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def accepts_connections(port: int) -> bool:
    """Cheap TCP probe, so the Kafka client is only created once something listens."""
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False
