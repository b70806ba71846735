"""K2K's launch flags around the pipeline file: the template engine and the termination log.

Lenses K2K starts with ``k2k start -f FILE [-t] [-g enabled|disabled] [-l PATH]
[-w enabled|disabled]``; k2k reads the same flags so launch lines (container commands, Helm
values) work unchanged:

* ``-g/--template-engine`` (default ``enabled``): resolve ``${...}`` placeholders in the
  pipeline files (:mod:`k2k.config.placeholders`); ``disabled`` keeps them as written.
* ``-l/--termination-log PATH`` (default ``/dev/termination-log``) and
  ``-w/--termination-log-enabled`` (default ``enabled``): when the command fails, the one-line
  reason is written to PATH, the Kubernetes convention (``terminationMessagePath``) that shows
  it in ``kubectl describe pod`` and the pod's status. A clean exit writes nothing. Without
  ``-l`` the default is used only when that file exists and is writable (Kubernetes mounts it
  into every container; elsewhere nothing is written, and nothing is ever created under
  ``/dev``). A PATH given with ``-l`` must be writable, checked before anything starts.

Part of the CLI's error boundary (with :mod:`k2k.cli.errorboundary`, which prints the same reason):
:func:`termination_log` sits between it and the command, so it sees the error first, writes it
and lets it through unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from k2k.errors import K2KError

__all__ = [
    "DEFAULT_TERMINATION_LOG",
    "MAX_MESSAGE_BYTES",
    "TEMPLATE_ENGINE",
    "failure_reason",
    "termination_log",
    "write_termination_log",
]

DEFAULT_TERMINATION_LOG = "/dev/termination-log"
#: Kubernetes keeps at most 4096 bytes of a container's termination message.
MAX_MESSAGE_BYTES = 4096


class _Switch(click.ParamType):
    """K2K's ``enabled`` / ``disabled`` flag values (any case) as a bool."""

    name = "enabled|disabled"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("enabled", "disabled"):
            return text == "enabled"
        self.fail(f"{value!r}; expected enabled or disabled", param, ctx)


TEMPLATE_ENGINE = click.option(
    "-g",
    "--template-engine",
    "template_engine",
    type=_Switch(),
    default="enabled",
    show_default=True,
    metavar="enabled|disabled",
    help="Resolve ${loader:mapper:...:NAME} placeholders in the pipeline files (K2K's template "
    "engine: env/file loaders, base64/number/raw/string mappers; see docs/config.md); "
    "disabled keeps every ${...} as written.",
)


def failure_reason(exc: BaseException) -> str:
    """The one line that explains a failure: the message users see on stderr.

    >>> from k2k.errors import ConfigError
    >>> failure_reason(ConfigError(["a: bad", "b: worse"]))
    'a: bad; b: worse'
    >>> failure_reason(RuntimeError("boom\\nsecond line"))
    'RuntimeError: boom second line'
    """
    if isinstance(exc, click.ClickException):
        text = exc.format_message()
    elif isinstance(exc, K2KError):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def write_termination_log(path: str, reason: str) -> None:
    """Write ``reason`` (cut to :data:`MAX_MESSAGE_BYTES`) and a newline to ``path``; a
    failure to write is reported on stderr, never raised (the real error goes on)."""
    data = reason.encode("utf-8")[: MAX_MESSAGE_BYTES - 1].decode("utf-8", "ignore") + "\n"
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(data)
    except OSError as exc:
        click.echo(
            f"warning: cannot write the termination log {path} ({exc.strerror or exc})", err=True
        )


def _writable(path: str) -> str | None:
    """Why ``path`` cannot be written, or None."""
    if os.path.isdir(path):
        return "it is a directory"
    if os.path.exists(path):
        return None if os.access(path, os.W_OK) else "permission denied"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"directory {parent} does not exist"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"directory {parent} is not writable"


def _log_path(path: str | None, enabled: bool) -> str | None:
    """Where to write the reason of a failure, or None (see the module doc)."""
    if not enabled:
        return None
    if path is None:
        default = DEFAULT_TERMINATION_LOG
        return default if os.path.isfile(default) and os.access(default, os.W_OK) else None
    problem = _writable(path)
    if problem is not None:
        raise click.BadParameter(
            f"cannot write {path!r} ({problem}); expected a writable file path, or -w disabled",
            param_hint="'-l' / '--termination-log'",
        )
    return path


def termination_log(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click command (below :func:`k2k.cli.errorboundary.one_line_errors`): adds
    ``-l/--termination-log`` and ``-w/--termination-log-enabled`` and writes the reason of a
    failure there before the error goes on to the boundary."""

    @click.option(
        "-l",
        "--termination-log",
        "termination_log_path",
        metavar="PATH",
        help=f"Where the one-line reason of a failure is written (Kubernetes termination "
        f"message). Default: {DEFAULT_TERMINATION_LOG} when that file exists and is writable.",
    )
    @click.option(
        "-w",
        "--termination-log-enabled",
        "termination_log_enabled",
        type=_Switch(),
        default="enabled",
        show_default=True,
        metavar="enabled|disabled",
        help="Write the termination log (-l) on failure, or not.",
    )
    @wraps(command)
    def wrapper(
        *args: Any, termination_log_path: str | None, termination_log_enabled: bool, **kw: Any
    ) -> Any:
        path = _log_path(termination_log_path, termination_log_enabled)
        try:
            return command(*args, **kw)
        except click.exceptions.Exit:
            raise  # an exit the command chose, not a failure with a reason
        except Exception as exc:  # the CLI boundary: noted here, re-raised unchanged
            if path is not None:
                write_termination_log(path, failure_reason(exc))
            raise

    return wrapper
