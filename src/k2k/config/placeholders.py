"""K2K's template engine: ``${loader:mapper:...:NAME}`` placeholders in the pipeline file.

Secrets should not live in the pipeline file: users keep them in the environment or in files
mounted by their orchestrator, and point at them. Placeholders are resolved once, at load time,
after the files are merged (so an overlay may introduce or override them) and before the model
is validated (so a resolved value is checked like a literal one). ``k2k start -g disabled``
turns the engine off: every ``${...}`` (and ``$${``) is then kept as written.

A placeholder is ``${[loader:][mapper:...]NAME}``, as in Lenses K2K:

* **loader** (optional, default ``env``): ``env`` reads environment variable ``NAME`` (an unset
  variable is an error: an empty password silently sent to a broker is worse than a refusal to
  start); ``file`` reads the file at path ``NAME`` as UTF-8 text, one trailing newline removed
  (editors add one); a relative path starts at the current directory.
* **mappers** (optional, applied left to right): ``base64`` decodes Base64 (standard alphabet;
  whitespace and missing padding are tolerated) to UTF-8 text; ``number`` makes the value a
  number (an integer when it has no fraction or exponent) where the placeholder is the whole
  value, for keys that want numbers; ``string`` and ``raw`` insert the text exactly as it is.
  K2K substitutes text into the YAML before parsing it, where ``string`` quotes and ``raw``
  does not; k2k resolves after parsing, inside values, so both give the exact text and the
  YAML around the placeholder decides the rest.
* ``$${`` writes a literal ``${``.

A leading word is a loader or mapper only when a name follows it: ``${env:string}`` reads
variable ``string``. Errors name the placeholder, never the value (it may be secret).

>>> resolve_text("user=${env:USER_NAME}", {"USER_NAME": "alice"})
'user=alice'
>>> resolve_text("${env:base64:JAAS}", {"JAAS": "amFhcyBsaW5l"})
'jaas line'
>>> resolve_text("${number:PORT}", {"PORT": "9092"})
9092
>>> resolve_text("$${env:USER_NAME}", {})
'${env:USER_NAME}'
>>> resolve_text("${env:MISSING}", {})
Traceback (most recent call last):
    ...
k2k.config.placeholders.PlaceholderError: environment variable 'MISSING' is not set
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOADERS", "MAPPERS", "Placeholder", "PlaceholderError", "resolve_text", "resolve_tree"]

LOADERS = ("env", "file")
MAPPERS = ("base64", "number", "raw", "string")

_PLACEHOLDER = re.compile(r"\$\$\{|\$\{(?P<body>[^}]*)\}")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SYNTAX = (
    "${[loader:][mapper:...]NAME} with loader env or file and mappers base64, number, raw, "
    "string, e.g. ${env:base64:SASL_JAAS}"
)
_ENV_EXPECTED = "the environment variable to be set where k2k runs"
_FILE_EXPECTED = "a readable UTF-8 file (a relative path starts at the current directory)"

Value = str | int | float


class PlaceholderError(ValueError):
    """One placeholder could not be resolved. ``placeholder`` is the ``${...}`` text and
    ``expected`` what would have worked.

    Internal to the loader, which turns it into a :class:`k2k.errors.ConfigError` line naming
    the key path; it never reaches users as an exception of its own.
    """

    def __init__(self, reason: str, placeholder: str = "", expected: str = _SYNTAX) -> None:
        super().__init__(reason)
        self.reason = reason
        self.placeholder = placeholder
        self.expected = expected


@dataclass(frozen=True)
class Placeholder:
    """One parsed ``${...}``.

    >>> Placeholder.parse("file:base64:raw:/run/secrets/jaas")
    Placeholder(loader='file', mappers=('base64', 'raw'), name='/run/secrets/jaas')
    >>> Placeholder.parse("string:JAAS"), Placeholder.parse("env:string")
    (Placeholder(loader='env', mappers=('string',), name='JAAS'), Placeholder(loader='env', mappers=(), name='string'))
    """

    loader: str
    mappers: tuple[str, ...]
    name: str

    @classmethod
    def parse(cls, body: str) -> Placeholder:
        """The placeholder whose text between the braces is ``body``."""
        parts = body.split(":")
        loader, i = "env", 0
        if len(parts) > 1 and parts[0] in LOADERS:
            loader, i = parts[0], 1
        mappers: list[str] = []
        while i < len(parts) - 1 and parts[i] in MAPPERS:
            mappers.append(parts[i])
            i += 1
        name = ":".join(parts[i:])
        if loader == "env" and ":" in name:
            # No environment variable is named with a colon: a misspelt loader or mapper.
            raise PlaceholderError(f"unknown loader or mapper {parts[i]!r}")
        if not name:
            what = "environment variable" if loader == "env" else "file"
            raise PlaceholderError(f"the placeholder names no {what}")
        return cls(loader, tuple(mappers), name)

    def describe(self) -> str:
        """What the value is read from, for messages (never the value itself)."""
        return (
            f"environment variable {self.name!r}" if self.loader == "env" else f"file {self.name!r}"
        )


def _read_file(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlaceholderError(f"file {path!r} does not exist", expected=_FILE_EXPECTED) from None
    except UnicodeDecodeError:
        raise PlaceholderError(
            f"file {path!r} is not UTF-8 text", expected=_FILE_EXPECTED
        ) from None
    except OSError as exc:
        reason = f"file {path!r} cannot be read ({exc.strerror})"
        raise PlaceholderError(reason, expected=_FILE_EXPECTED) from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text.removesuffix("\n")


def _load(ph: Placeholder, env: Mapping[str, str], read_file: Callable[[str], str]) -> str:
    if ph.loader == "file":
        return read_file(ph.name)
    if ph.name not in env:
        raise PlaceholderError(
            f"environment variable {ph.name!r} is not set", expected=_ENV_EXPECTED
        )
    return env[ph.name]


def _base64(value: Value, ph: Placeholder) -> str:
    if not isinstance(value, str):
        raise PlaceholderError("base64 after number", expected="number as the last mapper")
    compact = "".join(value.split())
    try:
        raw = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):
        what = f"the value of {ph.describe()} is not valid Base64"
        raise PlaceholderError(what, expected="Base64 text (standard alphabet)") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        what = f"the value of {ph.describe()} decodes to bytes that are not UTF-8 text"
        raise PlaceholderError(what, expected="the Base64 encoding of UTF-8 text") from None


def _number(value: Value, ph: Placeholder) -> int | float:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text) and math.isfinite(number := float(text)):
        return number
    what = f"the value of {ph.describe()} is not a number"
    raise PlaceholderError(what, expected="an integer or a decimal number")


def _apply(mapper: str, value: Value, ph: Placeholder) -> Value:
    if mapper == "base64":
        return _base64(value, ph)
    if mapper == "number":
        return _number(value, ph)
    if mapper == "string":
        return str(value)
    return value  # raw


def _value(body: str, env: Mapping[str, str], read_file: Callable[[str], str]) -> Value:
    ph = Placeholder.parse(body)
    value: Value = _load(ph, env, read_file)
    for mapper in ph.mappers:
        value = _apply(mapper, value, ph)
    return value


def resolve_text(
    text: str, env: Mapping[str, str], read_file: Callable[[str], str] = _read_file
) -> Value:
    """Replace every placeholder in ``text``; raise :class:`PlaceholderError` for the first bad
    one. A text that is one placeholder alone takes its value's type (``number`` gives a
    number); elsewhere values are inserted as text.

    >>> resolve_text("${file:/x}", {}, read_file=lambda p: "from " + p)
    'from /x'
    >>> resolve_text("port ${env:number:P}", {"P": "1"})
    'port 1'
    >>> resolve_text("${env:}", {})
    Traceback (most recent call last):
        ...
    k2k.config.placeholders.PlaceholderError: the placeholder names no environment variable
    >>> resolve_text("${vault:x}", {})
    Traceback (most recent call last):
        ...
    k2k.config.placeholders.PlaceholderError: unknown loader or mapper 'vault'
    """
    whole = _PLACEHOLDER.fullmatch(text)
    if whole is not None and whole["body"] is not None:
        return _guarded(whole, env, read_file)

    def replace(match: re.Match[str]) -> str:
        return "${" if match["body"] is None else str(_guarded(match, env, read_file))

    return _PLACEHOLDER.sub(replace, text)


def _guarded(
    match: re.Match[str], env: Mapping[str, str], read_file: Callable[[str], str]
) -> Value:
    try:
        return _value(match["body"], env, read_file)
    except PlaceholderError as exc:
        exc.placeholder = match[0]
        raise


def resolve_tree(
    data: Any, env: Mapping[str, str], path: tuple[str | int, ...] = ()
) -> tuple[Any, list[tuple[tuple[str | int, ...], PlaceholderError]]]:
    """Resolve placeholders in every string of a YAML tree (mapping values and list items).

    Returns the new tree (the input is not modified) and every failure with its key path, so
    the user sees all unresolved placeholders at once.

    >>> resolve_tree({"a": ["${env:X}", 1]}, {"X": "x"})
    ({'a': ['x', 1]}, [])
    >>> _, problems = resolve_tree({"a": {"b": "${env:NOPE}"}}, {})
    >>> [(path, str(err)) for path, err in problems]
    [(('a', 'b'), "environment variable 'NOPE' is not set")]
    """
    problems: list[tuple[tuple[str | int, ...], PlaceholderError]] = []
    if isinstance(data, str):
        try:
            return resolve_text(data, env), problems
        except PlaceholderError as exc:
            return data, [(path, exc)]
    if isinstance(data, Mapping):
        resolved: dict[Any, Any] = {}
        for key, value in data.items():
            resolved[key], found = resolve_tree(value, env, (*path, key))
            problems.extend(found)
        return resolved, problems
    if isinstance(data, list):
        items = []
        for index, value in enumerate(data):
            item, found = resolve_tree(value, env, (*path, index))
            items.append(item)
            problems.extend(found)
        return items, problems
    return data, problems
