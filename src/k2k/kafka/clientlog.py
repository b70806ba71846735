"""librdkafka's own log lines, through Python logging at levels an operator can use.

Without a ``logger`` setting librdkafka writes its lines to stderr itself, and during an
outage every client prints a connection failure per broker several times a second (3,526
lines in 2.5 minutes of a target outage, from the driver's clients and every runner's).
The factory gives every client :data:`CLIENT_LOG` instead (confluent-kafka's ``logger``
setting: the lines are served by the client's own poll/consume calls, in the calling
thread). They go to the ``k2k.librdkafka`` logger, at a level chosen by :func:`level_for`:

* connection failures (facility ``FAIL``: refused, lost, not resolved, TLS or SASL
  handshake failed) go to DEBUG: ``k2k start`` reports an unreachable cluster itself, once,
  then every 30 s, then when it is back (:mod:`k2k.observability.reachability`);
* notices of something librdkafka retries by itself go to INFO;
* the notice that ``enable.gapless.guarantee`` is experimental goes to DEBUG: k2k forces that
  setting (see ``k2k.kafka.factory.PRODUCER_FORCED``), users can do nothing about it;
* everything else keeps librdkafka's level.

The CLI keeps ``k2k.librdkafka`` at WARNING unless asked for more (``-vv``). No line carries
client settings, so no secret reaches the log.
"""

from __future__ import annotations

import logging

__all__ = ["CLIENT_LOG", "ClientLog", "level_for"]

LOGGER = logging.getLogger("k2k.librdkafka")

#: librdkafka's facility for a broker connection that failed or was lost.
_CONNECTION_FAILED = "FAIL"
_RETRIED = ("retrying", "will retry")
_K2K_FORCED = "enable.gapless.guarantee is experimental"


def level_for(level: int, facility: str, text: str) -> int:
    """The level one librdkafka line is logged at (``level``: librdkafka's, as a Python
    logging level).

    >>> level_for(logging.ERROR, "FAIL", "Connect to ipv4#127.0.0.1:9092 failed: Connection refused")
    10
    >>> level_for(logging.WARNING, "GETPID", "Failed to acquire idempotence PID ...: retrying")
    20
    >>> level_for(logging.WARNING, "CONFWARN", "Configuration property x is ignored")
    30
    """
    if facility == _CONNECTION_FAILED or _K2K_FORCED in text:
        return logging.DEBUG
    if level > logging.INFO and text.rstrip().endswith(_RETRIED):
        return logging.INFO
    return level


class ClientLog:
    """confluent-kafka's ``logger``: any object with ``log(level, msg, *args)``; the client
    calls it as ``log(level, "%s [%s] %s", facility, client_name, text)``."""

    def log(self, level: int, msg: str, *args: object) -> None:
        facility, text = (str(args[0]), str(args[2])) if len(args) == 3 else ("", msg)
        chosen = level_for(level, facility, text)
        if LOGGER.isEnabledFor(chosen):
            LOGGER.log(chosen, msg, *args)


#: The one instance every client shares (it holds no state).
CLIENT_LOG = ClientLog()
