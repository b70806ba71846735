"""The package layering of docs/architecture.md: imports point down only.

Runtime imports count; imports under ``if TYPE_CHECKING:`` (annotations only) do not.
"""

import ast
from pathlib import Path

import pytest

import k2k

SRC = Path(k2k.__file__).parent

#: package -> the k2k packages it may import at run time (besides itself).
ALLOWED = {
    "errors": set(),
    "home": set(),
    "redact": set(),
    "formats": {"errors"},
    "stages": set(),
    "kafka": {"errors"},
    "config": {"errors", "redact", "stages", "kafka"},
    "coordination": {"errors", "formats", "kafka"},
    "observability": {"errors", "kafka", "coordination"},
    "offsetmapping": {"errors", "formats", "kafka", "coordination"},
    "controltopics": {"errors", "config", "kafka", "coordination"},
    # Schema mapping: the registry client and the per-topic transform the runners apply.
    "schemamapping": {"errors", "redact", "config"},
    # Below the pipeline: runners feed it through the observer, the planner through stats.
    "metrics": {"errors", "formats", "kafka", "config", "controltopics"},
    "admin": {"errors", "formats", "stages", "config", "kafka", "coordination", "controltopics"},
    # The Python API sits under the command line, which calls it: never the other way.
    "api": {
        "errors",
        "formats",
        "stages",
        "config",
        "kafka",
        "coordination",
        "controltopics",
        "metrics",
        "observability",
        "admin",
        "pipeline",
        "verify",
    },
}


def _runtime_imports(tree: ast.Module) -> set[str]:
    """Top-level k2k packages imported outside ``if TYPE_CHECKING:`` blocks."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            for sub in ast.walk(node):
                names = []
                if isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                    names = [sub.module]
                elif isinstance(sub, ast.Import):
                    names = [a.name for a in sub.names]
                found.update(
                    n.split(".")[1] for n in names if n.startswith("k2k.") and n.count(".")
                )

    visit(tree.body)
    return found


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package):
    files = [SRC / f"{package}.py"] if (SRC / f"{package}.py").exists() else []
    files += sorted((SRC / package).rglob("*.py")) if (SRC / package).is_dir() else []
    assert files, package
    wrong = {
        f"{path.relative_to(SRC)} imports k2k.{name}"
        for path in files
        for name in _runtime_imports(ast.parse(path.read_text()))
        if name != _package_of(path) and name not in ALLOWED[package]
    }
    assert not wrong, sorted(wrong)


def test_coordination_never_imports_the_pipeline():
    for path in (SRC / "coordination").rglob("*.py"):
        assert "pipeline" not in _runtime_imports(ast.parse(path.read_text())), path
