"""The Python API, for programs that embed the replicator instead of running ``k2k start``.

::

    import k2k

    config = k2k.load_pipeline(["pipeline.yaml", {"name": "orders-dr-eu"}])  # files, mappings
    replicator = k2k.Replicator(config)
    stats = replicator.run(until_caught_up=True)     # blocks; stop() from elsewhere ends it
    totals = replicator.status().to_json()["totals"]  # what `k2k status --json` prints

The commands are thin callers of the same functions, so the API behaves as they do. It
never prints, never exits and installs no signal handler: failures are the typed
exceptions of :mod:`k2k.errors`, logs go to the ``k2k.*`` loggers (configure them as you
like), and signals stay the embedding program's (see :class:`Replicator`). The guide, with
an example that the tests run, is docs/api.md.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from k2k.admin.status import PipelineStatus, read_status
from k2k.config import PipelineConfig, load_pipeline
from k2k.coordination.assignment import member_name_problem
from k2k.errors import ConfigError
from k2k.observability.stats import PipelineStats
from k2k.pipeline.driver.planner import Planner
from k2k.verify.job import run_verify
from k2k.verify.report import VerifyReport

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = [
    "PipelineConfig",
    "PipelineStats",
    "PipelineStatus",
    "Replicator",
    "VerifyReport",
    "load_pipeline",
]


class Replicator:
    """One pipeline, run in this process (the Spark driver): blocking with :meth:`run`, or
    in a thread of its own with :meth:`start` and :meth:`join`; :meth:`stop` ends it cleanly.

    Creating one checks the arguments and connects nothing. Like :class:`threading.Thread`
    it runs once (a second :meth:`run` or :meth:`start` raises :class:`RuntimeError`);
    for a restart create another, which resumes from the committed progress on the target.
    :meth:`status` and :meth:`verify` work at any time, running or not.

    ``instance``: this process's member name in the assignment topic (``k2k start
    --instance``; default host-pid): a restart under the same name takes its partitions
    back at once; never give two running replicators one name. ``standby``: take no
    partitions while another (non-standby) member is alive. ``telemetry``: export metrics
    through OpenTelemetry, chosen by the ``OTEL_*`` variables (docs/metrics.md).
    ``spark``: a session (or SparkContext) of yours to run the leases on, left running at
    the end; without one, the replicator joins the SparkContext this process runs (and
    leaves it running), or starts one from the pipeline's ``spark`` section and stops it
    when the run returns. The executors of a session you pass need k2k importable (docs/spark.md).
    ``on_progress``: called on the driver about twice a second with the live statistics
    (keep it quick: it runs in the loop that watches the lease).
    ``start_at``: where each source partition without committed progress starts, instead
    of ``auto.offset.reset``; a partition not in it starts at its earliest offset (the
    reverse run's fork point, ``k2k start --reverse``: docs/operations.md#failback).

    Signals: k2k installs no handler. PySpark does: a SparkContext started on the main
    thread replaces SIGINT's handler with one that cancels every Spark job and raises
    :class:`KeyboardInterrupt`, which abandons the lease instead of committing it. When
    the replicator starts Spark on the main thread (:meth:`run` without ``spark``) it puts
    back the SIGINT handler that was there before, so the process keeps the handlers it
    had. To stop cleanly on a signal, install a handler that calls :meth:`stop`. Without
    one, Ctrl-C raises :class:`KeyboardInterrupt` out of :meth:`run`: what was not
    committed is replicated again at the next start (aborted first under exactly-once).

    Raises :class:`~k2k.errors.ConfigError` for an unusable ``instance`` or bad ``OTEL_*``
    values (with ``telemetry``).
    """

    def __init__(
        self,
        config: PipelineConfig,
        *,
        instance: str | None = None,
        standby: bool = False,
        telemetry: bool = False,
        spark: SparkSession | SparkContext | None = None,
        on_progress: Callable[[PipelineStats], None] | None = None,
        start_at: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        problem = None if instance is None else member_name_problem(instance)
        if problem is not None:
            raise ConfigError(f"instance: {problem}")
        if telemetry:
            from k2k.metrics.telemetry import check_environment  # OpenTelemetry only then

            check_environment(os.environ)
        self.config = config
        self._spark = spark
        # Made when the run starts, with the run's own arguments (until_caught_up, ...).
        self._new_planner = functools.partial(
            Planner,
            config,
            on_tick=on_progress,
            spark=spark,
            member=instance,
            standby=standby,
            telemetry=telemetry,
            start_at=start_at,
            # The status page of -t reads what `k2k status --json` shows, while viewed.
            status_snapshot=(lambda: read_status(config).to_json()) if telemetry else None,
        )
        self._planner: Planner | None = None
        self._stop_requested = False
        self._claimed = False
        self._running = False
        self._future: Future[PipelineStats] | None = None

    @property
    def running(self) -> bool:
        """Whether :meth:`run` (or the thread of :meth:`start`) is replicating now."""
        return self._running

    def run(self, until_caught_up: bool = False) -> PipelineStats:
        """Replicate until :meth:`stop` is called and return the final statistics; with
        ``until_caught_up``, return once every selected source partition is replicated up
        to the end offsets seen at start (``k2k start --until-caught-up``).

        A stop lets the runners commit what the target acknowledged and release their
        partitions (other members take them over at once); a stop requested before the run
        began returns at once, having done nothing. Once ``k2k cutover`` drained the
        pipeline the run ends the same way, and returns at once having copied nothing when
        it was cut over before the run began: then the statistics' ``cutover`` holds the
        cut-over record (``None`` for every other end). Raises the errors of
        :mod:`k2k.errors`: :class:`~k2k.errors.ClusterError` (a cluster unreachable, a
        topic missing, an outage longer than ``errorHandling.maxOutage``),
        :class:`~k2k.errors.ReplicationError` (records the target refused, e.g. too large),
        :class:`~k2k.errors.ControlRecordError`; progress committed before stays valid.
        """
        self._claim()
        return self._run(until_caught_up)

    def start(self, until_caught_up: bool = False) -> None:
        """Run as :meth:`run` does, in a daemon thread, and return at once; :meth:`join`
        waits for the statistics (or the error). The thread does not keep the process
        alive: exiting without :meth:`stop` abandons the lease like a crash (uncommitted
        work is replicated again at the next start). Spark started from this thread
        leaves the process's signal handlers alone."""
        self._claim()
        future: Future[PipelineStats] = Future()
        self._future = future

        def body() -> None:
            try:
                future.set_result(self._run(until_caught_up))
            except BaseException as exc:  # handed to join(), in the caller's thread
                future.set_exception(exc)

        name = f"k2k-{self.config.name}"
        threading.Thread(target=body, name=name, daemon=True).start()

    def join(self, timeout: float | None = None) -> PipelineStats:
        """Wait for the run :meth:`start` began and return its statistics, or raise its
        error; :class:`TimeoutError` when it still runs after ``timeout`` seconds."""
        if self._future is None:
            raise RuntimeError("join() waits for the run start() began; start() was not called")
        return self._future.result(timeout)

    def stop(self) -> None:
        """Ask the run to end cleanly (see :meth:`run`) and return at once; the run returns
        within seconds (the lease's job is cancelled after 15 s if runners hang). Safe from
        any thread and from a signal handler, and any number of times."""
        self._stop_requested = True
        planner = self._planner
        if planner is None:
            return  # _run() sees the flag once its planner exists
        if threading.current_thread() is threading.main_thread():
            # A signal handler may interrupt the main thread inside the lock that
            # Event.set() takes: ask from a thread of its own.
            threading.Thread(target=planner.request_stop, name="k2k-stop", daemon=True).start()
        else:
            planner.request_stop()

    def status(self) -> PipelineStatus:
        """The pipeline's members, partition owners, committed positions and lag, read from
        the control topics now (``k2k status``; ``.to_json()`` is ``k2k status --json``).
        Writes nothing. Raises :class:`~k2k.errors.ClusterError` when a cluster does not
        answer."""
        return read_status(self.config)

    def verify(
        self,
        topics: Sequence[str] = (),
        *,
        whole_topics: bool = False,
        from_timestamp_ms: int | None = None,
        sample: int | None = None,
    ) -> VerifyReport:
        """Compare the source with the target record for record, as a Spark job on this
        replicator's ``spark`` (or a SparkContext of its own): ``k2k verify``. A mismatch is no
        error: read ``.ok`` and the report. ``topics`` (default: every replicated topic),
        ``whole_topics``, ``from_timestamp_ms`` and ``sample`` are the command's
        ``--topic``, ``--all``, ``--from-timestamp`` and ``--sample``."""
        return run_verify(
            self.config,
            list(topics),
            whole_topics=whole_topics,
            from_timestamp_ms=from_timestamp_ms,
            sample=sample,
            spark=self._spark,
        )

    # -- internals ---------------------------------------------------------------------

    def _claim(self) -> None:
        """A replicator runs once: its planner's state (positions, membership) is one run's."""
        if self._claimed:
            raise RuntimeError("a Replicator runs once; create another to run again")
        self._claimed = True

    def _run(self, until_caught_up: bool) -> PipelineStats:
        if self._stop_requested:
            return PipelineStats()
        planner = self._new_planner(
            until_caught_up=until_caught_up, after_spark_start=_sigint_restorer()
        )
        self._planner = planner
        if self._stop_requested:  # stop() came before it could see the planner
            planner.request_stop()
        self._running = True
        try:
            return planner.run()
        finally:
            self._running = False


def _sigint_restorer() -> Callable[[], None] | None:
    """What puts back the SIGINT handler PySpark's SparkContext replaces when it starts on
    the main thread (None elsewhere: PySpark leaves signals alone there, and only the main
    thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    before = signal.getsignal(signal.SIGINT)
    if before is None:  # installed outside Python: cannot be put back from here
        return None

    def restore() -> None:
        if signal.getsignal(signal.SIGINT) is not before:
            signal.signal(signal.SIGINT, before)

    return restore
