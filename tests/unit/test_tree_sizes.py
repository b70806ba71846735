"""Modules and functions small enough to read: a module has one reason to change and fits in
a sitting, a function fits on a screen or two."""

import ast
from pathlib import Path

import k2k

SRC = Path(k2k.__file__).parent

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_no_module_is_over_the_limit():
    long = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_no_function_is_over_the_limit():
    long = {
        f"{path.relative_to(SRC)}:{node.name}": length
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, long
