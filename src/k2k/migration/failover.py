"""``k2k failover``: the source is lost; stop and fence the pipeline on the target, say what
was not replicated, and move the groups to their last known exact positions.

Runs on: the operator's machine, and never contacts the source. The same recorded steps as
a cut-over (:mod:`k2k.migration.cutover`), with the record's ``mode`` ``failover``:

1. **cut** (and **drain** at once): the committed progress is the cut, and the record says
   drained, so running members stop; ``recovery`` holds per partition the committed offset,
   the newest source end k2k observed and when it committed;
2. **stop**: every partition claimed as ``k2k-cutover`` (exactly-once producers fenced);
   ``targetEnds`` is the fork point a reverse pipeline starts from;
3. **groups**: the source positions the Offset Mapping app last translated each target group
   from (the guard in its commit metadata) are translated again through every mapping now
   on the target, and committed; groups that cannot be moved are named, with the reason.
"""

from __future__ import annotations

import socket
from collections import defaultdict

from k2k.coordination.controltopics import ensure_control_topics
from k2k.formats.cutover import CutoverRecord, GroupPosition, RecoveryPoint
from k2k.kafka import TP
from k2k.kafka.groups import Committed, alter_offsets, committed_offsets, group_states, list_groups
from k2k.migration.cutover import Cutover, now_ms
from k2k.migration.report import CutoverReport
from k2k.offsetmapping.guard import Guard

__all__ = ["Failover"]


class Failover(Cutover):
    """Runs on: the operator's machine. One pipeline's failover (the source is not used)."""

    def run(self) -> CutoverReport:
        rec = self.recorded()
        if rec is not None and rec.done:
            return CutoverReport.of_record(rec, already=True)
        self._assignment_partitions = ensure_control_topics(
            self.cfg, self.reader.target, mappings=False
        ).assignment
        if rec is None:
            rec = self._write(self._cut())
        if "stop" not in rec.steps:
            self._stop_and_hold(rec.cut)
            # Read again once every producer is fenced: a transaction a zombie had asked to
            # commit completes when it is fenced, so its progress counts only now.
            after = self._cut()
            rec = self._write(
                rec.with_step(
                    "stop",
                    now_ms(),
                    cut=after.cut,
                    recovery=after.recovery,
                    target_ends=self._target_ends(after.cut),
                )
            )
        rows, notes = self._move_groups(rec)
        rec = self._write(rec.with_step("groups", now_ms(), positions=tuple(rows)))
        report = CutoverReport.of_record(rec, already=False)
        report.notes = notes
        return report

    def preview(self) -> CutoverRecord:
        """The record the first step would write (the plan without ``--yes``)."""
        return self._cut()

    def _cut(self) -> CutoverRecord:
        progress = self.reader.progress()
        recovery = tuple(
            RecoveryPoint(t, p, r.offset, r.end, r.committed_at_ms)
            for (t, p), r in sorted(progress.items())
        )
        now = now_ms()
        return CutoverRecord(
            self.cfg.commit_group,
            self.cfg.name,
            ("cut", "drain"),
            {tp: r.offset for tp, r in progress.items()},
            {},
            (),
            (),
            now,
            now,
            socket.gethostname(),
            "failover",
            recovery,
        )

    def _guarded_positions(self) -> tuple[dict[str, dict[TP, int]], list[str]]:
        """The selected target groups' source positions, read from the guards of their
        commits; and a note per group whose commits carry none."""
        admin, timeout = self.reader.target.admin, self.reader.target.timeout_s
        prefix = self.app.groups.offset_guard_prefix
        groups = [g for g in list_groups(admin, timeout) if self.selects(g)]
        found, errors = committed_offsets(admin, groups, timeout)
        notes = [f"{e}; not moved" for e in errors]
        positions: dict[str, dict[TP, int]] = {}
        for group, offsets in sorted(found.items()):
            guards = [Guard.decode(meta, prefix) for _, meta in offsets.values()]
            sources = {tp: o for g in guards if g is not None for tp, o in g.sources.items()}
            if sources:
                positions[group] = sources
            elif offsets:
                notes.append(
                    f"group {group!r}: not moved: its target commits carry no guard "
                    f"({prefix}…), so the source positions they stand for are not known"
                )
        return positions, notes

    def _move_groups(self, rec: CutoverRecord) -> tuple[list[GroupPosition], list[str]]:
        if not self.cfg.features.offset_mapping:
            return [], ["groups not moved: features.offsetMapping is disabled"]
        positions, notes = self._guarded_positions()
        rows = self.classify(positions, sorted(rec.cut))
        admin, timeout = self.reader.target.admin, self.reader.target.timeout_s
        active = {g for g, s in group_states(admin, sorted(positions), timeout).items() if s.active}
        notes += [
            f"group {g!r}: not moved: it has active members on the target" for g in sorted(active)
        ]
        prefix = self.app.groups.offset_guard_prefix
        commits: dict[str, dict[TP, Committed]] = defaultdict(dict)
        by_target: dict[tuple[str, TP], dict[TP, int]] = defaultdict(dict)
        for row in rows:
            if row.group in active or row.target is None or row.target_topic is None:
                continue
            target = (row.target_topic, row.target_partition or 0)
            sources = by_target[(row.group, target)]
            sources[(row.topic, row.partition)] = row.source or 0
            # Several source partitions into one target partition: the lowest translation.
            current = commits[row.group].get(target)
            if current is None or row.target < current[0]:
                commits[row.group][target] = (row.target, "")
        for (group, target), sources in by_target.items():
            offset, _ = commits[group][target]
            commits[group][target] = (offset, Guard(sources).encode(prefix))
        notes += [f"{e}; not moved" for e in alter_offsets(admin, commits, timeout)]
        return rows, notes
