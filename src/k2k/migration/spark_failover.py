"""``k2k offset-mapping translate-checkpoint``: a Structured Streaming query's checkpoint made
to read the target where it stopped reading the source.

The files a restart reads (:func:`~k2k.migration.sparklog.files_to_translate`) get every
Kafka source's positions translated (:class:`~k2k.migration.positions.PositionTranslator`),
in a copy of the checkpoint or in place. A marker file, ``k2k-translated.json``, makes a
second translation of the same checkpoint an error: its positions are target positions
already.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from k2k.errors import ConfigError, OffsetMappingError
from k2k.kafka import TP
from k2k.migration.positions import Moved, PositionTranslator
from k2k.migration.sparklog import OffsetFile, files_to_translate, write_with_checksum

if TYPE_CHECKING:
    from k2k.config import PipelineConfig

__all__ = ["MARKER", "CheckpointReport", "translate_checkpoint"]

#: Written into a translated checkpoint: what was translated, by which pipeline, when.
MARKER = "k2k-translated.json"
#: Where an in-place translation keeps the files it replaced.
ORIGINALS = "k2k-original-offsets"


@dataclass
class CheckpointReport:
    """What a translation did (or would do, without a destination)."""

    checkpoint: Path
    batches: list[int] = field(default_factory=list)
    #: Per batch, per source partition: its position in the checkpoint.
    positions: dict[int, dict[TP, int]] = field(default_factory=dict)
    #: Per batch, per source partition: where its position continues on the target.
    moved: dict[int, dict[TP, Moved]] = field(default_factory=dict)
    ahead: dict[TP, tuple[int, int]] = field(default_factory=dict)
    written: Path | None = None

    def lines(self) -> list[str]:
        out = []
        for batch in self.batches:
            for (topic, p), m in sorted(self.moved[batch].items()):
                position = self.positions[batch][(topic, p)]
                out.append(
                    f"batch {batch}: {topic}[{p}] at {_offset(position)} -> {m.target[0]}"
                    f"[{m.target[1]}] at {_offset(m.offset)} ({m.how})"
                )
        for (topic, p), (position, end) in sorted(self.ahead.items()):
            out.append(
                f"warning: {topic}[{p}] is at {position:,} but the target ends at {end:,}: the "
                "pipeline has not copied what the query read there yet (a query with "
                "failOnDataLoss=true refuses to start until it has)"
            )
        return out


def _offset(offset: int) -> str:
    return {-1: "latest", -2: "earliest"}.get(offset, f"{offset:,}")


def translate_checkpoint(
    cfg: PipelineConfig, checkpoint: Path, to: Path | None, in_place: bool
) -> CheckpointReport:
    """Translate ``checkpoint`` into ``to`` (a new directory), in place, or neither (a
    dry run)."""
    checkpoint = checkpoint.expanduser().resolve()
    _refuse_translated(checkpoint)
    to = _fresh(to) if to is not None else None
    files = files_to_translate(checkpoint)
    report = CheckpointReport(checkpoint, [f.batch for f in files])
    translator = PositionTranslator(cfg)
    try:
        for f in files:  # every refusal that needs no cluster first
            _check_topics(f, translator)
        texts = {f.batch: _translated(f, translator, report) for f in files}
    finally:
        translator.close()
    if to is None and not in_place:
        return report
    root = checkpoint if in_place else _copy(checkpoint, to)
    if in_place:
        _keep_originals(checkpoint, files)
    for f in files:
        write_with_checksum(root / "offsets" / str(f.batch), texts[f.batch])
    (root / MARKER).write_text(
        json.dumps({"pipeline": cfg.name, "batches": report.batches, "at": int(time.time())})
    )
    report.written = root
    return report


def _check_topics(f: OffsetFile, translator: PositionTranslator) -> None:
    kafka = f.kafka()
    if not kafka:
        raise ConfigError(
            f"--spark: {f.path} holds no Kafka source's offsets; expected the checkpoint of a "
            "query reading Kafka"
        )
    for source, positions in kafka.items():
        try:
            translator.check_topics({t for t, _ in positions})
        except OffsetMappingError as exc:
            raise ConfigError(f"--spark: {f.path}, source {source}: {exc}") from None


def _translated(f: OffsetFile, translator: PositionTranslator, report: CheckpointReport) -> str:
    replaced: dict[int, dict[TP, int]] = {}
    report.moved[f.batch], report.positions[f.batch] = {}, {}
    for source, positions in f.kafka().items():
        try:
            done = translator.translate(positions)
        except OffsetMappingError as exc:
            raise OffsetMappingError(f"--spark: {f.path}, source {source}: {exc}") from None
        replaced[source] = _lowest_per_target(done.moved.values())
        report.moved[f.batch].update(done.moved)
        report.positions[f.batch].update(positions)
        report.ahead.update(done.ahead)
    return f.text(replaced)


def _lowest_per_target(moved: Iterable[Moved]) -> dict[TP, int]:
    """One position per target partition: where several source partitions were routed into
    one, the lowest (their records may be read again there, none is skipped).

    >>> _lowest_per_target([Moved(("t", 0), 9, "mapped"), Moved(("t", 0), 4, "mapped")])
    {('t', 0): 4}
    """
    out: dict[TP, int] = {}
    for m in moved:
        out[m.target] = min(m.offset, out.get(m.target, m.offset))
    return out


def _refuse_translated(checkpoint: Path) -> None:
    marker = checkpoint / MARKER
    if marker.exists():
        raise ConfigError(
            f"--spark: {checkpoint} was translated already ({marker}); its positions are "
            "target positions: expected the query's checkpoint from the source cluster"
        )


def _fresh(to: Path) -> Path:
    to = to.expanduser().resolve()
    if to.exists() and (not to.is_dir() or any(to.iterdir())):
        raise ConfigError(f"--to: {to} exists and is not an empty directory; expected a new one")
    return to


def _copy(checkpoint: Path, to: Path | None) -> Path:
    assert to is not None
    shutil.copytree(checkpoint, to, dirs_exist_ok=True)
    return to


def _keep_originals(checkpoint: Path, files: list[OffsetFile]) -> None:
    kept = checkpoint / ORIGINALS
    kept.mkdir(exist_ok=True)
    for f in files:
        shutil.copy2(f.path, kept / f.path.name)
