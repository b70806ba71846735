"""MirrorMaker 2's dedicated-mode properties file as k2k pipelines, one per enabled flow.

``k2k start --mm2 mm2.properties`` and ``k2k validate --mm2`` read the file MM2's
``connect-mirror-maker.sh`` reads. Every enabled flow ``A->B`` becomes one pipeline in K2K's
layout (a plain dict, validated afterwards by :func:`k2k.config.build_pipeline` like any
YAML file), with MM2's precedence (docs/mm2.md, "k2k start --mm2"):

* connector keys (``topics``, ``tasks.max`` ...): ``A->B.key`` over the top-level ``key``;
* bootstrap and security keys of a cluster: ``A.key`` over the top-level ``key``;
* client roles: ``A->B.consumer.*`` < ``A.consumer.*`` < ``A->B.source.consumer.*`` for the
  source consumer (likewise ``admin``); the target producer is the Connect worker's,
  ``B.producer.*`` < ``A->B.producer.override.*``.

Nothing is silently ignored: every property that does not reach a pipeline is returned as a
:class:`Note` naming it and saying what to do instead.

The file may also be a Mirror connector's config (properties or Connect REST JSON) or a
Strimzi ``KafkaMirrorMaker2`` resource: :mod:`k2k.config.mm2_inputs` reads each into the
properties an equivalent MM2 file holds, and messages name the input's own keys.

This module picks the flows; one flow's translation is :mod:`k2k.config.mm2_translate`, the
advice the notes give :mod:`k2k.config.mm2_notes`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from k2k.config.loader import build_pipeline
from k2k.config.mm2_inputs import read_input
from k2k.config.mm2_notes import Note, advice_for
from k2k.config.mm2_transforms import unsupported_line
from k2k.config.mm2_translate import Flow, FlowBuilder, enabled_or_disabled, parse_list
from k2k.config.model import PipelineConfig
from k2k.config.secrets import mask_tree
from k2k.errors import ConfigError

__all__ = ["Flow", "MM2File", "Note", "all_notes", "flow_config", "read_mm2", "render_flows"]


@dataclass(frozen=True)
class MM2File:
    """The flows of one MM2 file and the notes that concern no single flow."""

    path: Path
    flows: tuple[Flow, ...]
    notes: tuple[Note, ...]
    #: What the file is when not an MM2 dedicated-mode file (mm2_inputs.Equivalent.shape).
    shape: str = ""


def _enabled_flows(
    path: Path, props: Mapping[str, str], aliases: Sequence[str], problems: list[str]
) -> list[tuple[str, str]]:
    flows = []
    for source in aliases:
        for target in aliases:
            if source == target:
                continue
            key = f"{source}->{target}.enabled"
            value = props.get(key)
            if value is not None and enabled_or_disabled(value, key, problems) == "enabled":
                flows.append((source, target))
    return flows


def _provider_references(props: Mapping[str, str], problems: list[str]) -> None:
    """MM2's ``${provider:path:key}`` references other than ``${env:NAME}`` (which k2k's own
    placeholders resolve the same way) cannot be resolved: refuse them."""
    for key, value in props.items():
        for ref in re.findall(r"\$\{([^}]*)\}", value):
            if re.fullmatch(r"env:[^:]+", ref) is None:
                problems.append(
                    f"{key}: MM2 config provider reference ${{{ref}}} is not supported; "
                    "use k2k placeholders (${env:NAME}, ${file:PATH}) in the YAML that "
                    "`k2k validate --mm2` prints"
                )


_OVERRIDDEN = (
    "overridden: another spelling of the same setting wins for the flows that run "
    "(MM2's precedence, docs/mm2.md#precedence)"
)


def _file_notes(
    props: Mapping[str, str],
    aliases: Sequence[str],
    used: set[str],
    running: Sequence[tuple[str, str]],
) -> list[Note]:
    """Every property no flow used or noted; ``running``: the flows that run."""
    flows = {f"{s}->{t}" for s, t in running}
    ends = {alias for flow in running for alias in flow}
    notes = []
    for key in props:
        if key in used or key == "clusters":
            continue
        head = key.split(".", 1)[0]
        if "->" in head:
            advice = (
                _OVERRIDDEN
                if head in flows
                else "a flow that does not run (not enabled, or left out by --clusters)"
            )
        elif head in aliases and "." in key:
            advice = (
                _OVERRIDDEN
                if head in ends
                else "not used by the flows that run (k2k runs enabled flows only)"
            )
        elif key.startswith(("consumer.", "producer.", "admin.")):
            advice = (
                "MM2 ignores top-level client prefixes in dedicated mode, and so does k2k; "
                "use <alias>.consumer.*, <alias>.producer.* or <alias>.admin.*"
            )
        else:
            advice = advice_for(key, props[key])
        if advice:
            notes.append(Note(key, advice))
    return notes


def read_mm2(
    path: Path, clusters: Sequence[str] | None = None, *, skip_transforms: bool = False
) -> MM2File:
    """The flows of the MM2 file at ``path``, limited to targets in ``clusters`` when given.

    Raises ConfigError with one line per bad property, each naming the file and property;
    one line for the Connect transforms k2k cannot run (:mod:`k2k.config.mm2_transforms`
    maps the others), unless ``skip_transforms`` (then each is noted as not applied).
    """
    equivalent = read_input(path)
    props = equivalent.props
    problems: list[str] = []
    aliases = parse_list(props.get("clusters", ""))
    if not aliases:
        raise ConfigError(f"{path}: clusters: missing, expected a list of cluster aliases")
    if clusters:
        unknown = [c for c in clusters if c not in aliases]
        if unknown:
            listed = ", ".join(aliases)
            raise ConfigError(f"--clusters: unknown alias {unknown[0]!r}, expected one of {listed}")
    _provider_references(props, problems)
    pairs = _enabled_flows(path, props, aliases, problems)
    if clusters:
        pairs = [(s, t) for s, t in pairs if t in clusters]
    if not pairs and not problems:
        problems.append(
            "no flow to run: no enabled flow targets a --clusters alias"
            if clusters
            else "no flow to run: set <source>-><target>.enabled = true"
        )
    builder = FlowBuilder(path, props, aliases)
    flows = [builder.build(s, t) for s, t in pairs]
    problems.extend(builder.problems)
    if problems:
        lines = dict.fromkeys(equivalent.spell(p) for p in problems)
        raise ConfigError([f"{path}: {line}" for line in lines])
    if builder.unsupported and not skip_transforms:
        raise ConfigError(equivalent.spell(unsupported_line(path, builder.unsupported)))
    notes = [*equivalent.notes, *_file_notes(props, aliases, builder.used, pairs)]
    spelled = [
        dataclasses.replace(f, notes=tuple(equivalent.spell_note(n) for n in f.notes))
        for f in flows
    ]
    return MM2File(
        path,
        tuple(spelled),
        tuple(equivalent.spell_note(n) for n in notes),
        equivalent.shape,
    )


def flow_config(mm2: MM2File, flow: Flow, *, templates: bool = True) -> PipelineConfig:
    """The validated pipeline of ``flow``; problems name the file and the flow."""
    try:
        return build_pipeline(flow.pipeline, templates=templates)
    except ConfigError as exc:
        raise ConfigError([f"{mm2.path}: flow {flow.label}: {p}" for p in exc.problems]) from None


def _comments(title: str, notes: Sequence[Note]) -> str:
    lines = [f"# {title}"] + [f"#   {note.line()}" for note in notes]
    return "\n".join(lines) + "\n"


def render_flows(mm2: MM2File) -> str:
    """One YAML document per flow in K2K's layout, secrets masked, each preceded by the MM2
    properties it does not take as comments (so the text stays valid YAML)."""
    parts = [f"# {mm2.path}: read as {mm2.shape}\n"] if mm2.shape else []
    if mm2.notes:
        what = "entries" if mm2.shape else "properties"
        parts.append(_comments(f"{mm2.path}: {what} no flow takes:", mm2.notes))
    for flow in mm2.flows:
        head = _comments(f"flow {flow.label}: properties k2k does not take as written:", flow.notes)
        body = yaml.safe_dump(mask_tree(flow.pipeline), sort_keys=False, allow_unicode=True)
        parts.append(f"---\n{head if flow.notes else ''}{body}")
    return "".join(parts)


def all_notes(mm2: MM2File) -> list[str]:
    """Every note as one line (``k2k start --mm2`` logs them as warnings)."""
    lines = [f"{mm2.path}: {note.line()}" for note in mm2.notes]
    for flow in mm2.flows:
        lines.extend(f"{mm2.path}: flow {flow.label}: {note.line()}" for note in flow.notes)
    return lines
