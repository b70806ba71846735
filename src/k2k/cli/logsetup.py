"""Where the command line's log lines go, and how loud each part of k2k is."""

from __future__ import annotations

import logging
import sys

__all__ = ["setup_logging"]

#: Marks the handler :func:`setup_logging` installed, so a second call replaces only it.
_HANDLER_NAME = "k2k"


def setup_logging(verbosity: int, quiet: int = logging.WARNING) -> None:
    """Log to stderr: on a terminal through rich, above the live panel; else plain lines.

    ``quiet`` is k2k's level without ``-v``; each ``-v`` lowers it a step (to INFO, then
    DEBUG); one ``-v`` more than DEBUG needs adds librdkafka's own lines (every connection
    failure among them), kept at WARNING otherwise. Other libraries log their warnings.
    Spark's lines (``k2k.spark``) pass as they come: Spark filters them by its own level
    (``--spark-log-level``).
    """
    level = quiet - 10 * verbosity
    if sys.stderr.isatty():
        from k2k.observability.display import terminal_log_handler

        handler = terminal_log_handler()
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("k2k").setLevel(max(level, logging.DEBUG))
    logging.getLogger("k2k.librdkafka").setLevel(
        logging.DEBUG if level < logging.DEBUG else logging.WARNING
    )
    logging.getLogger("k2k.spark").setLevel(logging.DEBUG)
    logging.getLogger("py4j").setLevel(logging.ERROR)
