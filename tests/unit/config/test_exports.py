"""The public surface of k2k.config is explicit, sorted and importable."""

from __future__ import annotations

import importlib
import pkgutil

import k2k.config


def test_public_api() -> None:
    assert k2k.config.__all__ == [
        "ExplicitTopicMap",
        "OffsetMappingAppConfig",
        "PipelineConfig",
        "PrefixSuffixTopicName",
        "SameTopicName",
        "StaticTopicName",
        "TracingToggles",
        "load_migration",
        "load_offset_mapping_app",
        "load_pipeline",
        "render_effective",
    ]
    for name in k2k.config.__all__:
        assert getattr(k2k.config, name) is not None


def _isort_style(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical."""
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def test_every_module_has_a_sorted_all() -> None:
    for info in pkgutil.iter_modules(k2k.config.__path__):
        module = importlib.import_module(f"k2k.config.{info.name}")
        names = getattr(module, "__all__", None)
        assert names is not None, f"k2k.config.{info.name} has no __all__"
        assert names == sorted(names, key=_isort_style), (
            f"k2k.config.{info.name}.__all__ is not sorted"
        )
        for name in names:
            assert hasattr(module, name), f"k2k.config.{info.name}.__all__ names missing {name}"
