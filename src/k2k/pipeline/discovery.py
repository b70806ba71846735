"""Topic discovery: which source topics a pipeline copies, where to, and from which offset.

Runs on: driver, once at start and at every lease boundary (plus a cheap check every
``replication[].source.discoveryInterval`` while a lease runs). A discovery pass:

1. lists the source topics (listed names must all exist);
2. selects them (:class:`~k2k.stages.TopicSelection`: internal and k2k's control topics are
   never selected) and routes them (``replication[].sink.topic``, a
   :class:`~k2k.stages.TopicRouter`; a topic without a route is logged once and skipped);
3. creates or checks the target topic of every new topic, or of one whose partition count
   changed, and compiles its :class:`~k2k.stages.TopicPlan`;
4. resolves a start offset (``auto.offset.reset``) for partitions without progress.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from k2k.config import PipelineConfig
from k2k.errors import K2KError, TopicError
from k2k.kafka.admin import ClusterView, TopicInfo
from k2k.pipeline.positions import StartPositions
from k2k.stages import TopicPlan, TopicRouter, compile_topic_plans

__all__ = ["Discovery"]

# The planner's logger: these lines were always the planner's, and operators filter on it.
log = logging.getLogger("k2k.planner")

TP = tuple[str, int]


class Discovery:
    """Runs on: driver. The selected source topics, their routes and target topics.

    ``selected`` holds the topics of the last pass (source topic -> partitions);
    :meth:`plans` the compiled plans of those topics, for the lease spec.
    """

    def __init__(self, cfg: PipelineConfig) -> None:
        self.cfg = cfg
        self.router: TopicRouter = cfg.replication.sink.topic
        self.selection = cfg.topic_selection()
        self.source = ClusterView.of(cfg.source)
        self.target = ClusterView.of(cfg.target)
        self.selected: dict[str, TopicInfo] = {}
        self._routes: dict[str, str] = {}
        self._plans: dict[str, TopicPlan] = {}
        self._unrouted_logged: set[str] = set()

    def discover(
        self, positions: StartPositions, ends: Mapping[TP, int] | None = None
    ) -> dict[str, TopicInfo]:
        """One discovery pass (steps 1-4 above); returns and keeps the selected topics.

        ``ends`` (``--until-caught-up``) fixes the topics to those captured at start.
        Raises :class:`~k2k.errors.TopicError` for a listed topic that does not exist, a
        topic routed onto itself, or a target topic that is missing or too small."""
        source_topics = self.source.topics()
        self._check_listed(source_topics)
        selected = self._select(source_topics)
        if ends is not None:
            known = {t for t, _ in ends}
            selected = {t: i for t, i in selected.items() if t in known}
        new = [
            t
            for t in selected
            if t not in self._routes
            or self.selected.get(t, selected[t]).partitions != selected[t].partitions
        ]
        if new:
            self._ensure_targets({t: selected[t] for t in new})
            routes = {t: self.router.route(t) or t for t in new}
            self._routes.update(routes)
            self._plans.update(compile_topic_plans(self.cfg, routes))
        self._resolve_starts(selected, positions)
        self.selected = selected
        return selected

    def partitions(self) -> list[TP]:
        """Every partition of the selected topics."""
        return [(t, p) for t, info in self.selected.items() for p in range(info.partitions)]

    def plans(self) -> dict[str, TopicPlan]:
        """The compiled plan of every selected topic (source topic -> plan)."""
        return {t: self._plans[t] for t in self.selected}

    def topics_changed(self) -> bool:
        """True when a selected, routed topic appeared or changed its partition count.

        A failed listing is logged and counts as no change (the next check retries)."""
        try:
            current = self.source.topics()
        except K2KError as exc:
            # An unreachable source is reported once, by k2k.observability.reachability.
            level = logging.WARNING if self.source.answering else logging.DEBUG
            log.log(level, "topic discovery failed: %s", exc)
            return False
        for name, info in current.items():
            if not self.selection.should_replicate(name) or self.router.route(name) is None:
                continue
            known = self.selected.get(name)
            if known is None or known.partitions != info.partitions:
                return True
        return False

    # -- steps ---------------------------------------------------------------------------

    def _check_listed(self, source_topics: Mapping[str, TopicInfo]) -> None:
        """Step 1: every topic named in a list selection exists."""
        listed = self.cfg.replication.source.topic
        if isinstance(listed, str):
            return
        absent = sorted(set(listed) - set(source_topics))
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
            selected[name] = info
        return selected

    def _ensure_targets(self, topics: Mapping[str, TopicInfo]) -> None:
        """Step 3: create (``autoCreateTopics``) or check the target topic of every new
        source topic. Several source topics may share one target (many-to-one routing)."""
        wanted: dict[str, int] = {}
        first_source: dict[str, str] = {}
        for name, info in topics.items():
            target = self.router.route(name) or name
            wanted[target] = max(wanted.get(target, 0), info.partitions)
            first_source.setdefault(target, name)
        existing = self.target.topics()
        for target, partitions in wanted.items():
            if target in existing:
                self._check_target(target, existing[target].partitions, partitions)
            else:
                self._create_target(target, partitions, first_source[target])

    def _check_target(self, target: str, have: int, partitions: int) -> None:
        """An existing target topic must hold every source partition (``partition: source``)."""
        if self.cfg.replication.sink.partition == "source" and have < partitions:
            raise TopicError(
                f"target topic {target!r} has {have} partitions but source partitions up "
                f"to {partitions - 1} map to it (replication.sink.partition: source); "
                f"add partitions to the target topic or use partition: hash"
            )

    def _create_target(self, target: str, partitions: int, source: str) -> None:
        """Create ``target`` with ``source``'s own topic configs under
        ``topicCreation.replicated``'s, when ``features.autoCreateTopics`` allows it."""
        cfg = self.cfg
        if not cfg.features.auto_create_topics:
            raise TopicError(
                f"target topic {target!r} (for source topic {source!r}) is "
                f"missing on the target cluster at {self.target.bootstrap}; create it or set "
                f"features.autoCreateTopics: enabled"
            )
        creation = cfg.topic_creation.replicated
        configs = {**self.source.non_default_configs(source), **creation.configs}
        count = creation.partitions or partitions
        if cfg.replication.sink.partition == "source" and count < partitions:
            raise TopicError(
                f"topicCreation.replicated.partitions is {count} but source topic "
                f"{source!r} has {partitions} partitions (partition: source)"
            )
        log.info("creating target topic %s (%d partitions)", target, count)
        self.target.create_topic(target, count, creation.replication_factor, configs)
        self.target.wait_for_topic(target)

    def _resolve_starts(self, selected: Mapping[str, TopicInfo], positions: StartPositions) -> None:
        """Step 4: a start offset for each partition without one, from the source
        consumer's ``auto.offset.reset`` (earliest unless it says latest)."""
        missing = positions.missing(
            (t, p) for t, info in selected.items() for p in range(info.partitions)
        )
        if missing:
            positions.add_initial(self.source.offsets(missing, self.cfg.start_offset_kind()))
