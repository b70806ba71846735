"""A broker's storage (``kraft/``, its ``log.dirs``): formatted on the first start, formatted
again after an interrupted format, and refused when it holds data without a valid
``meta.properties`` (a new format would put a new cluster id over old topics).

How to tell: a format writes only top-level files (``meta.properties``,
``bootstrap.checkpoint``), while a broker that ran keeps its metadata log and every topic
partition in subdirectories.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from k2k.errors import LocalClusterError
from k2k.local.launch import RunTool
from k2k.local.process import LOG_TAIL_LINES, NodeName
from k2k.local.settings import read_properties

__all__ = ["check_storage", "new_cluster_id", "prepare_storage", "stored_cluster_id"]


def check_storage(name: NodeName, log_dirs: Path) -> None:
    """Refuse storage that holds data but has no valid ``meta.properties``.

    Cheap (no JVM): ``k2k local up`` checks both clusters before starting either.

    :raises LocalClusterError: one line naming the file and the two ways out.
    """
    meta = log_dirs / "meta.properties"
    problem = _meta_properties_problem(meta)
    if problem is not None and _holds_data(log_dirs):
        raise LocalClusterError(
            f"the {name.noun}'s storage {log_dirs} holds data but its "
            f"meta.properties {problem}; restore {meta}, or delete {log_dirs} to "
            f"start this {_what(name)} empty (its {_lost(name)} are lost)"
        )


def prepare_storage(
    name: NodeName,
    log_dirs: Path,
    server_properties: Path,
    run_tool: RunTool,
    deadline: float,
    announce: Callable[[str], None],
    cluster_id: str | None = None,
) -> None:
    """Format ``log_dirs`` unless it holds a valid ``meta.properties`` (see
    :func:`check_storage`); storage without data is cleared and formatted again. The
    format must end by ``deadline`` (monotonic time). ``cluster_id``: the id the other nodes
    of the cluster were formatted with (every node of a cluster must share it); None makes
    a new one."""
    check_storage(name, log_dirs)
    problem = _meta_properties_problem(log_dirs / "meta.properties")
    if problem is None:
        return
    if log_dirs.exists():
        announce(
            f"{name.label}: meta.properties in {log_dirs} {problem} and the storage holds "
            "no data (an interrupted format); formatting it again"
        )
        shutil.rmtree(log_dirs)
    _format_storage(name, log_dirs, server_properties, run_tool, deadline, cluster_id)


def stored_cluster_id(log_dirs: Path) -> str | None:
    """The cluster id ``log_dirs`` was formatted with; None when it is not (validly) formatted."""
    if _meta_properties_problem(log_dirs / "meta.properties") is not None:
        return None
    return read_properties(log_dirs / "meta.properties")["cluster.id"]


def _format_storage(
    name: NodeName,
    log_dirs: Path,
    server_properties: Path,
    run_tool: RunTool,
    deadline: float,
    cluster_id: str | None,
) -> None:
    """Format with the cluster's id, or a fresh one (KRaft refuses to start on raw storage)."""
    try:
        done = run_tool(
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            cluster_id or new_cluster_id(),
            "--config",
            str(server_properties),
            timeout_s=max(deadline - time.monotonic(), 1.0),
        )
    except subprocess.TimeoutExpired as exc:
        raise LocalClusterError(
            f"formatting the storage of the {name.noun} in {log_dirs} timed out"
        ) from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()
        raise LocalClusterError(
            f"formatting the storage of the {name.noun} in {log_dirs} failed "
            f"(exit {done.returncode}): {' | '.join(output[-LOG_TAIL_LINES:])}"
        )


def _what(name: NodeName) -> str:
    """What deleting the storage starts empty: the cluster, or one broker of it."""
    return "cluster" if name.broker is None else "broker"


def _lost(name: NodeName) -> str:
    """What deleting the storage loses: the topics, or this broker's replicas of them."""
    return "topics" if name.broker is None else "replicas"


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid).

    Like Kafka's ``Uuid.randomUuid`` we avoid ids starting with "-", which a command line
    would read as an option.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _meta_properties_problem(path: Path) -> str | None:
    """What is wrong with a log dir's ``meta.properties`` ("is missing", ...), or None."""
    try:
        props = read_properties(path)
    except FileNotFoundError:
        return "is missing"
    except (OSError, ValueError) as exc:
        return f"cannot be read ({exc})"
    absent = [key for key in ("version", "cluster.id", "node.id") if not props.get(key)]
    return f"is incomplete (no {', '.join(absent)})" if absent else None


def _holds_data(log_dirs: Path) -> bool:
    """True if any non-empty file sits in a subdirectory of ``log_dirs``."""
    if not log_dirs.is_dir():
        return False
    for child in log_dirs.iterdir():
        if child.is_dir() and any(f.is_file() and f.stat().st_size for f in child.rglob("*")):
            return True
    return False
