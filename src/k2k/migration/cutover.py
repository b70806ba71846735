"""``k2k cutover``: move a pipeline's consumer groups to the target and stop replicating, in
recorded, resumable steps.

Runs on: the operator's machine. Each step rewrites the cut-over record
(:mod:`k2k.formats.cutover`) once done, so a run that is killed resumes from the last
recorded step:

1. **cut**: the source end offsets once they stood still (:mod:`~k2k.migration.cutpoint`);
2. **drain**: committed progress reaches the cut everywhere; a running member copies, and
   with none alive the command copies up to the cut itself (``--until-caught-up``);
3. **stop**: members read the drained record and stop; the command then claims every
   partition as :data:`~k2k.coordination.assignment.CUTOVER_MEMBER` (fencing exactly-once
   producers still about) and never releases the claims;
4. **groups**: the Offset Mapping app's pass for the selected groups, the offset-confidence
   report (:mod:`~k2k.migration.confidence`) and the records on each side of the cut.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from k2k.admin.reader import PipelineReader
from k2k.config import PipelineConfig
from k2k.config.offset_mapping import OffsetMappingAppConfig
from k2k.coordination.assignment import CUTOVER_MEMBER, TOOL_MEMBERS
from k2k.coordination.controltopics import assignment_member, ensure_control_topics
from k2k.errors import ClusterError, K2KError
from k2k.formats.cutover import CutoverRecord
from k2k.kafka import TP
from k2k.kafka.bulk import named
from k2k.kafka.factory import build_producer
from k2k.kafka.groups import committed_offsets, group_states, list_groups
from k2k.kafka.murmur2 import murmur2_partition
from k2k.migration.confidence import classify_groups
from k2k.migration.counting import replicated_counts
from k2k.migration.cutpoint import wait_for_cut
from k2k.migration.report import CutoverReport, PartitionLeft
from k2k.offsetmapping.app import OffsetMappingApp
from k2k.offsetmapping.index import PartitionIndex
from k2k.offsetmapping.resolve import RunReader
from k2k.offsetmapping.store import MappingStore

__all__ = ["Cutover", "CutoverOptions", "CutoverRefused", "now_ms"]

log = logging.getLogger("k2k.cutover")

#: How often progress and members are read while waiting for them.
POLL_S = 0.5


class CutoverRefused(K2KError):
    """The cut-over cannot go on as asked (nothing more was written)."""


@dataclass(frozen=True, slots=True)
class CutoverOptions:
    #: A regular expression over group names; None: the app's ``groups.consumerGroups``.
    groups: str | None = None
    quiet_s: float = 10.0
    timeout_s: float = 600.0
    #: Count the records on each side of the cut (reads both ranges once).
    count: bool = True


class Cutover:
    """Runs on: the operator's machine. One pipeline's cut-over (or its dry run)."""

    def __init__(
        self,
        cfg: PipelineConfig,
        app: OffsetMappingAppConfig,
        options: CutoverOptions,
        say: Callable[[str], None],
        start_at: Mapping[TP, int] | None = None,
    ) -> None:
        """``start_at``: where the pipeline starts partitions without progress when the
        command copies up to the cut itself (a reverse pipeline: its fork point)."""
        self.cfg = cfg
        self.start_at = start_at
        self.app = app
        self.options = options
        self.say = say
        self.reader = PipelineReader(cfg)
        self.timeout_s = cfg.target.connect_timeout.total_seconds()
        self._store: MappingStore | None = None
        #: Partitions of the assignment topic, once the control topics are checked.
        self._assignment_partitions = 0

    # -- reading ---------------------------------------------------------------------------

    def recorded(self) -> CutoverRecord | None:
        """The cut-over record of this pipeline, as the target holds it now."""
        return self.reader.assignment().view.cutover

    def partitions(self) -> list[TP]:
        """The source partitions the pipeline replicates now."""
        return [
            (t, p) for t, info in self.reader.selected().items() for p in range(info.partitions)
        ]

    def selects(self, group: str) -> bool:
        if self.options.groups is not None:
            import re

            return re.fullmatch(self.options.groups, group) is not None
        return self.app.groups.selects(group)

    def source_positions(self, topics: set[str]) -> dict[str, dict[TP, int]]:
        """The selected groups' committed source offsets on ``topics`` (groups with none
        there are left out)."""
        admin, timeout = self.reader.source.admin, self.reader.source.timeout_s
        groups = [g for g in list_groups(admin, timeout) if self.selects(g)]
        found, errors = committed_offsets(admin, groups, timeout)
        if errors:
            raise errors[0]
        return {
            g: {tp: o for tp, (o, _) in offsets.items() if tp[0] in topics}
            for g, offsets in found.items()
            if any(tp[0] in topics for tp in offsets)
        }

    def refuse_active(self, topics: set[str]) -> None:
        """A selected group still consuming the pipeline's topics on the source would move
        on after its translation: refuse, naming it."""
        admin, timeout = self.reader.source.admin, self.reader.source.timeout_s
        groups = [g for g in list_groups(admin, timeout) if self.selects(g)]
        committed = self.source_positions(topics)
        for group, state in sorted(group_states(admin, groups, timeout).items()):
            if state.active and (group in committed or state.topics & topics):
                raise CutoverRefused(
                    f"group {group!r} is still active on the source ({state.members} "
                    f"member(s), state {state.state}); expected its consumers stopped before "
                    "the cut-over, or --groups to leave it out"
                )

    def mappings(self) -> MappingStore:
        if self._store is None:
            self._store = MappingStore(
                self.cfg.control_consumer(), self.cfg.offset_mapping.topic, self.timeout_s
            )
        self._store.catch_up()
        return self._store

    def index(self, tp: TP) -> PartitionIndex | None:
        """The pipeline's mappings of ``tp`` as last caught up (read once if never)."""
        store = self._store if self._store is not None else self.mappings()
        return store.indexes(tp).get(self.cfg.name)

    def classify(self, positions: dict[str, dict[TP, int]], replicated: list[TP]) -> list:
        self.mappings()  # caught up once; index() reads what it holds
        runs = RunReader(self.cfg.target_client("consumer"), self.timeout_s)
        try:
            return classify_groups(positions, replicated, self.index, runs.resolve)
        finally:
            runs.close()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- the dry run -----------------------------------------------------------------------

    def dry_run(self) -> CutoverReport:
        """The report as if the cut-over happened now; writes nothing anywhere."""
        tps = self.partitions()
        ends = self.reader.source.offsets(tps, "latest")
        committed = {tp: r.offset for tp, r in self.reader.progress().items()}
        positions = self.source_positions({t for t, _ in tps})
        left = [
            PartitionLeft(t, p, ends[(t, p)], committed.get((t, p)), None) for t, p in sorted(ends)
        ]
        if self.options.count:
            left = _counted_left(self.cfg, left)
        return CutoverReport(
            self.cfg.name, None, self.classify(positions, sorted(ends)), left=left, dry_run=True
        )

    # -- the cut-over ----------------------------------------------------------------------

    def run(self) -> CutoverReport:
        """Every step not yet recorded, in order; the report at the end."""
        rec = self.recorded()
        if rec is not None and rec.done:
            return CutoverReport.of_record(rec, already=True)
        tps = self.partitions() if rec is None else sorted(rec.cut)
        self.refuse_active({t for t, _ in tps})
        # A pipeline that never ran has none yet: the command may copy everything itself.
        self._assignment_partitions = ensure_control_topics(self.cfg, self.reader.target).assignment
        self.reader = PipelineReader(self.cfg)  # its topic listing predates them
        if rec is None:
            self.say(f"cut: waiting for {len(tps)} source partitions to stand still")
            cut = wait_for_cut(
                self.reader.source, tps, self.options.quiet_s, self.options.timeout_s, self.say
            )
            now = now_ms()
            rec = CutoverRecord(
                self.cfg.commit_group,
                self.cfg.name,
                ("cut",),
                cut,
                {},
                (),
                (),
                now,
                now,
                socket.gethostname(),
            )
            self._write(rec)
        if not rec.drained:
            self._drain(rec.cut)
            rec = self._write(rec.with_step("drain", now_ms()))
        if "stop" not in rec.steps:
            self._stop_and_hold(rec.cut)
            ends = self._target_ends(rec.cut)
            rec = self._write(rec.with_step("stop", now_ms(), target_ends=ends))
        return self._groups(rec)

    def _write(self, rec: CutoverRecord) -> CutoverRecord:
        """Write ``rec`` to the assignment topic and wait for the target to take it."""
        topic = self.cfg.coordination.assignment.topic
        producer = build_producer(
            {
                **self.cfg.target_client("producer"),
                "acks": "all",
                "enable.idempotence": "true",
                "linger.ms": "0",
                "compression.type": "gzip",
            }
        )
        key, value = rec.encode()
        errors: list[str] = []
        producer.produce(
            topic,
            value,
            key,
            murmur2_partition(key, self._assignment_partitions),
            on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
        )
        left = producer.flush(self.timeout_s)
        if left or errors:
            why = errors[0] if errors else f"not acknowledged within {self.timeout_s:g} s"
            raise ClusterError(f"could not write the cut-over record to {topic}: {why}")
        log.info("cut-over record: %s", "/".join(rec.steps))
        self.say(f"{rec.steps[-1]}: done")
        return rec

    def _members_alive(self) -> list[str]:
        state = self.reader.assignment()
        now = state.observer_now(now_ms())
        return sorted(m for m in state.alive(now) if m not in TOOL_MEMBERS)

    def _drain(self, cut: dict[TP, int]) -> None:
        """Wait until committed progress reaches the cut on every partition."""
        if not self._members_alive():
            self.say("drain: no member of the pipeline is running; copying up to the cut here")
            from k2k.pipeline.driver.planner import Planner

            Planner(self.cfg, until_caught_up=True, start_at=self.start_at).run()
        deadline = time.monotonic() + self.options.timeout_s
        told = 0.0
        while True:
            committed = {tp: r.offset for tp, r in self.reader.progress().items()}
            behind = {tp: c - committed.get(tp, 0) for tp, c in cut.items()}
            behind = {tp: n for tp, n in behind.items() if n > 0}
            if not behind:
                return
            now = time.monotonic()
            if now >= deadline:
                raise CutoverRefused(
                    f"drain: progress did not reach the cut within --timeout "
                    f"({self.options.timeout_s:g} s) on {named(behind, most=8)}; expected a "
                    "running k2k start of the pipeline (or none: the command copies itself)"
                )
            if now - told >= 5:
                told = now
                self.say(
                    f"drain: {sum(behind.values())} offsets left to commit on "
                    f"{len(behind)} partitions"
                )
            time.sleep(POLL_S)

    def _stop_and_hold(self, cut: dict[TP, int]) -> None:
        """Wait for members to stop (they read the drained record), then claim every
        partition: members that did not stop in time are fenced."""
        grace = self.cfg.coordination.assignment.grace_window.total_seconds()
        deadline = time.monotonic() + 2 * grace + 30
        while (alive := self._members_alive()) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if alive:
            self.say(f"stop: member(s) {', '.join(alive)} did not stop; taking their claims")
        topic = self.cfg.coordination.assignment.topic
        partitions = self.reader.target_topics()[topic].partitions
        member = assignment_member(self.cfg, CUTOVER_MEMBER, standby=False, partitions=partitions)
        try:
            member.catch_up()
            member.acquire(dict.fromkeys(sorted(cut), ""), lambda: False)
            member.leave({})  # the claims stay: a later claimant must deal with them
        finally:
            member.close()

    def _targets(self) -> dict[TP, TP]:
        """Source partition -> the one target partition its records went to."""
        out: dict[TP, TP] = {}
        for tp, by_pipeline in self.mappings().by_source.items():
            index = by_pipeline.get(self.cfg.name)
            if index is not None and len(index.targets) == 1:
                (out[tp],) = index.targets
        return out

    def _target_ends(self, cut: dict[TP, int]) -> dict[TP, int]:
        """The end offset of every partition of the target topics the cut's topics go to
        (the fork point of a reverse run, :mod:`k2k.migration.fork`): also the partitions
        k2k never wrote to, so records written there after the cut-over are known as new."""
        router = self.cfg.topic_router()
        names = {router.route(t) for t, _ in cut} - {None}
        on_target = self.reader.target.topics()
        routed = {(n, p) for n in names if n in on_target for p in range(on_target[n].partitions)}
        targets = sorted(set(self._targets().values()) | routed)
        return self.reader.target.offsets(targets, "latest", committed_only=False)

    def _groups(self, rec: CutoverRecord) -> CutoverReport:
        """One last translation pass, the report, and the record that says it is done."""
        tps = sorted(rec.cut)
        self.refuse_active({t for t, _ in tps})
        positions = self.source_positions({t for t, _ in tps})
        rows = self.classify(positions, tps)
        app = self.app
        if self.options.groups is not None:
            selected = sorted(positions)
            app = app.model_copy(
                update={"groups": app.groups.model_copy(update={"consumer_groups": selected})}
            )
        pass_report = OffsetMappingApp(app).run(once=True)
        counts = []
        if self.options.count:
            counts = replicated_counts(self.cfg, rec, self._targets(), self.index)
        rec = self._write(
            rec.with_step("groups", now_ms(), positions=tuple(rows), counts=tuple(counts))
        )
        report = CutoverReport.of_record(rec, already=False)
        report.groups_pass = pass_report.line()
        return report


def _counted_left(cfg: PipelineConfig, left: list[PartitionLeft]) -> list[PartitionLeft]:
    from k2k.kafka.counting import count_records

    ranges = {(p.topic, p.partition): (p.committed or 0, p.end) for p in left}
    counts = count_records(
        cfg.source_client("consumer"),
        f"k2k.{cfg.name}",
        ranges,
        cfg.source.connect_timeout.total_seconds(),
    )
    return [
        PartitionLeft(p.topic, p.partition, p.end, p.committed, counts[(p.topic, p.partition)])
        for p in left
    ]


def now_ms() -> int:
    return int(time.time() * 1000)
