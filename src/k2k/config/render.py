"""The effective configuration as YAML, in K2K's layout, secrets masked.

``k2k validate`` shows it so users see what k2k will actually do after merging files, applying
defaults and resolving placeholders; the Offset Mapping app's configuration renders the same way. Every value is written in the form the loader reads back
(durations as "2 seconds", flags as enabled/disabled, replication as the two-item list), so the
output is itself a valid pipeline file once secrets are filled in again.
"""

from __future__ import annotations

import yaml

from k2k.config.model import PipelineConfig
from k2k.config.offset_mapping import OffsetMappingAppConfig
from k2k.config.secrets import mask_tree

__all__ = ["render_effective"]


def render_effective(cfg: PipelineConfig | OffsetMappingAppConfig) -> str:
    """YAML text of ``cfg`` with defaults filled in and secrets shown as ``******``.

    The ``license`` block is left out: k2k ignores it.
    """
    data = mask_tree(cfg.model_dump(mode="python", by_alias=True))
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
