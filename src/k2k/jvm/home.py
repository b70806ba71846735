"""Where k2k keeps what it downloads or builds once per machine (``$K2K_HOME``)."""

from __future__ import annotations

import os
from pathlib import Path


def k2k_home() -> Path:
    """Return k2k's own cache directory: ``$K2K_HOME``, else ``~/.cache/k2k``.

    Read at call time, not import time, so tests and users can point it elsewhere per process.
    """
    return Path(os.environ.get("K2K_HOME") or "~/.cache/k2k").expanduser()
