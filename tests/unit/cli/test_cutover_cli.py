"""`k2k cutover` refuses bad input in one line (exit 2) before connecting anywhere."""

from __future__ import annotations

import pytest

from tests.unit.cli.test_cli import run, with_changes


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--quiet-period", "soon"],
            "error: --quiet-period: not a duration ('soon'); expected a duration such as 10s or 2m",
        ),
        (
            ["--timeout", "5"],
            "error: --timeout: a bare number has no unit ('5'); expected a "
            "duration such as 10s or 2m",
        ),
        (
            ["--groups", "app-("],
            "error: --groups: not a regular expression (missing ), "
            "unterminated subpattern at position 4): 'app-('",
        ),
    ],
)
def test_bad_flags(tmp_path, args, line):
    path = with_changes(tmp_path, lambda d: d.update(features={"offsetMapping": "enabled"}))
    result = run("cutover", "-f", str(path), *args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [line]


@pytest.mark.parametrize("command", [["cutover", "--dry-run"], ["offset-mapping", "report"]])
def test_offset_mapping_must_be_enabled(tmp_path, command):
    result = run(*command, "-f", str(with_changes(tmp_path, lambda d: None)))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: features.offsetMapping: disabled; expected enabled (a cut-over moves groups "
        "through the offset mappings the pipeline writes)"
    ]
