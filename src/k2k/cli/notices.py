"""Warnings about a loaded file: keys it sets that have no effect (k2k.config.inert)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from k2k.config import OffsetMappingAppConfig, PipelineConfig

__all__ = ["echo_inert", "log_inert"]


def _lines(cfg: PipelineConfig | OffsetMappingAppConfig) -> list[str]:
    return [f"{path}: accepted, no effect: {why}" for path, why in cfg.inert_keys()]


def echo_inert(cfg: PipelineConfig | OffsetMappingAppConfig) -> None:
    """``k2k validate``: one ``warning:`` line per inert key, on stderr."""
    for line in _lines(cfg):
        click.echo(f"warning: {line}", err=True)


def log_inert(cfg: PipelineConfig | OffsetMappingAppConfig) -> None:
    """``k2k start`` and the app: one logged warning per inert key."""
    log = logging.getLogger("k2k.config")
    for line in _lines(cfg):
        log.warning(line)
