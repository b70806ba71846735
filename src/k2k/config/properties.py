"""Java ``.properties`` files, read as ``java.util.Properties.load`` reads them.

MM2's configuration is such a file: ``key = value`` or ``key: value`` or ``key value``,
``#``/``!`` comments, a trailing backslash continues a line, and backslash escapes (``\\\\``
is one backslash, ``\\t`` a tab, ``\\uXXXX`` a character, any other ``\\x`` is ``x``). The
escapes matter: a regex written ``.*\\\\.replica`` in the file is ``.*\\.replica``.
"""

from __future__ import annotations

__all__ = ["parse_list", "parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=: \t\f"


def _logical_lines(text: str) -> list[str]:
    """Physical lines joined where a line ends in an odd number of backslashes."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f") if pending is not None else raw
        if pending is None and line.lstrip(" \t\f").startswith(("#", "!")):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        body = line[:-1] if continued else line
        pending = body if pending is None else pending + body
        if not continued:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        escaped = text[i + 1]
        if escaped == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """The key (up to the first unescaped separator) and the value (separator and blanks
    around it removed), both still escaped."""
    line = line.lstrip(" \t\f")
    i = 0
    while i < len(line) and line[i] not in _SEPARATORS:
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """The properties of ``text`` (a later duplicate wins, as in Java)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        if not line.strip(" \t\f"):
            continue
        key, value = _split(line)
        props[_unescape(key)] = _unescape(value)
    return props


def parse_list(text: str) -> list[str]:
    """A list value (Connect's LIST type): comma-separated, blanks around items dropped,
    empty items too."""
    return [item.strip() for item in text.split(",") if item.strip()]
