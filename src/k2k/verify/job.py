"""``k2k verify``: plan one task per selected source partition (or per slice of a large
one), run them as one Spark job, and report.

Runs on: driver, once per ``k2k verify``. The driver reads the pipeline's committed
progress and the offsets of both clusters (nothing is written), builds one
:class:`~k2k.verify.task.PartitionTask` per selected source partition, cuts the large ones
into slices (:mod:`k2k.verify.slicing`), and runs
``sc.parallelize(tasks, len(tasks)).map(verify_partition)``; each task returns a small
:class:`~k2k.verify.task.PartitionResult`, and the driver alone decides the outcome: slices
that doubt are verified again merged with the slice before them (another job), then each
partition's slices are merged into one result.

While the job runs, tasks send the records they have read over the lease channel
(:mod:`k2k.pipeline.channel`), so the driver can show progress
(:class:`~k2k.verify.progress.VerifyProgress`); the outcome is a
:class:`~k2k.verify.report.VerifyReport`.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from k2k.admin.reader import PipelineReader
from k2k.config import PipelineConfig
from k2k.errors import ConfigError, K2KError
from k2k.formats import ProgressRecord
from k2k.kafka import TP
from k2k.kafka.admin import TopicInfo
from k2k.kafka.factory import CONSUMER_DEFAULTS
from k2k.kafka.peek import reader_settings
from k2k.spark.session import (
    context_of,
    spark_context_running,
    spark_error_line,
    start_spark,
    stop_spark,
)
from k2k.stages.topicplan import tracing_headers
from k2k.transforms import steps_for
from k2k.verify.progress import VerifyProgress
from k2k.verify.report import VerifyReport
from k2k.verify.schemas import SchemaIdCanon
from k2k.verify.slicing import merge_doubtful, merge_results, slice_tasks
from k2k.verify.task import PartitionResult, PartitionTask, verify_partition

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_SLICE_RECORDS", "plan_tasks", "run_verify"]

log = logging.getLogger("k2k.verify")

#: How often the driver shows progress (and logs it at DEBUG).
PROGRESS_INTERVAL_S = 0.5
#: A partition whose compared range spans more offsets than this is verified in slices of
#: about this size (``k2k verify --slice-records``; 0 never slices).
DEFAULT_SLICE_RECORDS = 1_000_000


def plan_tasks(
    cfg: PipelineConfig,
    topics: Sequence[str] = (),
    *,
    whole_topics: bool = False,
    from_timestamp_ms: int | None = None,
    sample: int | None = None,
) -> list[PartitionTask]:
    """Runs on: driver. One task per partition of the selected source topics (``topics``
    narrows them; each must be one the pipeline replicates). The compared range is
    [earliest, committed progress), or [earliest, end) with ``whole_topics``; it starts at
    the first record at or after ``from_timestamp_ms`` when given, and covers at most the
    last ``sample`` offsets of the range when given."""
    reader = PipelineReader(cfg)
    chosen = _chosen_topics(reader, topics)
    router = cfg.topic_router()
    routes = {t: router.route(t) or t for t in chosen}
    tps: list[TP] = [(t, p) for t, info in chosen.items() for p in range(info.partitions)]
    identical = cfg.replication.sink.offsets.identical
    read = reader.progress() if identical or not whole_topics else {}
    progress = {} if whole_topics else read
    earliest = reader.offsets(tps, "earliest")
    from_time = (
        reader.offsets_for_time(tps, from_timestamp_ms) if from_timestamp_ms is not None else {}
    )
    latest = reader.offsets(tps, "latest")
    target_info = reader.target_topics()
    target_ranges = _target_ranges(reader, set(routes.values()) & set(target_info), target_info)
    hashed = cfg.replication.sink.partition != "source"
    tracing = tracing_headers(cfg)
    group = f"k2k.{cfg.name}.verify"
    source_conf = _whole_partition_reader(cfg.source_client("consumer"), group)
    target_conf = _whole_partition_reader(cfg.target_client("consumer"), group)
    timeout_s = max(cfg.source.connect_timeout, cfg.target.connect_timeout).total_seconds()
    claims = _claims(chosen, routes, target_info, hashed)
    mapped = (
        _mapped_runs(cfg, reader, set(routes.values()), timeout_s)
        if cfg.features.offset_mapping and not (tracing and (tracing.topic or tracing.partition))
        else {}
    )
    schema_ids = _schema_ids(cfg, chosen)
    steps = steps_for(cfg)
    tasks = []
    for t, p in tps:
        target = routes[t]
        n = target_info[target].partitions if target in target_info else 0
        wanted = range(n) if hashed else [p] if p < n else []
        start, end = earliest[(t, p)], latest[(t, p)]
        rec = progress.get((t, p))
        until = end if whole_topics else max(start, min(rec.offset, end)) if rec else start
        start = _compared_start(start, until, from_time.get((t, p)), sample)
        tasks.append(
            PartitionTask(
                topic=t,
                partition=p,
                start=start,
                until=until,
                partial=start > earliest[(t, p)],
                end=end,
                target_topic=target,
                target_ranges={tp: target_ranges[(target, tp)] for tp in wanted},
                hash_partitions=n if hashed else 0,
                claims_unattributed=tuple(
                    tp for tp in wanted if claims.get((target, tp)) == (t, p)
                ),
                tracing=tracing,
                mapped_runs=_runs_for(mapped, t, p, target, wanted),
                # Steps give each record the headers the pipeline writes.
                keep_headers=cfg.features.header_replication or steps is not None,
                keep_timestamp=cfg.features.keep_record_creation_timestamp,
                source_consumer=source_conf,
                target_consumer=target_conf,
                timeout_s=timeout_s,
                schema_ids=schema_ids.get(t),
                identical_below=_identical_below(identical, read.get((t, p))),
                steps=steps(t, target) if steps is not None else None,
            )
        )
    return tasks


def _identical_below(identical: bool, rec: ProgressRecord | None) -> int | None:
    """``offsets: identical``: below which target offset records sit at their source offset
    (where identity ended, ``mappedFrom``, or everywhere); None without identical offsets."""
    if not identical:
        return None
    return rec.mapped_from if rec is not None and rec.mapped_from is not None else 1 << 62


def _chosen_topics(reader: PipelineReader, topics: Sequence[str]) -> dict[str, TopicInfo]:
    """The source topics to verify: ``topics``, each one the pipeline replicates, or all
    it replicates when none are named."""
    selected = reader.selected()
    unknown = [t for t in topics if t not in selected]
    if unknown:
        known = ", ".join(selected) or "none"
        raise ConfigError(
            f"--topic {unknown[0]!r}: not a source topic this pipeline replicates "
            f"(replicated now: {known})"
        )
    return {t: selected[t] for t in (topics or selected)}


def _target_ranges(
    reader: PipelineReader, targets: Iterable[str], target_info: Mapping[str, TopicInfo]
) -> dict[TP, tuple[int, int]]:
    """Each partition of ``targets`` (each one in ``target_info``, i.e. existing): its
    [earliest, end) offsets."""
    tps = [(t, p) for t in sorted(targets) for p in range(target_info[t].partitions)]
    earliest = reader.target.offsets(tps, "earliest")
    latest = reader.target.offsets(tps, "latest")
    return {tp: (earliest[tp], latest[tp]) for tp in tps}


def _compared_start(earliest: int, until: int, from_time: int | None, sample: int | None) -> int:
    """Where a source partition's compared range [start, until) starts: at its earliest
    offset, or at ``from_time`` (the first offset at or after ``--from-timestamp``) but
    never past ``until``, and within the last ``sample`` offsets before ``until``.

    >>> _compared_start(10, 50, None, None), _compared_start(10, 50, 40, None)
    (10, 40)
    >>> _compared_start(10, 50, 60, None), _compared_start(10, 50, 20, 5)
    (50, 45)
    """
    start = earliest if from_time is None else min(max(earliest, from_time), until)
    return start if sample is None else max(start, until - sample)


def _schema_ids(
    cfg: PipelineConfig, topics: Iterable[str]
) -> dict[str, tuple[SchemaIdCanon, SchemaIdCanon]]:
    """Per source topic whose ids schema mapping rewrites: how each side's ids are read
    (compared by the schema they name, :mod:`k2k.verify.schemas`)."""
    if not cfg.features.schema_mapping:
        return {}
    from k2k.schemamapping import registry_endpoints

    source, target = registry_endpoints(cfg)
    out = {}
    for t in topics:
        keys, values = cfg.schema_mapping.facets(t)
        if keys or values:
            out[t] = (SchemaIdCanon(source, keys, values), SchemaIdCanon(target, keys, values))
    return out


#: (target partition, target first offset, count, source topic, source partition, source
#: first offset) of one exact offset-mapping run.
Run = tuple[int, int, int, str, int, int]


def _mapped_runs(
    cfg: PipelineConfig, reader: PipelineReader, targets: set[str], timeout_s: float
) -> dict[str, list[Run]]:
    """Runs on: driver. Every exact run of the pipeline's offset mappings into ``targets``
    (read committed, in the order written), per target topic; {} without a mapping topic.
    Interleaved runs (another writer's records inside) are left out: their target offsets
    do not follow the source's one to one."""
    from k2k.formats.offset_mapping import OffsetMappingRecord
    from k2k.kafka.tail import read_to_end

    topic = cfg.offset_mapping.topic
    if topic not in reader.target_topics():
        return {}
    out: dict[str, list[Run]] = {}

    def take(m: Any) -> None:
        rec = OffsetMappingRecord.decode(m.key(), m.value(), topic, m.partition(), m.offset())
        if rec.pipeline == cfg.name and rec.target_topic in targets and rec.exact:
            out.setdefault(rec.target_topic, []).append(
                (
                    rec.target_partition,
                    rec.target_first,
                    rec.count,
                    rec.topic,
                    rec.partition,
                    rec.source_first,
                )
            )

    read_to_end(
        cfg.control_consumer(),
        topic,
        None,
        take,
        group_id=f"k2k.{cfg.name}.verify",
        timeout_s=timeout_s,
        setting="offsetMapping.topic",
    )
    return out


def _runs_for(
    mapped: dict[str, list[Run]], topic: str, partition: int, target: str, wanted: Any
) -> dict[int, tuple[tuple[int, int, int | None], ...]]:
    """Per target partition the task reads: (target first, count, source first offset, or
    None for another source partition's run), sorted by target offset."""
    out: dict[int, list[tuple[int, int, int | None]]] = {}
    parts = set(wanted)
    for tp, first, count, t, p, source_first in mapped.get(target, []):
        if tp in parts:
            mine = (t, p) == (topic, partition)
            out.setdefault(tp, []).append((first, count, source_first if mine else None))
    return {tp: tuple(sorted(runs)) for tp, runs in out.items()}


def _claims(
    chosen: dict[str, Any], routes: dict[str, str], target_info: dict[str, Any], hashed: bool
) -> dict[TP, TP]:
    """Which task reports the target records no source partition explains: per target
    partition, the first (by name) source topic routed there, its partition of the same
    number (``source``) or that number modulo its partitions (``hash``)."""
    out: dict[TP, TP] = {}
    for t in sorted(chosen):
        target = routes[t]
        if target not in target_info:
            continue
        parts = chosen[t].partitions
        for tp in range(target_info[target].partitions):
            p = tp % parts if hashed else tp
            if p < parts:
                out.setdefault((target, tp), (t, p))
    return out


def run_verify(
    cfg: PipelineConfig,
    topics: Sequence[str] = (),
    *,
    whole_topics: bool = False,
    from_timestamp_ms: int | None = None,
    sample: int | None = None,
    slice_records: int = DEFAULT_SLICE_RECORDS,
    spark: SparkSession | SparkContext | None = None,
    progress: Callable[[VerifyProgress], None] | None = None,
) -> VerifyReport:
    """Runs on: driver. Plan (see :func:`plan_tasks` for the range options), slice
    partitions of more than ``slice_records`` offsets, run the Spark job (on ``spark``, or
    a SparkContext of its own from ``spark.master``/``spark.conf``, stopped at the end unless it
    joined one the process ran already) and collect the report. ``progress`` is called
    about twice a second while tasks run. A context of its own starts while the driver
    plans (both take seconds)."""
    own = spark is None and not spark_context_running()  # else the embedding program's
    with ThreadPoolExecutor(1, thread_name_prefix="k2k-verify-spark") as pool:
        starting = (
            pool.submit(
                start_spark, f"k2k-verify:{cfg.name}", cfg.spark.master, dict(cfg.spark.conf)
            )
            if spark is None
            else None
        )
        try:
            tasks = _plan_slices(
                cfg, topics, whole_topics, from_timestamp_ms, sample, slice_records
            )
            given = starting.result() if starting is not None else spark
            assert given is not None
            sc = context_of(given)
        except BaseException:
            if own and starting is not None and starting.exception() is None:
                stop_spark(starting.result())
            raise
    if not tasks:
        if own:
            stop_spark(sc)
        return VerifyReport(cfg.name, [])
    try:
        results = _run_until_sure(sc, cfg, tasks, progress)
    finally:
        if own:
            stop_spark(sc)
    results.sort(key=lambda r: (r.topic, r.partition))
    by_key = cfg.replication.sink.partition != "source" and not _traces_source(cfg)
    return VerifyReport(
        cfg.name,
        results,
        _unexplained(results) if by_key else [],
        transformed=bool(cfg.replication.transforms),
    )


def _plan_slices(
    cfg: PipelineConfig,
    topics: Sequence[str],
    whole_topics: bool,
    from_timestamp_ms: int | None,
    sample: int | None,
    slice_records: int,
) -> list[PartitionTask]:
    """Runs on: driver. :func:`plan_tasks`, then the large partitions sliced."""
    tasks = plan_tasks(
        cfg,
        topics,
        whole_topics=whole_topics,
        from_timestamp_ms=from_timestamp_ms,
        sample=sample,
    )
    if not tasks:
        return []
    partitions = len(tasks)
    tasks = slice_tasks(tasks, slice_records)
    log.info(
        "verifying %d partition(s) of %d topic(s) in %d task(s)",
        partitions,
        len({t.topic for t in tasks}),
        len(tasks),
    )
    return tasks


def _run_until_sure(
    sc: SparkContext,
    cfg: PipelineConfig,
    tasks: list[PartitionTask],
    progress: Callable[[VerifyProgress], None] | None,
) -> list[PartitionResult]:
    """Runs on: driver. The job, then again for the slices that doubted (merged with the
    slice before each, see :func:`~k2k.verify.slicing.merge_doubtful`) until none does;
    one merged result per partition."""
    from k2k.pipeline.channel import open_channel

    watch = VerifyProgress(tasks)
    control = open_channel(sc, cfg.spark.control_host, cfg.spark.control_port)
    control.on_frame = watch.frame
    try:
        results: list[PartitionResult | None] = [None] * len(tasks)
        while True:
            todo = [i for i, r in enumerate(results) if r is None]
            shipped = [
                dataclasses.replace(tasks[i], progress=control.address, task_id=watch.add(tasks[i]))
                for i in todo
            ]
            for i, r in zip(todo, _run_job(sc, shipped, watch, progress), strict=True):
                results[i] = r
            done = [r for r in results if r is not None]
            tasks, results = merge_doubtful(tasks, done)
            if all(r is not None for r in results):
                break
            log.info("verifying %d slice(s) again with the slice before each", results.count(None))
    finally:
        control.close()
    merged = []
    for _, parts in itertools.groupby(
        (r for r in results if r is not None), key=lambda r: (r.topic, r.partition)
    ):
        merged.append(merge_results(list(parts)))
    return merged


def _traces_source(cfg: PipelineConfig) -> bool:
    """Whether replicated records name their source topic or partition in a header."""
    tracing = tracing_headers(cfg)
    return tracing is not None and bool(tracing.topic or tracing.partition)


def _unexplained(results: list[PartitionResult]) -> list[tuple[str, int, int]]:
    """Runs on: driver. With ``partition: hash`` and no tracing headers, tasks attribute
    target records by key, so a record whose key no source partition holds belongs to no
    task: per target partition, records read minus records attributed, where positive."""
    read: dict[tuple[str, int], int] = {}
    taken: dict[tuple[str, int], int] = {}
    for r in results:
        for tp, (seen, attributed) in r.target_counts.items():
            read[(r.target_topic, tp)] = max(read.get((r.target_topic, tp), 0), seen)
            taken[(r.target_topic, tp)] = taken.get((r.target_topic, tp), 0) + attributed
    return [(t, p, n - taken[(t, p)]) for (t, p), n in sorted(read.items()) if n > taken[(t, p)]]


def _run_job(
    sc: SparkContext,
    tasks: list[PartitionTask],
    watch: VerifyProgress,
    progress: Callable[[VerifyProgress], None] | None,
) -> list[PartitionResult]:
    """Runs on: driver. One job over ``tasks`` (results in their order), watched from this
    thread: ``progress`` is called every :data:`PROGRESS_INTERVAL_S` while it runs."""
    out: list[PartitionResult] = []
    failure: list[Exception] = []
    group = f"k2k-verify-{id(tasks)}"

    def job() -> None:
        sc.setJobGroup(group, "k2k verify")
        try:
            out.extend(sc.parallelize(tasks, len(tasks)).map(verify_partition).collect())
        except Exception as exc:  # re-raised as a one-line K2KError below
            failure.append(exc)

    thread = threading.Thread(target=job, name=group, daemon=True)
    thread.start()
    next_log = time.monotonic()
    while thread.is_alive():
        thread.join(PROGRESS_INTERVAL_S)
        if progress is not None:
            progress(watch)
        if time.monotonic() >= next_log:
            next_log += 5.0
            read, total, done, partitions = watch.snapshot()
            log.debug(
                "verify: %d of %d records read, %d of %d partitions done",
                read,
                total,
                done,
                partitions,
            )
    if failure:
        raise K2KError(f"a verify task failed: {spark_error_line(failure[0])}")
    return out


def _whole_partition_reader(props: Mapping[str, str], group: str) -> dict[str, str]:
    """A reader (:func:`~k2k.kafka.peek.reader_settings`) for whole partitions: k2k's
    source-consumer defaults under the user's settings, so fetching resumes as soon as the
    local queue drains (librdkafka's ``fetch.queue.backoff.ms`` default postpones it 1 s)."""
    return {**CONSUMER_DEFAULTS, **reader_settings(props, group)}
