"""Where the repository's own files are, wherever a test module sits in the tree."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (holds ``pyproject.toml``, ``docs/``, ``examples/``, ``bench/``).
REPO = Path(__file__).resolve().parents[2]
