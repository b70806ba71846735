"""The CLI's error boundary, shared by every command (``k2k ...`` and ``k2k local ...``).

A :class:`k2k.errors.K2KError` becomes ``error: <message>`` on stderr and exit 1; a
:class:`k2k.errors.ConfigError` prints each problem on its own line and exits 2 (the exit
code click uses for usage errors). ``--debug`` re-raises, to see the traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from k2k.errors import ConfigError, K2KError

__all__ = ["EXIT_CONFIG", "EXIT_FAILURE", "one_line_errors"]

EXIT_FAILURE = 1
EXIT_CONFIG = 2


def one_line_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click command: adds ``--debug`` and turns k2k errors into one-line exits."""

    @click.option("--debug", is_flag=True, help="Show the Python traceback on errors.")
    @wraps(command)
    def wrapper(*args: Any, debug: bool, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ConfigError as exc:
            if debug:
                raise
            for problem in exc.problems:
                click.echo(f"error: {problem}", err=True)
            sys.exit(EXIT_CONFIG)
        except K2KError as exc:
            if debug:
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_FAILURE)

    return wrapper
