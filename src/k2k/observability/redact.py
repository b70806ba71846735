"""URLs fit for messages: the user info (``user:password@``) never shows.

Standard library only: executors use it (the registry client's messages) as well as the
driver's config validation, and executors do not import the config package.
"""

from __future__ import annotations

import re

__all__ = ["url_without_user"]

#: An optional scheme, then everything up to the last "@": a password may hold "/", ":" or
#: even "://", which would fool a URL parser.
_USER = re.compile(r"^([A-Za-z][\w+.-]*://)?.*@")


def url_without_user(url: str, mark: str = "") -> str:
    """``url`` with whatever precedes its last ``@`` (after any scheme) replaced by ``mark``.

    >>> url_without_user("https://u:p/w@sr:8081/apis"), url_without_user("http://sr:8081")
    ('https://sr:8081/apis', 'http://sr:8081')
    >>> url_without_user("u:pw@sr", mark="******@")
    '******@sr'
    """
    return _USER.sub(lambda m: f"{m.group(1) or ''}{mark}", url, count=1)
