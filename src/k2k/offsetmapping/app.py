"""The Offset Mapping app: keeps target consumer groups where their source twins stand.

Every ``groups.pollInterval`` one *pass*:

1. read the committed offsets of the selected groups on the source (admin API; the source
   is only read);
2. read the mappings written since the last pass (:class:`~k2k.offsetmapping.store.MappingStore`);
3. translate each group's positions (:func:`~k2k.offsetmapping.translate.plan_group`);
4. commit them to the same-named groups on the target: not to a group with active members
   (``onActiveConsumerGroupCommit``), never backwards unless the source group moved back
   (:mod:`~k2k.offsetmapping.guard`), and not at all when nothing changed;
5. on ``offsetMapping.retention.schedule``, delete the mappings no longer needed
   (:mod:`~k2k.offsetmapping.retention`).

docs/offset-mapping.md is the operator's guide.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from k2k.coordination.topics import ensure_control_topic
from k2k.errors import ClusterError, OffsetMappingError
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView
from k2k.kafka.groups import (
    Committed,
    alter_offsets,
    committed_offsets,
    group_states,
    list_groups,
)
from k2k.offsetmapping.guard import Guard, may_commit
from k2k.offsetmapping.index import Span
from k2k.offsetmapping.resolve import RunReader
from k2k.offsetmapping.retention import cut_points
from k2k.offsetmapping.store import MappingStore
from k2k.offsetmapping.translate import GroupPlan, plan_group

if TYPE_CHECKING:
    from k2k.config.offset_mapping import OffsetMappingAppConfig

__all__ = ["OffsetMappingApp", "PassReport"]

log = logging.getLogger("k2k.offsetmapping")

#: A commit to a group with members is refused with one of these.
_ACTIVE_CODES = {
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.NON_EMPTY_GROUP,
}


@dataclass(slots=True)
class PassReport:
    """What one pass did; printed by ``k2k offset-mapping start`` and logged per pass."""

    groups: int = 0
    translated: int = 0
    committed: int = 0
    unchanged: int = 0
    kept_by_guard: int = 0
    inexact: int = 0
    untranslated: int = 0
    multiple: int = 0
    active: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: Per source position committed translated this pass: seconds since a pass first
    #: saw the group at that position (the app's checkpoint latency).
    latencies: list[float] = field(default_factory=list)

    def line(self) -> str:
        parts = [
            f"{self.groups} groups",
            f"{self.translated} partitions translated",
            f"{self.committed} committed",
            f"{self.unchanged} unchanged",
        ]
        extras = {
            "kept by the guard": self.kept_by_guard,
            "lower bounds": self.inexact,
            "before the oldest mapping": self.untranslated,
            "with several targets (ignored)": self.multiple,
            "active groups skipped": len(self.active),
            "failed": len(self.failures),
        }
        parts += [f"{n} {what}" for what, n in extras.items() if n]
        return ", ".join(parts) + f" in {self.seconds:.2f} s"


class PassMetrics(Protocol):
    """What the app tells its metrics (k2k.metrics.app): once per pass."""

    def on_pass(self, report: PassReport) -> None: ...

    def pass_failed(self) -> None: ...

    def close(self) -> None: ...


class OffsetMappingApp:
    """Runs on: the app's own process (no Spark)."""

    def __init__(
        self,
        cfg: OffsetMappingAppConfig,
        metrics: Callable[[ClusterView], PassMetrics] | None = None,
    ) -> None:
        """``metrics``: builds the app's metrics once the target is reachable (``-t``)."""
        self.cfg = cfg
        self._metrics_factory = metrics
        self.metrics: PassMetrics | None = None
        self.timeout_s = max(
            cfg.source.connect_timeout.total_seconds(), cfg.target.connect_timeout.total_seconds()
        )
        self.source = ClusterView.of(cfg.source)
        self.target = ClusterView.of(cfg.target)
        self._stop = threading.Event()
        self._warned: set[tuple[str, str, TP]] = set()
        self._needed: set[Span] = set()
        self._deleted_to: dict[int, int] = {}
        self._next_clean = time.monotonic() + cfg.offset_mapping.retention.schedule.total_seconds()
        self.store: MappingStore | None = None
        self.runs: RunReader | None = None
        #: (group, source partition) -> (position, when a pass first saw it there).
        self._seen: dict[tuple[str, TP], tuple[int, float]] = {}

    def request_stop(self) -> None:
        self._stop.set()

    def run(self, once: bool) -> PassReport:
        """Prepare, then pass every ``pollInterval`` until stopped (or once); returns the
        last pass's report. Policy failures raise :class:`OffsetMappingError`."""
        self._prepare()
        interval = self.cfg.groups.poll_interval.total_seconds()
        try:
            while True:
                started = time.monotonic()
                try:
                    report = self.one_pass()
                except ClusterError as exc:
                    if self.metrics is not None:
                        self.metrics.pass_failed()
                    if once:
                        raise
                    # A cluster that does not answer now may next pass: keep the service up.
                    log.warning("pass failed, retried in %g s: %s", interval, exc)
                    if self._stop.wait(interval):
                        return PassReport()
                    continue
                log.info("pass: %s", report.line())
                if self.metrics is not None:
                    self.metrics.on_pass(report)
                if once:
                    if report.failures:
                        raise OffsetMappingError(report.failures[0])
                    return report
                for failure in report.failures:
                    log.warning("%s; retried next pass", failure)
                if not report.failures:  # a group not read this pass may need any mapping
                    self._clean_if_due()
                if self._stop.wait(max(0.0, interval - (time.monotonic() - started))):
                    return report
        finally:
            self.close()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.runs is not None:
            self.runs.close()
            self.runs = None
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None

    def _prepare(self) -> None:
        cfg = self.cfg
        self.source.topics()  # reachability first: a bounded failure naming the cluster
        settings = cfg.topic_creation.control.offset_mapping()
        ensure_control_topic(
            self.target,
            cfg.offset_mapping.topic,
            "offsetMapping.topic",
            auto_create=cfg.features.auto_create_control_topics,
            validate=cfg.features.validate_control_topic_settings,
            partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            configs=settings.configs,
            policy="delete",
        )
        self.store = MappingStore(
            cfg.target_client("consumer"), cfg.offset_mapping.topic, self.timeout_s
        )
        self.runs = RunReader(cfg.target_client("consumer"), self.timeout_s)
        if self._metrics_factory is not None:
            self.metrics = self._metrics_factory(self.target)

    # -- one pass --------------------------------------------------------------------------

    def one_pass(self) -> PassReport:
        assert self.store is not None
        started = time.monotonic()
        report = PassReport()
        selected = [
            g for g in list_groups(self.source.admin, self.timeout_s) if self.cfg.groups.selects(g)
        ]
        sources, errors = committed_offsets(self.source.admin, selected, self.timeout_s)
        report.failures += [str(e) for e in errors]
        self._note_positions(sources, started)
        self.store.catch_up()
        plans = {g: self._plan(g, offsets, report) for g, offsets in sources.items()}
        plans = {g: p for g, p in plans.items() if p.offsets}
        report.groups = len(sources)
        self._needed = {s for p in plans.values() for s in p.needed}
        idle = self._idle_groups(sorted(plans), report)
        self._commit({g: plans[g] for g in idle}, report)
        report.seconds = time.monotonic() - started
        return report

    def _note_positions(self, sources: dict[str, dict[TP, Committed]], now: float) -> None:
        """Remember when each group position was first seen, for the checkpoint latency."""
        seen = self._seen
        for key in [k for k in seen if k[0] not in sources]:
            del seen[key]  # a group gone (or not read this pass) starts afresh
        for group, offsets in sources.items():
            for tp, (offset, _meta) in offsets.items():
                before = seen.get((group, tp))
                if before is None or before[0] != offset:
                    seen[(group, tp)] = (offset, now)

    def _latencies(self, group: str, sources: dict[TP, int]) -> list[float]:
        """Seconds from first seeing each of ``sources`` to its commit now."""
        now = time.monotonic()
        return [
            now - seen[1]
            for tp, offset in sources.items()
            if (seen := self._seen.get((group, tp))) is not None and seen[0] == offset
        ]

    def _plan(self, group: str, offsets: dict[TP, Committed], report: PassReport) -> GroupPlan:
        assert self.store is not None
        resolve = self.runs.resolve if self.runs is not None else None
        plan = plan_group({tp: o for tp, (o, _) in offsets.items()}, self.store.indexes, resolve)
        report.translated += sum(len(s) for s in plan.sources.values())
        report.inexact += plan.inexact
        for tp in plan.untranslated:
            report.untranslated += 1
            self._warn_once(
                "before",
                group,
                tp,
                f"group {group!r}: {tp[0]}[{tp[1]}] at source offset {offsets[tp][0]} is "
                "before the oldest mapping of that partition; left untranslated",
            )
        for tp, targets in plan.multiple.items():
            named = (
                ", ".join(f"{t}[{p}]" for t, p in targets) or "one partition, by several pipelines"
            )
            what = (
                f"group {group!r}: source {tp[0]}[{tp[1]}] was replicated to several target "
                f"partitions ({named})"
            )
            if self.cfg.error_handling.on_multiple_target_committed_offsets == "fail":
                raise OffsetMappingError(
                    f"{what} (errorHandling.onMultipleTargetCommittedOffsets: fail); expected "
                    "one target partition per source partition, or set it to 'ignore' to leave "
                    "such partitions untranslated"
                )
            report.multiple += 1
            self._warn_once(
                "multiple",
                group,
                tp,
                f"{what}; left untranslated (errorHandling.onMultipleTargetCommittedOffsets: "
                "ignore)",
            )
        return plan

    def _idle_groups(self, groups: list[str], report: PassReport) -> list[str]:
        """The groups without members on the target; the others per the policy."""
        states = group_states(self.target.admin, groups, self.timeout_s)
        idle = []
        for group in groups:
            state = states.get(group)
            if state is None or not state.active:
                idle.append(group)
                continue
            self._on_active(group, f"{state.members} active member(s), state {state.state}", report)
        return idle

    def _on_active(self, group: str, why: str, report: PassReport) -> None:
        what = f"target group {group!r} has {why}; its offsets were not moved"
        if self.cfg.error_handling.on_active_consumer_group_commit == "fail":
            raise OffsetMappingError(
                f"{what} (errorHandling.onActiveConsumerGroupCommit: fail); expected the "
                "group's consumers on the target to be stopped until failover, or set it to "
                "'ignore' to skip such groups and retry them every pass"
            )
        report.active.append(group)
        self._warn_once(
            "active",
            group,
            ("", -1),
            f"{what}; retried every pass (errorHandling.onActiveConsumerGroupCommit: ignore)",
        )

    def _commit(self, plans: dict[str, GroupPlan], report: PassReport) -> None:
        current, errors = committed_offsets(self.target.admin, plans, self.timeout_s)
        report.failures += [str(e) for e in errors]
        prefix = self.cfg.groups.offset_guard_prefix
        enforce = self.cfg.features.apply_mappings_guard
        commits: dict[str, dict[TP, Committed]] = {}
        for group, plan in plans.items():
            if group not in current:
                continue
            for target, offset in plan.offsets.items():
                guard = Guard(plan.sources[target])
                old_offset, old_meta = current[group].get(target, (None, None))
                old_guard = Guard.decode(old_meta, prefix)
                if old_offset == offset and old_guard == guard:
                    report.unchanged += 1
                elif enforce and not may_commit(offset, guard, old_offset, old_guard):
                    report.kept_by_guard += 1
                else:
                    commits.setdefault(group, {})[target] = (offset, guard.encode(prefix))
        for error in alter_offsets(self.target.admin, commits, self.timeout_s):
            commits.pop(error.group, None)
            if error.code in _ACTIVE_CODES:
                self._on_active(error.group, "members (the broker refused the commit)", report)
            else:
                report.failures.append(str(error))
        report.committed += sum(len(c) for c in commits.values())
        for group, done in commits.items():
            for target in done:
                report.latencies += self._latencies(group, plans[group].sources[target])

    # -- retention -------------------------------------------------------------------------

    def _clean_if_due(self) -> None:
        if time.monotonic() < self._next_clean:
            return
        retention = self.cfg.offset_mapping.retention
        self._next_clean = time.monotonic() + retention.schedule.total_seconds()
        self.clean()

    def clean(self) -> dict[int, int]:
        """Delete the mappings retention lets go; returns the new start per partition."""
        assert self.store is not None
        retention = self.cfg.offset_mapping.retention
        age = retention.max_age()
        oldest_ms = None if age is None else int((time.time() - age.total_seconds()) * 1000)
        cuts = cut_points(self.store.by_partition, retention.count, oldest_ms, self._needed)
        topic = self.store.topic
        due = {p: c for p, c in cuts.items() if c > self._deleted_to.get(p, 0)}
        if not due:
            return {}
        request = [TopicPartition(topic, p, c) for p, c in sorted(due.items())]
        done: dict[int, int] = {}
        for tp, future in self.target.admin.delete_records(
            request, request_timeout=self.timeout_s
        ).items():
            try:
                future.result()
            except KafkaException as exc:
                log.warning("could not delete old mappings of %s[%d]: %s", topic, tp.partition, exc)
                continue
            self.store.prune(tp.partition, tp.offset)
            self._deleted_to[tp.partition] = done[tp.partition] = tp.offset
        if done:
            log.info("retention: deleted mappings below %s", done)
        return done

    def _warn_once(self, kind: str, group: str, tp: TP, message: str) -> None:
        if (kind, group, tp) not in self._warned:
            self._warned.add((kind, group, tp))
            log.warning("%s", message)
