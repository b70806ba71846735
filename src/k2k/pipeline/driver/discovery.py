"""Topic discovery: which source topics a pipeline copies, where to, and from which offset.

Runs on: driver, once at start and at every lease boundary (plus a cheap check every
``replication[].source.discoveryInterval`` while a lease runs). A discovery pass:

1. lists the source topics (at start, listed names must all exist) and their topic ids;
2. selects them (:class:`~k2k.stages.TopicSelection`: internal and k2k's control topics are
   never selected) and routes them (``replication[].sink.topic``, a
   :class:`~k2k.stages.TopicRouter`; a topic without a route is logged once and skipped);
3. settles the topic lifecycle: a selected topic that was deleted is no longer replicated
   (records known to be unreplicated follow ``errorHandling.onSourceRecordsLost``); one
   deleted and created again (a new topic id, also one recorded in progress) starts over at
   its earliest offsets; a target topic deleted or re-created while replicating stops the
   pipeline (its earlier records are gone from the target);
4. creates, grows (``partition: source`` with ``autoCreateTopics``) or checks the target
   topic of every new topic, or of one whose partition count changed, and compiles its
   :class:`~k2k.stages.TopicPlan`; a created topic carries the source topic's configs that
   ``topicCreation.replicated.configExclusions`` lets through (their later changes:
   :mod:`k2k.pipeline.driver.services.configsync`);
5. resolves a start offset for partitions without progress: ``auto.offset.reset`` for the
   topics of the first pass and new topics, the earliest offset for partitions added to a
   topic already replicated (their records must not be skipped); a run given start offsets
   (``start_at``: the reverse run's fork point) takes those instead
   (:func:`~k2k.pipeline.driver.positions.starts_at`).

docs/operations.md#topic-lifecycle says the same for operators.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka.admin import NewTopic

from k2k.config import PipelineConfig
from k2k.errors import K2KError, ReplicationError, TopicError
from k2k.kafka import TP
from k2k.kafka.admin import ClusterView, TopicInfo
from k2k.kafka.factory import producer_settings
from k2k.pipeline.driver.alignment import align_targets
from k2k.pipeline.driver.positions import StartPositions, starts_at
from k2k.schemamapping import schema_transforms
from k2k.stages import TopicPlan, TopicRouter, compile_topic_plans
from k2k.stages.bidirectional import LoopMarker, loop_marker
from k2k.transforms import steps_for

__all__ = ["Discovery"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")


class Discovery:
    """Runs on: driver. The selected source topics, their routes and target topics.

    ``selected`` holds the topics of the last pass (source topic -> partitions);
    :meth:`plans` the compiled plans of those topics, for the lease spec.
    """

    def __init__(self, cfg: PipelineConfig, start_at: Mapping[TP, int] | None = None) -> None:
        self.cfg = cfg
        #: Start offsets for partitions without progress, given by the caller (step 5).
        self.start_at = start_at
        self.router: TopicRouter = cfg.topic_router()
        self.selection = cfg.topic_selection()
        self.source = ClusterView.of(cfg.source)
        self.target = ClusterView.of(cfg.target)
        self.selected: dict[str, TopicInfo] = {}
        #: Topic ids of the selected source topics, and of their target topics.
        self.ids: dict[str, str] = {}
        self.target_ids: dict[str, str] = {}
        self._passes = 0
        #: Topics of the last pass that were deleted and created again.
        self.recreated: set[str] = set()
        #: The source end offsets planned with, and the topic id they were read under.
        self._ends_seen: dict[TP, tuple[str, int]] = {}
        #: Told of records deleted with their topic before they were replicated (topic,
        #: partition, count), under ``onSourceRecordsLost: continue`` (the metrics).
        self.on_records_lost: Callable[[str, int, int], None] | None = None
        self._routes: dict[str, str] = {}
        self._plans: dict[str, TopicPlan] = {}
        #: Schema-id rewriting per topic; one mapper (one cache per runner task) for all.
        self._transforms = schema_transforms(cfg)
        self._steps = steps_for(cfg)
        self._unrouted_logged: set[str] = set()
        self._marker: LoopMarker | None = None

    def discover(
        self,
        positions: StartPositions,
        ends: Mapping[TP, int] | None = None,
        latest: Mapping[TP, int] | None = None,
        committed: Mapping[TP, int] | None = None,
    ) -> dict[str, TopicInfo]:
        """One discovery pass (steps 1-5 above); returns and keeps the selected topics.

        ``ends`` (``--until-caught-up``) fixes the topics to those captured at start;
        ``latest``: the source end offsets seen last, ``committed``: the progress of every
        member seen last (records between the two are lost when their topic is deleted).
        Raises
        :class:`~k2k.errors.TopicError` for a listed topic that does not exist at start, a
        topic routed onto itself, a target topic that is missing, too small, or was
        deleted while replicating; :class:`~k2k.errors.ReplicationError` for a deleted
        topic's unreplicated records under ``onSourceRecordsLost: fail``."""
        source_topics = self.source.topics()
        if self._passes == 0:
            self._check_listed(source_topics)
        selected = self._select(source_topics)
        if ends is not None:
            known = {t for t, _ in ends}
            selected = {t: i for t, i in selected.items() if t in known}
        ids = self.source.topic_ids(selected)
        selected = {t: i for t, i in selected.items() if t in ids}  # deleted meanwhile
        seen = _Seen(latest or {}, committed or {})
        self._deleted(set(self.selected) - set(selected), positions, seen)
        recreated = self._recreated(selected, ids, positions, committed or {})
        new = [
            t
            for t in selected
            if t not in self._routes
            or t in recreated
            or self.selected.get(t, selected[t]).partitions != selected[t].partitions
        ]
        self.check_targets()
        if new:
            self._ensure_targets({t: selected[t] for t in new})
            routes = {t: self.router.route(t) or t for t in new}
            self._routes.update(routes)
            self._plans.update(
                compile_topic_plans(
                    self.cfg, routes, self._transforms, self._loop_marker(), self._steps
                )
            )
            self._remember_target_ids(set(routes.values()))
        started = self._resolve_starts(selected, positions, recreated)
        self._align_identical(started, positions)
        # Last: a pass that failed before this point finds the same differences again.
        for t, info in selected.items():
            if ids[t]:
                positions.topic_ids.update({(t, p): ids[t] for p in range(info.partitions)})
        self.selected, self.ids, self.recreated = selected, ids, set(recreated)
        self._passes += 1
        return selected

    def _loop_marker(self) -> LoopMarker | None:
        """Bidirectional replication's marker, resolved once (``cluster`` mode asks both
        clusters for their ids)."""
        if self._marker is None and self.cfg.features.bidirectional_replication:
            cluster = self.cfg.bidirectional.mode == "cluster"
            marker = loop_marker(
                self.cfg,
                self.source.cluster_id() if cluster else "",
                self.target.cluster_id() if cluster else "",
            )
            assert marker is not None  # the feature is enabled
            log.info(
                "bidirectional replication: records are marked %s=%r; source records marked "
                "%r are not replicated",
                marker.header,
                marker.stamp.decode(),
                marker.skip.decode(),
            )
            self._marker = marker
        return self._marker

    def partitions(self) -> list[TP]:
        """Every partition of the selected topics."""
        return [(t, p) for t, info in self.selected.items() for p in range(info.partitions)]

    def plans(self) -> dict[str, TopicPlan]:
        """The compiled plan of every selected topic (source topic -> plan)."""
        return {t: self._plans[t] for t in self.selected}

    def routes(self) -> dict[str, str]:
        """The target topic of every selected source topic (source topic -> target topic)."""
        return {t: self._routes[t] for t in self.selected if t in self._routes}

    def topic_ids(self) -> dict[str, str]:
        """The id of every selected source topic (for progress records)."""
        return {t: self.ids[t] for t in self.selected if t in self.ids}

    def saw_ends(self, latest: Mapping[TP, int]) -> None:
        """The source end offsets a lease was planned with (the topics' current ids)."""
        for tp, end in latest.items():
            if tp[0] in self.ids:
                self._ends_seen[tp] = (self.ids[tp[0]], end)

    def sources_changed(self) -> bool:
        """True when a selected source topic was deleted or created again since the last
        pass (a failed lease is planned again then: the change is the likely cause).
        A cluster that does not answer counts as no change."""
        try:
            return self.source.topic_ids(self.selected, retry=False) != self.topic_ids()
        except K2KError:
            return False

    def topics_changed(self) -> bool:
        """True when a selected, routed topic appeared, changed its partition count, was
        deleted or re-created (a new topic id), or the target topic of one was.

        Asked once, never retried here: a lease's watch must not wait on a settling cluster.
        A failed check counts as no change (the next check retries): a failed listing of
        the source is logged; the target's is not, as it fails only while the target does
        not answer, which k2k.observability.reachability reports once."""
        try:
            if self._source_topics_changed():
                return True
        except K2KError as exc:
            level = logging.WARNING if self.source.answering else logging.DEBUG
            log.log(level, "topic discovery failed: %s", exc)
            return False
        if not self.target_ids or not self.target.answering:
            return False
        try:
            return self.target.topic_ids(self.target_ids, retry=False) != self.target_ids
        except K2KError:
            return False

    def _source_topics_changed(self) -> bool:
        current = self.source.topics()
        if any(t not in current for t in self.selected):
            return True
        for name, info in current.items():
            if not self.selection.should_replicate(name) or self.router.route(name) is None:
                continue
            known = self.selected.get(name)
            if known is None or known.partitions != info.partitions:
                return True
        return self.source.topic_ids(self.selected, retry=False) != self.topic_ids()

    # -- steps ---------------------------------------------------------------------------

    def _check_listed(self, source_topics: Mapping[str, TopicInfo]) -> None:
        """Step 1: every topic named in a list selection exists (excluded ones need not)."""
        listed = self.cfg.replication.source.topic
        if isinstance(listed, str):
            return
        absent = sorted(
            t for t in set(listed) - set(source_topics) if self.selection.should_replicate(t)
        )
        if absent:
            raise TopicError(
                f"replication source topic(s) {', '.join(repr(t) for t in absent)} "
                f"listed in replication.source.topic do not exist on the source cluster at "
                f"{self.source.bootstrap}"
            )

    def _select(self, source_topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
        """Step 2: the selected topics that have a route, sorted by name."""
        selected: dict[str, TopicInfo] = {}
        for name, info in sorted(source_topics.items()):
            if not self.selection.should_replicate(name):
                continue
            target = self.router.route(name)
            if target is None:
                if name not in self._unrouted_logged:
                    log.warning(
                        "source topic %s has no route in replication.sink.topic; not replicated",
                        name,
                    )
                    self._unrouted_logged.add(name)
                continue
            if target == name and self.source.bootstrap == self.target.bootstrap:
                raise TopicError(
                    f"topic {name!r} would be replicated onto itself (same cluster, same name)"
                )
            self._check_identical_target(name, target)
            selected[name] = info
        return selected

    def _check_identical_target(self, source: str, target: str) -> None:
        """Identical offsets need the pipeline's copy to be its target topic's only writer;
        with ``features.heartbeats`` k2k writes its own heartbeats into ``heartbeats``."""
        cfg = self.cfg
        if (
            cfg.replication.sink.offsets.identical
            and cfg.features.heartbeats
            and target == cfg.heartbeats.topic
        ):
            raise TopicError(
                f"offsets: identical: source topic {source!r} is routed to {target!r}, where "
                "features.heartbeats writes k2k's own heartbeats, so its offsets cannot stay "
                "identical; route it elsewhere, exclude it, or disable features.heartbeats"
            )

    def _ensure_targets(self, topics: Mapping[str, TopicInfo]) -> None:
        """Step 4: create (``autoCreateTopics``), grow or check the target topic of every new
        source topic, in chunked requests (:meth:`ClusterView.create_topics
        <k2k.kafka.admin.ClusterView.create_topics>`), until the cluster shows them all.
        Several source topics may share one target (many-to-one routing)."""
        wanted: dict[str, int] = {}
        first_source: dict[str, TopicInfo] = {}
        for name, info in topics.items():
            target = self.router.route(name) or name
            wanted[target] = max(wanted.get(target, 0), info.partitions)
            first_source.setdefault(target, info)
        existing = self.target.topics()
        grow: dict[str, int] = {}
        for target, partitions in sorted(wanted.items()):
            if target in existing and self._must_grow(target, existing[target], partitions):
                grow[target] = partitions
        if grow:
            self.target.add_partitions(grow)
        missing = {t: first_source[t] for t in sorted(wanted) if t not in existing}
        if missing:
            self._create_targets(missing, wanted)

    def _must_grow(self, target: str, info: TopicInfo, partitions: int) -> bool:
        """An existing target topic must hold every source partition (``partition: source``):
        with ``autoCreateTopics`` it is grown to the source's count, else that is an error."""
        have = info.partitions
        if self.cfg.replication.sink.partition != "source" or have >= partitions:
            return False
        if not self.cfg.features.auto_create_topics:
            raise TopicError(
                f"target topic {target!r} has {have} partitions but source partitions up "
                f"to {partitions - 1} map to it (replication.sink.partition: source); "
                f"add partitions to the target topic, set features.autoCreateTopics: enabled "
                f"(k2k then adds them), or use partition: hash"
            )
        log.info("growing target topic %s from %d to %d partitions", target, have, partitions)
        return True

    # -- the topic lifecycle -------------------------------------------------------------

    def _deleted(self, gone: set[str], positions: StartPositions, seen: _Seen) -> None:
        """Step 3: selected topics that no longer exist. Records below the last end seen and
        not committed were deleted with the topic before they were replicated."""
        for topic in sorted(gone):
            info = self.selected.pop(topic)  # noticed once, also when a later step fails
            lost = seen.unreplicated(topic, range(info.partitions), positions)
            self._records_lost(topic, lost, "was deleted")
            log.warning(
                "source topic %s was deleted; it is no longer replicated (its target topic "
                "and committed progress are kept; a topic created again under this name is "
                "replicated from its start)",
                topic,
            )
            self._routes.pop(topic, None)  # a topic created again is new: check its target
            self._plans.pop(topic, None)
        routed = set(self._routes.values())
        self.target_ids = {t: i for t, i in self.target_ids.items() if t in routed}

    def _recreated(
        self,
        selected: Mapping[str, TopicInfo],
        ids: Mapping[str, str],
        positions: StartPositions,
        committed: Mapping[TP, int],
    ) -> dict[str, list[int]]:
        """Step 3: per selected topic, the partitions whose position belongs to another
        topic id (the topic was deleted and created again, while running or while the
        pipeline was stopped). Changes nothing: the ids are recorded once the pass is done.
        Records of the old topic not yet replicated were deleted with it."""
        recreated: dict[str, list[int]] = {}
        for topic, info in selected.items():
            if not ids[topic]:
                continue  # a cluster without topic ids
            old = {
                p: positions.topic_ids[(topic, p)]
                for p in range(info.partitions)
                if positions.topic_ids.get((topic, p), ids[topic]) != ids[topic]
            }
            if not old:
                continue
            recreated[topic] = sorted(old)
            # Only ends seen under the old id count (the live display's may be the new one's).
            ends = {
                tp: end
                for tp, (topic_id, end) in self._ends_seen.items()
                if tp[0] == topic and old.get(tp[1]) == topic_id
            }
            lost = _Seen(ends, committed).unreplicated(topic, old, positions)
            self._records_lost(topic, lost, "was re-created")
            log.warning(
                "source topic %s was deleted and created again (topic id %s; the progress of "
                "partitions %s was written for %s): replicating them from their earliest "
                "offsets",
                topic,
                ids[topic],
                ", ".join(map(str, sorted(old))),
                ", ".join(sorted(set(old.values()))),
            )
        return recreated

    def _records_lost(self, topic: str, lost: dict[int, tuple[int, int]], how: str) -> None:
        """Apply ``errorHandling.onSourceRecordsLost`` to records deleted with ``topic``
        before they were replicated (partition -> first, end)."""
        if not lost:
            return
        ranges = ", ".join(f"{topic}[{p}]@{a}..{b - 1}" for p, (a, b) in sorted(lost.items()))
        what = f"records {ranges} were deleted with it before they were replicated"
        if self.cfg.error_handling.on_source_records_lost != "continue":
            listed = not isinstance(self.cfg.replication.source.topic, str)
            on = (
                "remove it from replication.source.topic and restart the pipeline"
                if listed and how == "was deleted"
                else "restart the pipeline"
            )
            raise ReplicationError(
                f"source topic {topic!r} {how} and {what}; {on} to go on without them (or "
                "set errorHandling.onSourceRecordsLost: continue)"
            )
        log.warning("source topic %s %s and %s", topic, how, what)
        if self.on_records_lost is not None:
            for p, (a, b) in lost.items():
                self.on_records_lost(topic, p, b - a)

    def _remember_target_ids(self, targets: set[str]) -> None:
        """The ids of target topics just created or checked, to notice their deletion."""
        self.target_ids.update(self.target.topic_ids(targets))

    def check_targets(self) -> None:
        """Step 3 (also after a failed lease, to say why its writes failed): every target
        topic k2k writes to still is the topic it checked, else
        :class:`~k2k.errors.TopicError`. A deleted one lost the records replicated to it;
        writing on into a new one would hide that."""
        if not self.target_ids:
            return
        now = self.target.topic_ids(self.target_ids)
        for target, topic_id in sorted(self.target_ids.items()):
            if now.get(target) == topic_id:
                continue
            sources = sorted(s for s, t in self._routes.items() if t == target)
            how = "deleted" if target not in now else "deleted and created again"
            raise TopicError(
                f"target topic {target!r} was {how} while replicating (the records "
                f"replicated to it before are gone from the target); k2k stopped rather than "
                f"write on without them. To copy {', '.join(sources) or 'its sources'} again "
                f"from the start, run k2k offsets reset -f <pipeline file> --topic "
                f"{sources[0] if sources else '<source topic>'}; or start the pipeline again "
                f"to continue from the committed positions"
            )

    def _create_targets(self, missing: Mapping[str, TopicInfo], wanted: Mapping[str, int]) -> None:
        """Create each target topic of ``missing`` like its source topic (partitions,
        replication factor, its own topic configs) under ``topicCreation.replicated``, when
        ``features.autoCreateTopics`` allows it; ``wanted``: the most partitions of the
        source topics routed to each."""
        cfg = self.cfg
        if not cfg.features.auto_create_topics:
            target = next(iter(missing))
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise TopicError(
                f"target topic {target!r} (for source topic {missing[target].name!r}) is "
                f"missing on the target cluster at {self.target.bootstrap}{more}; create it or "
                f"set features.autoCreateTopics: enabled"
            )
        own = self.source.configs({s.name for s in missing.values()}, own_only=True)
        new = [
            self._new_target(target, wanted[target], source, own[source.name])
            for target, source in missing.items()
        ]
        log.info("creating %d target topic(s)", len(new))
        try:
            self.target.create_topics(new)
        except TopicError as exc:
            if not cfg.topic_creation.replicated.mirrors_replication_factor():
                raise
            raise TopicError(
                f"{exc} (replication factors mirrored from the source topics; set "
                "topicCreation.replicated.replication, -1 for the target broker's default)"
            ) from None

    def _new_target(
        self, target: str, partitions: int, source: TopicInfo, own: Mapping[str, str]
    ) -> NewTopic:
        """The target topic for ``source`` as ``topicCreation.replicated`` resolves it."""
        replicas = source.replication_factor or -1  # unknown: the target broker's default
        settings = self.cfg.topic_creation.replicated.resolve(partitions, replicas, dict(own))
        if self.cfg.replication.sink.partition == "source" and settings.partitions < partitions:
            raise TopicError(
                f"topicCreation.replicated asks for {settings.partitions} partitions but source "
                f"topic {source.name!r} has {partitions} (partition: source needs at least as "
                "many)"
            )
        log.debug(
            "creating target topic %s (%d partitions, replication factor %d)",
            target,
            settings.partitions,
            settings.replication_factor,
        )
        return NewTopic(
            target,
            settings.partitions,
            settings.replication_factor,
            config=dict(settings.configs),
        )

    def _resolve_starts(
        self,
        selected: Mapping[str, TopicInfo],
        positions: StartPositions,
        recreated: Mapping[str, list[int]],
    ) -> list[TP]:
        """Step 5: a start offset for each partition without one: ``auto.offset.reset``
        (earliest unless it says latest) for topics new to this run, the earliest offset for
        partitions added to a topic already replicated and for re-created topics. Returns
        the partitions given a start."""
        again = [(t, p) for t, parts in sorted(recreated.items()) for p in parts]
        if again:
            positions.restart(self.source.offsets(again, "earliest"))
        missing = positions.missing(
            (t, p) for t, info in selected.items() for p in range(info.partitions)
        )
        if self.start_at is not None:
            if missing:
                self._start_given(missing, positions)
            return again + missing
        replicated = {t for t in selected if t in self.selected} | {
            t for t, _ in positions.has_progress if t in selected
        }
        grown = [tp for tp in missing if tp[0] in replicated]
        fresh = [tp for tp in missing if tp[0] not in replicated]
        if grown:
            positions.add_initial(self.source.offsets(grown, "earliest"))
        if fresh:
            positions.add_initial(self.source.offsets(fresh, self.cfg.start_offset_kind()))
        return again + missing

    def _align_identical(self, started: list[TP], positions: StartPositions) -> None:
        """Identical offsets: each target partition of ``started`` ends at its partition's
        start offset before anything is copied (k2k.pipeline.driver.alignment)."""
        offsets = self.cfg.replication.sink.offsets
        if not offsets.identical or not started:
            return
        first = {
            (self._routes[t], p): positions.starts[(t, p)]
            for t, p in started
            if t in self._routes and (t, p) in positions.starts
        }
        conf = producer_settings(self.cfg.target_client("producer"), False)
        align_targets(
            self.target, conf, self.cfg.target_client("consumer"), first, offsets.max_fill
        )

    def _start_given(self, missing: list[TP], positions: StartPositions) -> None:
        """Step 5 for a run given its start offsets: records lost to retention since follow
        ``errorHandling.onSourceRecordsLost``."""
        assert self.start_at is not None
        earliest = self.source.offsets(missing, "earliest")
        latest = self.source.offsets(missing, "latest", committed_only=False)
        starts, lost = starts_at(self.start_at, missing, earliest, latest)
        if lost:
            ranges = ", ".join(f"{t}[{p}]@{a}..{b - 1}" for (t, p), (a, b) in sorted(lost.items()))
            what = f"records {ranges} were deleted by retention before they were replicated"
            if self.cfg.error_handling.on_source_records_lost != "continue":
                raise ReplicationError(
                    f"{what}; set errorHandling.onSourceRecordsLost: continue to go on without them"
                )
            log.warning("%s", what)
        positions.add_initial(starts)


class _Seen:
    """What the planner saw last of partitions that may vanish: the source end offsets and
    every member's committed progress."""

    def __init__(self, latest: Mapping[TP, int], committed: Mapping[TP, int]) -> None:
        self.latest, self.committed = latest, committed

    def unreplicated(
        self, topic: str, partitions: Iterable[int], positions: StartPositions
    ) -> dict[int, tuple[int, int]]:
        """Per partition, the records below the last end seen that no member committed
        (first, end); partitions with none are left out."""
        out = {}
        for p in partitions:
            tp = (topic, p)
            done = max(positions.starts.get(tp, 0), self.committed.get(tp, 0))
            if self.latest.get(tp, 0) > done:
                out[p] = (done, self.latest[tp])
        return out
