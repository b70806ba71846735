"""Group offset sync (``features.syncGroupOffsets``, MirrorMaker 2's
``sync.group.offsets.enabled``): the Offset Mapping app's passes, run by the pipeline's
driver.

Runs on: driver, in a daemon thread of its own, from the planner's preparation until it
closes; never on the record path. Each pass (every ``syncGroupOffsets.interval``) translates
the selected source groups' committed offsets through the offset mappings and commits them
to the target's groups of the same name, exactly as ``k2k offset-mapping start`` does
(:class:`~k2k.offsetmapping.app.OffsetMappingApp`), with MM2's leniency: a group that has
members on the target is skipped, logged once, and retried next pass. A pass that fails
(a cluster not answering) is logged and the next one runs on time; the copy never waits.
"""

from __future__ import annotations

import logging
import threading

from k2k.config import PipelineConfig
from k2k.config.offset_mapping import group_sync_app
from k2k.errors import K2KError
from k2k.offsetmapping.app import OffsetMappingApp

__all__ = ["GroupOffsetSync"]

log = logging.getLogger("k2k.groupsync")


class GroupOffsetSync:
    """Runs on: driver. The app's passes until :meth:`close`."""

    def __init__(self, cfg: PipelineConfig) -> None:
        self.app = OffsetMappingApp(group_sync_app(cfg))
        self.interval = cfg.sync_group_offsets.interval.total_seconds()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="k2k-group-sync", daemon=True)

    def start(self) -> None:
        log.info("committing translated group offsets on the target every %.3g s", self.interval)
        self._thread.start()

    def close(self) -> None:
        """Stop after the pass in progress (idempotent)."""
        self._stop.set()
        self.app.request_stop()
        if self._thread.is_alive():
            self._thread.join()

    def last_pass(self) -> None:
        """Stop the periodic passes and make one more, when the pipeline ended cleanly: the
        groups then stand where everything it replicated lets them (``--until-caught-up``
        before a cut-over). A failure is logged."""
        self.close()
        try:
            report = self.app.run(once=True)
        except K2KError as exc:
            log.warning("group offset sync: the last pass failed: %s", exc)
        else:
            log.info("group offset sync: last pass: %s", report.line())

    def _run(self) -> None:
        # The app retries a cluster that does not answer; anything else it raises ends its
        # run: logged, and the app starts again after an interval.
        while not self._stop.is_set():
            try:
                self.app.run(once=False)
            except K2KError as exc:
                log.error("group offset sync: %s; starting again in %.3g s", exc, self.interval)
            self._stop.wait(self.interval)
