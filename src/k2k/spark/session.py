"""The SparkContext k2k runs its leases on, and how Spark's errors read in one line.

Runs on: driver, once per ``k2k start`` (or per ``spark-submit .../k2k/__main__.py start``).

Who decides the master: when k2k is launched by ``spark-submit`` (or joins a session that
already exists), the master, deploy mode and resources are spark-submit's (its command
line and ``spark-defaults.conf``); ``spark.master`` from the pipeline applies only when k2k
starts Spark itself. ``spark.conf`` from the pipeline is passed through as Spark
configuration either way (below spark-submit's own settings).

Executors' Python: for a local master the runners use this very interpreter
(``PYSPARK_PYTHON``). For any other master it is the cluster's: ``spark.pyspark.python``,
typically the Python of an environment shipped with ``--archives`` (``k2k package``, see
docs/spark.md). Without a shipped archive, the k2k package is also shipped as a zip with
``addPyFile`` (its dependencies must then be installed on the executors' Python).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from k2k.jvm.classdata import ClassData
from k2k.spark.classdata import class_data, driver_options, publish

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = [
    "JvmOutput",
    "context_of",
    "is_local",
    "jvm_line",
    "spark_context_running",
    "spark_error_line",
    "spark_settings",
    "start_spark",
    "stop_spark",
]

#: The JVM's output, and in local mode the runners' stderr (see :class:`JvmOutput`).
log = logging.getLogger("k2k.spark")

_QUIET_LOG = Path(__file__).with_name("log4j2.properties")

#: Spark's own setting for its log level (applied as if ``SparkContext.setLogLevel`` were
#: called at start). k2k also starts the JVMs at that level, so that raising it shows
#: Spark's start-up too (see log4j2.properties); ``k2k start --spark-log-level`` sets it.
LOG_LEVEL_KEY = "spark.log.level"
#: Spark's log level unless ``spark.conf`` or ``--spark-log-level`` says otherwise.
DEFAULT_LOG_LEVEL = "ERROR"
#: The levels Spark accepts for ``spark.log.level``.
LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")

#: Spark settings k2k chooses unless ``spark.conf`` says otherwise; the JVM options are
#: joined with the user's instead (see :func:`spark_settings`).
SPARK_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
    # The driver JVM only schedules leases (runners are Python processes): C1 compilation is
    # enough, and the C2 compiler threads would otherwise compete with runners for CPU.
    # The quiet logging file exists on the driver's machine only: executors (in local mode
    # inside this JVM anyway) keep their cluster's own log4j configuration.
    "spark.driver.extraJavaOptions": (
        f"-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:{_QUIET_LOG}"
    ),
}
_JAVA_OPTIONS = ("spark.driver.extraJavaOptions",)


#: Spark's setting for the Python daemon module (see :func:`_local_daemon`).
DAEMON_MODULE_KEY = "spark.python.daemon.module"

#: A speculative copy of a runner task would be a second writer for the same partitions.
SPARK_FORCED: dict[str, str] = {"spark.speculation": "false"}


def spark_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """k2k's defaults < ``conf`` < the forced settings. The JVM options are joined, k2k's
    first, so that a user's option of the same name wins without losing the others (the
    quiet logging above all).

    >>> s = spark_settings({"spark.driver.extraJavaOptions": "-Xss4m", "spark.log.level": "info"})
    >>> s["spark.log.level"], s["spark.driver.extraJavaOptions"].split()[-2:]
    ('INFO', ['-Dk2k.spark.logLevel=INFO', '-Xss4m'])
    """
    level = conf.get(LOG_LEVEL_KEY, DEFAULT_LOG_LEVEL).upper()
    settings = {**SPARK_DEFAULTS, **conf, **SPARK_FORCED, LOG_LEVEL_KEY: level}
    for key in _JAVA_OPTIONS:
        ours = f"{SPARK_DEFAULTS[key]} -Dk2k.spark.logLevel={level}"
        settings[key] = f"{ours} {conf[key]}" if key in conf else ours
    return settings


def start_spark(app_name: str, master: str, conf: Mapping[str, str]) -> SparkContext:
    """Runs on: driver. Start (or join) k2k's SparkContext with :func:`spark_settings`.

    ``master`` (the pipeline's ``spark.master``) is used only when k2k starts Spark itself;
    launched by spark-submit, or with a SparkContext already running, the master and the
    resources are the ones given there, and ``conf`` only fills in what they leave unset.
    Ships the k2k package to remote executors unless an archive (``spark.archives``) does.
    The JVM's stderr, when k2k starts the JVM (in local mode also the runners'), reaches
    k2k's log through :class:`JvmOutput`. No SparkSession: k2k runs RDD jobs only, and
    a session's SQL start-up would cost the driver JVM more CPU
    (docs/benchmarks.md#spark-context-only)."""
    from pyspark import SparkConf, SparkContext  # imported late: pyspark is slow to import

    given = _given_spark_conf()
    if given is None:
        settings = {**spark_settings(conf), "spark.master": master, "spark.app.name": app_name}
        _set_executor_python(settings)
        _local_daemon(settings)
        _launch_jvm(settings)
    else:
        # The JVM runs already: its options (k2k's quiet logging file) cannot apply.
        ours = {k: v for k, v in spark_settings(conf).items() if k not in _JAVA_OPTIONS}
        settings = {**ours, **given, **SPARK_FORCED}
        if given.get("spark.app.name", _SUBMIT_APP_NAME) == _SUBMIT_APP_NAME:
            settings["spark.app.name"] = app_name
        _set_executor_python(settings)
        _local_daemon(settings)  # a daemon module spark-submit was given stays
    sc = SparkContext.getOrCreate(SparkConf().setAll(list(settings.items())))
    sc.setLogLevel(settings[LOG_LEVEL_KEY].upper())  # also for an existing one
    if not is_local(sc.master or "") and "spark.archives" not in settings:
        sc.addPyFile(_package_zip())
    return sc


def context_of(spark: SparkSession | SparkContext) -> SparkContext:
    """The SparkContext of a program's session (or the context it gave)."""
    from pyspark import SparkContext

    return spark if isinstance(spark, SparkContext) else spark.sparkContext


#: The application name spark-submit gives when ``--name`` is not given: the entry file's.
_SUBMIT_APP_NAME = "__main__.py"


def is_local(master: str) -> bool:
    """Whether ``master`` runs executors inside the driver's process (``local``,
    ``local[N]``, ``local[N,F]``, ``local[*]``; not ``local-cluster[...]``).

    >>> is_local("local[*]"), is_local("spark://h:7077"), is_local("local-cluster[2,1,512]")
    (True, False, False)
    """
    return master == "local" or master.startswith("local[")


def spark_context_running() -> bool:
    """Whether this process runs a SparkContext already: :func:`start_spark` joins it, and
    whoever started it (a program that embeds k2k) stops it, not k2k."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def _given_spark_conf() -> dict[str, str] | None:
    """The Spark configuration spark-submit (or a session already running) decided; None
    when k2k is to start Spark itself. spark-submit runs this process with a gateway to its
    JVM (``PYSPARK_GATEWAY_PORT``), whose system properties hold ``spark.master`` and
    everything else it was given."""
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return dict(active.getConf().getAll())
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    SparkContext._ensure_initialized()  # joins spark-submit's JVM
    return dict(SparkConf().getAll())


def _set_executor_python(settings: Mapping[str, str]) -> None:
    """The executors' Python, which PySpark takes from ``PYSPARK_PYTHON`` when the context
    starts: ``spark.pyspark.python`` if set (as spark-submit itself does); else, for a local
    master only, this interpreter; else the cluster's default (``python3``)."""
    executor_python = settings.get("spark.pyspark.python")
    if executor_python:
        os.environ["PYSPARK_PYTHON"] = executor_python
    elif is_local(settings.get("spark.master", "")):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _local_daemon(settings: dict[str, str]) -> None:
    """For a local master whose executors run this interpreter, Spark's Python daemon is
    :mod:`k2k.spark.daemon` (unless ``spark.conf`` names another): its forked workers
    start with the runner imported. Only where a new process of this interpreter finds k2k:
    a program that put k2k on ``sys.path`` itself keeps PySpark's daemon, which would
    otherwise not start."""
    ours = is_local(settings.get("spark.master", "")) and DAEMON_MODULE_KEY not in settings
    if ours and os.environ.get("PYSPARK_PYTHON") == sys.executable and _new_process_finds_k2k():
        settings[DAEMON_MODULE_KEY] = "k2k.spark.daemon"


def _new_process_finds_k2k() -> bool:
    """Whether a new process of this interpreter (the executors' daemon) can import this
    very k2k; about 30 ms, once per start."""
    here = str(Path(__file__).resolve().parents[1])
    code = "import importlib.util as u, sys; s = u.find_spec('k2k'); print(s and s.submodule_search_locations[0])"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    found = out.stdout.strip()
    return bool(found) and found != "None" and str(Path(found).resolve()) == here


def _launch_jvm(settings: Mapping[str, str]) -> None:
    """Start Spark's JVM, unless this process has one, with its stderr read by
    :class:`JvmOutput` (PySpark's ``popen_kwargs`` hook: "e.g., capturing stdout/stderr")
    and its class-data archive (:mod:`k2k.spark.classdata`)."""
    global _recording
    from pyspark import SparkConf, SparkContext
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # PySpark's own check, in SparkContext.__init__
        return
    data = class_data(settings, Path(_find_spark_home()))
    if data is not None:
        key = "spark.driver.extraJavaOptions"
        settings = {**settings, key: f"{settings.get(key, '')} {driver_options(data)}".strip()}
    spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    if gateway.proc is not None:  # None: PySpark joined a gateway it did not start
        JvmOutput(gateway.proc.stderr).start()
        if data is not None and data.recording is not None:
            _recording = (data, gateway.proc)
    SparkContext._ensure_initialized(gateway=gateway)


#: The JVM :func:`_launch_jvm` started while it records its class data (until
#: :func:`stop_spark`), with what it records.
_recording: tuple[ClassData, subprocess.Popen[bytes]] | None = None
#: How long :func:`stop_spark` waits for a recording JVM to write its classes and exit.
_RECORDING_EXIT_S = 60.0


def stop_spark(sc: SparkContext) -> None:
    """Runs on: driver. Stop ``sc``, a context :func:`start_spark` started. A JVM that
    records its class data is ended too (it writes them at exit; otherwise only once this
    process has exited), and the recording published; the next start launches a new JVM."""
    global _recording
    recording, _recording = _recording, None
    accumulators, sc._accumulatorServer = sc._accumulatorServer, None  # type: ignore[assignment]
    try:
        sc.stop()
    finally:
        stopping = _stop_accumulator_server(accumulators)
        if recording is not None:
            if stopping is not None:
                stopping.join()
            _end_recording_jvm(*recording)


def _stop_accumulator_server(server: socketserver.BaseServer | None) -> threading.Thread | None:
    """Stop pyspark's accumulator server in the background; the thread doing it, if any.

    Its handler reads the JVM's updates and notices a stop only between 1 s polls: should the
    JVM close the connection meanwhile, it reads end-of-file and prints an ``EOFError``
    traceback. So the JVM may end only once this thread is done, which takes up to that
    second; k2k uses no accumulators, so a JVM that outlives this process needs no wait."""
    if server is None:
        return None
    thread = threading.Thread(target=server.shutdown, name="k2k-accumulators", daemon=True)
    thread.start()
    return thread


def _end_recording_jvm(data: ClassData, proc: subprocess.Popen[bytes]) -> None:
    """End the JVM (Spark's gateway exits at the end of its input) and publish what it
    recorded; a JVM that does not exit in time is killed, and its recording dropped."""
    from pyspark import SparkContext

    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    if gateway is not None:
        with contextlib.suppress(Exception):  # also stops py4j's finalizer thread
            gateway.shutdown()
    with contextlib.suppress(OSError, ValueError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        code: int | None = proc.wait(_RECORDING_EXIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    publish(data, code)


#: What the JVM prints at start whatever the log level: noise to k2k's users.
_BANNER = (
    "WARNING: Using incubator modules:",
    "Setting default log level to",
    "To adjust logging level use sc.setLogLevel",
    "Using Spark's default log4j profile",
)
#: A line in the layout of log4j2.properties: time, level, logger.
_LOG4J_LINE = re.compile(r"\d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*)")
_LOG4J_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}


def jvm_line(line: str, previous: int) -> tuple[int, str] | None:
    """The level and text one line of the JVM's stderr is logged with (``previous``: the
    level of the line before); None for a start-up banner line or an empty one.

    A log4j line keeps its level (the time is k2k's to add); an exception's lines (its name,
    indented frames, ``Caused by:``) continue the one before; anything else (the runners'
    stderr: Python's warnings and errors) is a warning.

    >>> jvm_line("12:00:01 ERROR Executor: Exception in task 0.0", logging.INFO)
    (40, 'Executor: Exception in task 0.0')
    >>> jvm_line("    at org.apache.spark.Foo(Foo.scala:1)", logging.ERROR)
    (40, '    at org.apache.spark.Foo(Foo.scala:1)')
    >>> jvm_line("WARNING: Using incubator modules: jdk.incubator.vector", logging.INFO)
    """
    if not line.strip() or line.startswith(_BANNER):
        return None
    m = _LOG4J_LINE.fullmatch(line)
    if m:
        return _LOG4J_LEVELS[m.group(1)], m.group(2)
    if line[0].isspace() or line.startswith("Caused by:") or _EXCEPTION_LINE.match(line):
        return previous, line
    return logging.WARNING, line


class JvmOutput(threading.Thread):
    """Runs on: driver, a daemon thread for the life of the JVM. Logs each line the JVM
    writes to stderr (see :func:`jvm_line`) to the ``k2k.spark`` logger, so that it goes
    through k2k's one handler (on a terminal above the live panel, never through it).

    It must never stop reading while the JVM runs: a full pipe would block the JVM's
    logging, and with it the runners' stderr."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(name="k2k-spark-output", daemon=True)
        self.stream = stream

    def run(self) -> None:
        level = logging.WARNING
        for raw in iter(self.stream.readline, b""):
            parsed = jvm_line(raw.decode(errors="replace").rstrip("\r\n"), level)
            if parsed is not None:
                level, text = parsed
                log.log(level, "%s", text)


def spark_error_line(exc: object) -> str:
    """Runs on: driver. The last meaningful line of a Spark/Py4J error (the Python
    exception, if any), at most 500 characters.

    >>> spark_error_line("py4j.protocol.Py4JJavaError: An error occurred\\n"
    ...     "  at org.apache.spark.Foo(Foo.scala:1)\\n"
    ...     "k2k.errors.ReplicationError: record too large\\n"
    ...     "  at org.apache.spark.Bar(Bar.scala:2)")
    'k2k.errors.ReplicationError: record too large'
    """
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("at ")]  # Java stack frames
    for ln in reversed(lines):
        if _EXCEPTION_LINE.match(ln):
            return ln[:500]
    return (lines[-1] if lines else repr(exc))[:500]


#: "SomeError: message" or "pkg.SomeException(...)", as Python and Java print exceptions.
_EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception)\b")


def _package_zip() -> str:
    """Zip the installed k2k package so remote executors can import it."""
    package_dir = Path(__file__).resolve().parents[1]
    out = Path(tempfile.mkdtemp(prefix="k2k-pyfiles-")) / "k2k"
    archive = shutil.make_archive(str(out), "zip", root_dir=package_dir.parent, base_dir="k2k")
    return archive
