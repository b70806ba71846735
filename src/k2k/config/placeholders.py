"""``${env:NAME}`` and ``${file:PATH}`` placeholders inside string values of the pipeline file.

Secrets should not live in the pipeline file: users keep them in the environment or in files
mounted by their orchestrator, and point at them. Placeholders are resolved once, at load time,
after the files are merged (so an overlay may introduce or override them) and before the model
is validated (so a resolved value is checked like a literal one).

* ``${env:NAME}`` is the value of environment variable ``NAME``; an unset variable is an error
  (an empty password silently sent to a broker is a worse outcome than a refusal to start).
* ``${file:PATH}`` is the file's UTF-8 content, with one trailing newline removed (editors add
  one). A relative ``PATH`` is relative to the current working directory.
* ``$${`` writes a literal ``${``. Other ``${...}`` text is left untouched.

>>> resolve_text("user=${env:USER_NAME}", {"USER_NAME": "alice"})
'user=alice'
>>> resolve_text("$${env:USER_NAME}", {})
'${env:USER_NAME}'
>>> resolve_text("${env:MISSING}", {})
Traceback (most recent call last):
    ...
k2k.config.placeholders.PlaceholderError: environment variable 'MISSING' is not set
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["PlaceholderError", "resolve_text", "resolve_tree"]

_PLACEHOLDER = re.compile(r"\$\$\{|\$\{(?P<kind>env|file):(?P<arg>[^}]*)\}")


class PlaceholderError(ValueError):
    """One placeholder could not be resolved. ``placeholder`` is the ``${...}`` text.

    Internal to the loader, which turns it into a :class:`k2k.errors.ConfigError` line naming
    the key path; it never reaches users as an exception of its own.
    """

    def __init__(self, reason: str, placeholder: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.placeholder = placeholder


def _read_file(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlaceholderError(f"file {path!r} does not exist") from None
    except UnicodeDecodeError:
        raise PlaceholderError(f"file {path!r} is not UTF-8 text") from None
    except OSError as exc:
        raise PlaceholderError(f"file {path!r} cannot be read ({exc.strerror})") from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text.removesuffix("\n")


def resolve_text(
    text: str, env: Mapping[str, str], read_file: Callable[[str], str] = _read_file
) -> str:
    """Replace every placeholder in ``text``; raise :class:`PlaceholderError` for the first bad one.

    >>> resolve_text("${file:/x}", {}, read_file=lambda p: "from " + p)
    'from /x'
    >>> resolve_text("${env:}", {})
    Traceback (most recent call last):
        ...
    k2k.config.placeholders.PlaceholderError: the placeholder names no environment variable
    """

    def replace(match: re.Match[str]) -> str:
        if match["kind"] is None:
            return "${"
        kind, arg, whole = match["kind"], match["arg"], match[0]
        try:
            if kind == "env":
                if not arg:
                    raise PlaceholderError("the placeholder names no environment variable")
                if arg not in env:
                    raise PlaceholderError(f"environment variable {arg!r} is not set")
                return env[arg]
            if not arg:
                raise PlaceholderError("the placeholder names no file")
            return read_file(arg)
        except PlaceholderError as exc:
            exc.placeholder = whole
            raise

    return _PLACEHOLDER.sub(replace, text)


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
