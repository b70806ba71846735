"""The package layering of docs/architecture.md: imports point down only, a Spark task never
reaches into the driver, and only the command line talks to a terminal.

Runtime imports count; imports under ``if TYPE_CHECKING:`` (annotations only) do not.
"""

import ast
from pathlib import Path

import pytest

import k2k

SRC = Path(k2k.__file__).parent

#: What the package root may hold: everything else lives in a package that says what it is.
ROOT_MODULES = {"__init__.py", "__main__.py", "api.py", "errors.py"}

#: package -> the k2k packages it may import at run time (besides itself).
ALLOWED = {
    "errors": set(),
    "jvm": set(),
    "stages": set(),
    "formats": {"errors"},
    "kafka": {"errors"},
    "observability": {"errors"},
    "config": {"errors", "observability", "stages", "kafka"},
    # The control topics' set-up reads the pipeline's config; the clients below it do not.
    "coordination": {"errors", "formats", "kafka", "config"},
    "offsetmapping": {"errors", "formats", "kafka", "coordination"},
    # Schema mapping: the registry client and the per-topic transform the runners apply.
    "schemamapping": {"errors", "observability", "config"},
    # Record transforms: compiled from the config, applied by the runners (and by verify).
    "transforms": {"errors", "config"},
    # Below the pipeline: runners feed it through the observer, the planner through stats.
    # Its Prometheus exporter is served by observability's HTTP server (probes, status page).
    "metrics": {"errors", "formats", "kafka", "config", "coordination", "observability"},
    "admin": {"errors", "formats", "stages", "config", "kafka", "coordination"},
    # The daemon preloads the task runner for the workers it forks (SPARK_DAEMON below).
    "spark": {"jvm"},
    "local": {"errors", "kafka", "jvm"},
    "pipeline": {
        "errors",
        "formats",
        "stages",
        "kafka",
        "config",
        "coordination",
        "observability",
        "metrics",
        "offsetmapping",
        "schemamapping",
        "transforms",
        "spark",
    },
    "verify": {
        "errors",
        "formats",
        "stages",
        "kafka",
        "config",
        "admin",
        "schemamapping",
        "transforms",
        "spark",
        "pipeline",
    },
    # Cut-over: tool side; it copies up to the cut with the planner when no member runs.
    "migration": {
        "errors",
        "formats",
        "kafka",
        "config",
        "coordination",
        "offsetmapping",
        "admin",
        "pipeline",
    },
    # The Python API sits under the command line, which calls it: never the other way.
    "api": {
        "errors",
        "formats",
        "stages",
        "config",
        "kafka",
        "coordination",
        "metrics",
        "observability",
        "admin",
        "pipeline",
        "verify",
    },
}

#: The one module of ``spark/`` that imports the pipeline: Spark's Python daemon, which
#: imports the task runner once so that every worker it forks starts with it loaded.
SPARK_DAEMON = "spark/daemon.py"


def _runtime_imports(tree: ast.Module) -> set[str]:
    """Every k2k module imported outside ``if TYPE_CHECKING:`` blocks, as dotted names."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                    found.add(sub.module)
                elif isinstance(sub, ast.Import):
                    found.update(a.name for a in sub.names)

    visit(tree.body)
    return {name for name in found if name.startswith("k2k.")}


def _imports_of(path: Path) -> set[str]:
    return _runtime_imports(ast.parse(path.read_text()))


def _packages_imported(path: Path) -> set[str]:
    return {name.split(".")[1] for name in _imports_of(path)}


def _files(*parts: str) -> list[Path]:
    place = SRC.joinpath(*parts)
    return sorted(place.rglob("*.py")) if place.is_dir() else [place]


def test_package_root_holds_only_the_entry_points():
    assert {p.name for p in SRC.glob("*.py")} == ROOT_MODULES


def test_every_package_has_a_rule():
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(ALLOWED) - {"errors", "api"} | {"cli"}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package):
    files = [SRC / f"{package}.py"] if (SRC / f"{package}.py").exists() else []
    files += _files(package) if (SRC / package).is_dir() else []
    assert files, package
    wrong = {
        f"{path.relative_to(SRC)} imports k2k.{name}"
        for path in files
        if str(path.relative_to(SRC)) != SPARK_DAEMON
        for name in _packages_imported(path)
        if name != package and name not in ALLOWED[package]
    }
    assert not wrong, sorted(wrong)


def test_spark_daemon_imports_only_the_task_runner_from_the_pipeline():
    pipeline = {n for n in _imports_of(SRC / SPARK_DAEMON) if n.startswith("k2k.pipeline")}
    assert pipeline == {"k2k.pipeline.task.runner"}


def test_nothing_below_the_command_line_imports_it():
    wrong = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).parts[0] not in {"cli", "__main__.py"}
        and "cli" in _packages_imported(path)
    ]
    assert not wrong


@pytest.mark.parametrize("boundary", ["pipeline/task", "pipeline/plan.py", "pipeline/channel.py"])
def test_a_task_module_never_imports_a_driver_module(boundary):
    """Code shipped to executors, and the types it shares with the driver, stay clear of the
    driver's modules (planner, leases, services): they are neither needed nor picklable there."""
    wrong = {
        f"{path.relative_to(SRC)} imports {name}"
        for path in _files(*boundary.split("/"))
        for name in _imports_of(path)
        if name.startswith("k2k.pipeline.driver")
    }
    assert not wrong, sorted(wrong)


@pytest.mark.parametrize("package", ["coordination", "formats"])
def test_control_topic_layers_never_import_the_pipeline(package):
    for path in _files(package):
        assert "pipeline" not in _packages_imported(path), path


#: Calls that talk to a terminal or end the process.
_TERMINAL_CALLS = {"print", "exit", "echo", "secho"}
#: Modules allowed to print outside ``cli/``: the config reference generator, run as a script.
_PRINTS_ELSEWHERE = {"config/reference.py"}


def _terminal_calls(path: Path) -> set[str]:
    calls = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.split(".")[-1] in _TERMINAL_CALLS and name.split(".")[0] in {
                "print",
                "sys",
                "click",
            }:
                calls.add(name)
        elif isinstance(node, ast.Raise) and ast.unparse(node.exc or node).startswith("SystemExit"):
            calls.add("raise SystemExit")
    return calls


def test_only_the_command_line_prints_or_exits():
    wrong = {
        f"{path.relative_to(SRC)}: {sorted(calls)}"
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).parts[0] not in {"cli", "__main__.py"}
        and str(path.relative_to(SRC)) not in _PRINTS_ELSEWHERE
        and (calls := _terminal_calls(path))
    }
    assert not wrong, sorted(wrong)


#: ``k2k verify``'s modules that run inside Spark tasks, and what they must not reach: the
#: driver's planning (job, slicing), the config model and the pipeline's driver.
VERIFY_TASK_MODULES = [
    "verify/task.py",
    "verify/reading.py",
    "verify/align.py",
    "verify/schemas.py",
]
VERIFY_DRIVER_ONLY = (
    "k2k.verify.job",
    "k2k.verify.slicing",
    "k2k.verify.report",
    "k2k.verify.progress",
    "k2k.config",
    "k2k.pipeline.driver",
)


def test_verify_uses_the_pipeline_only_through_its_boundary():
    """``k2k verify`` runs its own Spark job; it shares the lease channel, not the planner."""
    wrong = {
        f"{path.relative_to(SRC)} imports {name}"
        for path in _files("verify")
        for name in _imports_of(path)
        if name.startswith("k2k.pipeline.") and name != "k2k.pipeline.channel"
    }
    assert not wrong, sorted(wrong)


@pytest.mark.parametrize("module", VERIFY_TASK_MODULES)
def test_a_verify_task_module_never_imports_the_driver(module):
    wrong = {n for n in _imports_of(SRC / module) if n.startswith(VERIFY_DRIVER_ONLY)}
    assert not wrong, sorted(wrong)
