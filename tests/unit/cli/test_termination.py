"""The termination log's path rules and message limits (the CLI runs are in test_cli.py)."""

from __future__ import annotations

import click
import pytest

from k2k.cli import termination
from k2k.cli.termination import MAX_MESSAGE_BYTES, failure_reason, write_termination_log
from k2k.errors import TopicError


def test_default_path_is_used_only_when_the_file_exists(tmp_path, monkeypatch):
    default = tmp_path / "termination-log"
    monkeypatch.setattr(termination, "DEFAULT_TERMINATION_LOG", str(default))
    assert termination._log_path(None, True) is None  # nothing created where none is mounted
    default.write_text("")
    assert termination._log_path(None, True) == str(default)
    assert termination._log_path(None, False) is None


def test_an_explicit_path_may_be_new_but_its_directory_must_exist(tmp_path):
    assert termination._log_path(str(tmp_path / "new"), True) == str(tmp_path / "new")
    with pytest.raises(click.BadParameter, match="does not exist"):
        termination._log_path(str(tmp_path / "missing" / "log"), True)
    with pytest.raises(click.BadParameter, match="is a directory"):
        termination._log_path(str(tmp_path), True)


def test_reason_is_one_line_cut_to_the_kubernetes_limit(tmp_path):
    log = tmp_path / "log"
    write_termination_log(str(log), "é" * 5000)
    data = log.read_bytes()
    assert len(data) <= MAX_MESSAGE_BYTES and data.endswith(b"\n")
    assert data.decode("utf-8").rstrip("\n") == "é" * ((MAX_MESSAGE_BYTES - 1) // 2)


def test_reasons_are_the_messages_users_see():
    assert failure_reason(TopicError("target topic 'x' is missing")) == (
        "target topic 'x' is missing"
    )
    assert failure_reason(click.BadParameter("bad", param_hint="'-x'")) == (
        "Invalid value for '-x': bad"
    )
    assert failure_reason(KeyError("k")) == "KeyError: 'k'"
