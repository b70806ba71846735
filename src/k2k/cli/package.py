"""``k2k package``: the executors' Python environment as one archive, for ``--archives``.

Runs on: the machine that submits (never on Spark). Builds a fresh virtualenv holding k2k
and its runtime dependencies at exactly the versions installed here, and packs it with
venv-pack (https://jcristharif.com/venv-pack/) into a ``.tar.gz`` that Spark unpacks next to
every executor::

    k2k package -o k2k-env.tar.gz
    spark-submit --archives k2k-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python ...

Steps:

1. create the virtualenv with ``python`` (default: the interpreter running k2k);
2. install k2k's runtime dependencies into it with pip, each pinned to the version installed
   here (their own dependencies constrained likewise), leaving out pyspark and py4j: Spark
   puts its own ``pyspark.zip`` on the executors' ``PYTHONPATH``, matching the cluster;
3. copy the k2k package itself (whatever way it is installed here, editable included);
4. pack the virtualenv.

Why venv-pack: k2k is a pip project, and a packed virtualenv is the format Spark's own
documentation describes for pip users. Its limit: the archive's ``bin/python`` links to the
base interpreter it was built with, so executors need that Python (same version, same
path) installed. Where they cannot have it, conda-pack (which ships the interpreter) or a
container image are the alternatives (docs/spark.md).
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

import k2k
from k2k.cli.errorboundary import one_line_errors
from k2k.errors import PackageError

__all__ = ["DEFAULT_ARCHIVE", "SPARK_PROVIDED", "build_archive", "package", "runtime_requirements"]

#: The archive ``k2k package`` writes unless told otherwise.
DEFAULT_ARCHIVE = "k2k-env.tar.gz"
#: Distributions the cluster's Spark provides on executors (its pyspark.zip and py4j zip).
SPARK_PROVIDED = frozenset({"pyspark", "py4j"})

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _canonical(name: str) -> str:
    """PEP 503's normalised name: ``PyYAML`` and ``pyyaml``, ``a_b`` and ``a-b`` are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(distribution: str = "k2k") -> list[str]:
    """The runtime dependencies of ``distribution`` (no extras), each pinned to the version
    installed in this environment, without :data:`SPARK_PROVIDED`. Raises
    :class:`~k2k.errors.PackageError` when one is not installed here."""
    try:
        requires = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise PackageError(f"{distribution} is not installed in {sys.prefix}") from exc
    pinned = []
    for requirement in requires:
        if "extra ==" in requirement.replace('"', "").replace("'", ""):
            continue
        match = _NAME.match(requirement)
        if match is None or _canonical(match.group()) in SPARK_PROVIDED:
            continue
        name = match.group()
        try:
            pinned.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError as exc:
            raise PackageError(
                f"{distribution} needs {name}, which is not installed in {sys.prefix}"
            ) from exc
    return sorted(pinned)


def _installed_versions() -> list[str]:
    """Every distribution installed here as ``name==version``: pip's constraints, so that
    the archive's indirect dependencies are the ones k2k runs with here too."""
    pins = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and _canonical(name) not in SPARK_PROVIDED | {"k2k"}:
            pins[_canonical(name)] = f"{name}=={dist.version}"
    return sorted(pins.values())


def _run(step: str, args: list[str]) -> None:
    """Run one build step; its output is shown only when it fails (the error's last line)."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, check=False)
    except OSError as exc:  # e.g. --python names no executable
        raise PackageError(f"{step} failed: {args[0]}: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise PackageError(f"{step} failed: {last}")


def build_archive(output: Path, python: str | None = None, *, force: bool = False) -> Path:
    """Build the archive at ``output`` (a ``.tar.gz``) in the numbered steps of the module
    docstring and return its path. ``force`` replaces an existing file."""
    try:
        import venv_pack
    except ImportError as exc:
        raise PackageError(
            "k2k package needs venv-pack: pip install 'k2k[package]' (or venv-pack)"
        ) from exc
    output = output.resolve()
    if output.exists() and not force:
        raise PackageError(f"{output} exists; expected a new path (or --force to replace it)")
    if not output.name.endswith((".tar.gz", ".tgz")):
        raise PackageError(f"{output.name}: expected a .tar.gz archive name (for --archives)")
    with tempfile.TemporaryDirectory(prefix="k2k-package-") as tmp:
        env = Path(tmp) / "env"
        # Step 1. The virtualenv.
        _run("creating the virtualenv", [python or sys.executable, "-m", "venv", str(env)])
        env_python = str(env / "bin" / "python")
        # Step 2. The dependencies, at this environment's versions.
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("\n".join(_installed_versions()) + "\n")
        pip = [env_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _run("pip install", [*pip, "-c", str(constraints), *runtime_requirements()])
        # Step 3. k2k itself.
        site = subprocess.run(
            [env_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        shutil.copytree(
            Path(k2k.__file__).resolve().parent,
            Path(site) / "k2k",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        # Step 4. The archive.
        output.parent.mkdir(parents=True, exist_ok=True)
        try:
            venv_pack.pack(prefix=str(env), output=str(output), force=force, compress_level=1)
        except venv_pack.VenvPackException as exc:
            raise PackageError(f"venv-pack: {exc}") from exc
    output.chmod(0o644)  # venv-pack writes it private; the cluster's user may be another
    return output


@click.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=DEFAULT_ARCHIVE,
    show_default=True,
    help="The archive to write (.tar.gz).",
)
@click.option(
    "--python",
    metavar="PATH",
    help="The interpreter the environment is built with; executors need the same one at the "
    "same path (default: the one running k2k).",
)
@click.option("--force", is_flag=True, help="Replace the archive if it exists.")
@one_line_errors
def package(output: str, python: str | None, force: bool) -> None:
    """Pack k2k and its dependencies into one archive for Spark executors (venv-pack).

    Submit with: spark-submit --archives k2k-env.tar.gz#env --conf
    spark.pyspark.python=./env/bin/python ... (see docs/spark.md). pyspark is left out:
    executors use their cluster's own.
    """
    click.echo(f"building {output} ...", err=True)
    built = build_archive(Path(output), python, force=force)
    size_mb = built.stat().st_size / 1e6
    click.echo(f"wrote {built} ({size_mb:.0f} MB)", err=True)
