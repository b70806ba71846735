"""``python -m k2k.local up|down|status``: the ``k2k local`` commands without the main CLI.

Useful before k2k is installed as a command (e.g. in CI with ``PYTHONPATH=src``).
"""

from k2k.local.cli import local

if __name__ == "__main__":
    local(prog_name="python -m k2k.local")
