"""Reading configuration files: YAML -> deep merge -> placeholders -> a validated model.

A source is a file path or, for programs that embed k2k (:mod:`k2k.api`), a mapping in the
same layout as a file; both take the same way from the deep merge on, placeholders included.
The model is :class:`PipelineConfig` for the replicator (``k2k start``) or
:class:`OffsetMappingAppConfig` for the Offset Mapping app (``k2k offset-mapping start``).

Every failure becomes one :class:`k2k.errors.ConfigError` whose ``problems`` list all problems
found at that step (all unreadable files, all unresolved placeholders, all invalid keys), so a
user fixes a file in one round instead of one error per run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from k2k.config.errors import dotted, format_validation_error
from k2k.config.model import PipelineConfig
from k2k.config.offset_mapping import OffsetMappingAppConfig, app_keys_only, pipeline_keys_only
from k2k.config.placeholders import resolve_tree
from k2k.errors import ConfigError

__all__ = [
    "Source",
    "build_offset_mapping_app",
    "build_pipeline",
    "deep_merge",
    "load_offset_mapping_app",
    "load_pipeline",
    "read_yaml",
]

PathLike = str | os.PathLike[str]
#: A pipeline file, or a mapping in the file's layout (what ``yaml.safe_load`` would give).
Source = PathLike | Mapping[str, Any]
_Config = TypeVar("_Config", PipelineConfig, OffsetMappingAppConfig)


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML loader that refuses a key written twice in one mapping.

    Plain PyYAML keeps the last duplicate silently; in a pipeline file that hides half of a
    section (two ``features:`` blocks), so it is an error here. Merge keys (``<<``) still work.
    """


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # unhashable key: construct_mapping reports it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first at line {first + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: PathLike) -> dict[str, Any]:
    """One pipeline file as a mapping (an empty file is an empty mapping)."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as handle:
            data = yaml.load(handle, Loader=_StrictLoader)  # a SafeLoader subclass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"{name}: cannot read the pipeline file ({reason}); expected an existing, readable "
            "YAML file"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: not UTF-8 text; expected a UTF-8 YAML file") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        raise ConfigError(f"{where}: YAML syntax error: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: YAML syntax error: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{name}: the top level is a {type(data).__name__}; expected a mapping of pipeline "
            "keys (name, source, target, replication, ...)"
        )
    return data


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` on top of ``base``: mappings merge key by key, anything else is replaced.

    Lists are replaced, not appended: an overlay that changes the replication stages repeats
    the whole list, which keeps the result predictable.

    >>> deep_merge({"a": {"x": 1, "y": [1]}, "b": 1}, {"a": {"y": [2]}, "c": 3})
    {'a': {'x': 1, 'y': [2]}, 'b': 1, 'c': 3}
    """
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _resolved(data: Mapping[str, Any], env: Mapping[str, str] | None, templates: bool) -> Any:
    """``data`` with placeholders resolved (as it is when ``templates`` is off); ConfigError
    listing every unresolved one."""
    if not templates:
        return data
    # K2K's license block is ignored: its placeholders (a token from the environment) need
    # not resolve where k2k runs.
    ignored = {k: v for k, v in data.items() if k == "license"}
    rest = {k: v for k, v in data.items() if k != "license"}
    resolved, failures = resolve_tree(rest, os.environ if env is None else env)
    if failures:
        raise ConfigError(
            [
                f"{dotted(path)}: {failure.reason}, got {failure.placeholder!r}; "
                f"expected {failure.expected}"
                for path, failure in failures
            ]
        )
    return {**resolved, **ignored}


def _validated(model: type[_Config], data: Any) -> _Config:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # `from None`: pydantic's own message echoes input values, secrets included.
        raise ConfigError(format_validation_error(exc, model)) from None


def _merged(sources: Source | Sequence[Source]) -> dict[str, Any]:
    """Read every file (reporting all unreadable ones at once) and deep-merge them, and the
    mappings among them, in order."""
    given = [sources] if isinstance(sources, str | os.PathLike | Mapping) else list(sources)
    if not given:
        raise ConfigError("no pipeline file given; expected at least one YAML file (-f FILE)")
    documents: list[Mapping[str, Any]] = []
    problems: list[str] = []
    for source in given:
        if isinstance(source, Mapping):
            documents.append(source)  # never modified: the merge and placeholders build new ones
            continue
        try:
            documents.append(read_yaml(source))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    merged: dict[str, Any] = {}
    for document in documents:
        merged = deep_merge(merged, document)
    return merged


def build_pipeline(
    data: Mapping[str, Any], env: Mapping[str, str] | None = None, *, templates: bool = True
) -> PipelineConfig:
    """Resolve placeholders in ``data`` (unless ``templates`` is off) and validate it; raise
    ConfigError with every problem."""
    return _validated(PipelineConfig, _resolved(data, env, templates))


def load_pipeline(
    sources: Source | Sequence[Source],
    env: Mapping[str, str] | None = None,
    *,
    templates: bool = True,
) -> PipelineConfig:
    """Load, merge (in order, later wins) and validate pipeline files.

    Each of ``sources`` is a file or a mapping in the file's layout (``{"name": ..., "source":
    {"kafka": ...}, ...}``), so a program can overlay a file with values of its own.
    ``env`` resolves ``${env:NAME}`` placeholders; None means ``os.environ``. ``templates``
    False (``-g disabled``) keeps every ``${...}`` as written.
    Raises :class:`k2k.errors.ConfigError` listing every problem found.
    """
    return build_pipeline(_merged(sources), env, templates=templates)


def build_offset_mapping_app(
    data: Mapping[str, Any], env: Mapping[str, str] | None = None, *, templates: bool = True
) -> OffsetMappingAppConfig:
    """The Offset Mapping app's configuration from ``data``; the replicator's keys are dropped.

    Replicator-only keys go first (:func:`k2k.config.offset_mapping.app_keys_only`), so their
    placeholders need not resolve; then as :func:`build_pipeline`.
    """
    return _validated(OffsetMappingAppConfig, _resolved(app_keys_only(data), env, templates))


def load_offset_mapping_app(
    sources: Source | Sequence[Source],
    env: Mapping[str, str] | None = None,
    *,
    templates: bool = True,
) -> OffsetMappingAppConfig:
    """Load, merge and validate the Offset Mapping app's files (``k2k offset-mapping start``).

    Like :func:`load_pipeline`, and a replicator's pipeline file may be one of the files:
    ``-f pipeline.yaml -f offset-mapping.yaml``.
    """
    return build_offset_mapping_app(_merged(sources), env, templates=templates)


def load_migration(
    sources: Source | Sequence[Source],
    env: Mapping[str, str] | None = None,
    *,
    templates: bool = True,
) -> tuple[PipelineConfig, OffsetMappingAppConfig]:
    """The pipeline and the Offset Mapping app's configuration from the same files
    (``k2k cutover``): each model drops the keys only the other one reads."""
    data = _merged(sources)
    pipeline = _validated(PipelineConfig, _resolved(pipeline_keys_only(data), env, templates))
    return pipeline, build_offset_mapping_app(data, env, templates=templates)
