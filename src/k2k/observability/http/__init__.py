"""The HTTP side of observability: one server for ``/metrics``, the health probes and the
live status page, and the feed behind the page's ``/api/status``."""
