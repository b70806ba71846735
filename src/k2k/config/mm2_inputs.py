"""What ``--mm2 FILE`` holds, recognised from its content, as MM2 dedicated-mode properties.

Four shapes, all read into the properties an equivalent MM2 file would hold, so that every
shape gives the pipelines that file gives (:mod:`k2k.config.mm2`):

* an MM2 dedicated-mode properties file (``clusters = ...``): as it is;
* a Mirror connector's properties (``connector.class = ...``, no ``clusters``), as Kafka
  Connect runs them: :mod:`k2k.config.mm2_connector`;
* Kafka Connect REST JSON: ``{"name": ..., "config": {...}}`` or the config object itself
  (a file starting with ``{`` or ``[``), the same connector config;
* a Strimzi ``KafkaMirrorMaker2`` resource (YAML with ``apiVersion:`` / ``kind:``):
  :mod:`k2k.config.mm2_strimzi`.

Each translated key remembers how the input spells it, so messages about the properties name
the input's keys and resource paths (:meth:`Equivalent.spell`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from k2k.config.mm2_connector import (
    Entries,
    Translation,
    flow_properties,
    merge_roles,
    role_problem,
)
from k2k.config.mm2_notes import Note
from k2k.config.mm2_strimzi import read_strimzi
from k2k.config.properties import parse_properties
from k2k.errors import ConfigError

__all__ = ["Equivalent", "read_input"]

_KUBERNETES = re.compile(r"^(?:apiVersion|kind)\s*:", re.MULTILINE)
_TOKEN = re.compile(r"[^\s:,;()'\"=]+")
_CONNECT_JSON = 'a Kafka Connect connector config ({"name": ..., "config": {...}} or the config)'


@dataclass(frozen=True)
class Equivalent:
    """The dedicated-mode properties of an input, and how the input spells their keys."""

    props: dict[str, str]
    #: What the input is, for the printed YAML; empty for an MM2 dedicated-mode file.
    shape: str = ""
    names: Mapping[str, str] = field(default_factory=dict)
    prefixes: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[Note, ...] = ()

    def spell(self, text: str) -> str:
        """``text`` with each dedicated-mode key written as the input spells it."""
        if not self.names and not self.prefixes:
            return text

        def one(match: re.Match[str]) -> str:
            token = match.group(0)
            if token in self.names:
                return self.names[token]
            for prefix, spelled in self.prefixes.items():
                if token.startswith(prefix):
                    return spelled + token[len(prefix) :]
            return token

        return _TOKEN.sub(one, text)

    def spell_note(self, note: Note) -> Note:
        return replace(note, prop=self.spell(note.prop), advice=self.spell(note.advice))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot read the MM2 file ({reason})") from None


def _json_config(path: Path, text: str) -> Entries:
    """The connector config of a Connect REST body (or of the bare config object)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise ConfigError(f"{path}: not valid JSON ({where}), expected {_CONNECT_JSON}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a JSON {type(doc).__name__}, expected {_CONNECT_JSON}")
    config = doc.get("config", doc)
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: config: not an object, expected {_CONNECT_JSON}")
    entries: Entries = {}
    for key, value in config.items():
        if isinstance(value, dict | list) or value is None:
            what = "null" if value is None else f"a JSON {type(value).__name__}"
            raise ConfigError(f"{path}: {key}: {what}, expected a string")
        text_value = str(value).lower() if isinstance(value, bool) else str(value)
        entries[key] = (text_value, key)
    if "config" in doc and isinstance(doc.get("name"), str):
        entries.setdefault("name", (doc["name"], "name"))
    return entries


def _connector(path: Path, entries: Entries) -> Translation:
    """One connector config (properties or JSON): only a MirrorSourceConnector's runs."""
    connector_class = entries.get("connector.class")
    if connector_class is None:
        raise ConfigError(
            f"{path}: connector.class: missing, expected "
            "org.apache.kafka.connect.mirror.MirrorSourceConnector"
        )
    problem = role_problem(*connector_class)
    if problem is not None:
        raise ConfigError(f"{path}: {problem}")
    notes: list[Note] = []
    translated = flow_properties(merge_roles({"source": entries}, {}, notes))
    translated.notes[:0] = notes
    return translated


def _strimzi(path: Path, text: str, environ: Mapping[str, str]) -> Translation:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
        where = (
            f" ({where}{': ' if where and problem else ''}{problem or ''})"
            if mark or problem
            else ""
        )
        raise ConfigError(
            f"{path}: not valid YAML{where}, expected a Strimzi KafkaMirrorMaker2 resource"
        ) from None
    resources = [d for d in docs if isinstance(d, dict) and d.get("kind") == "KafkaMirrorMaker2"]
    if len(resources) != 1:
        kinds = ", ".join(str(d.get("kind")) for d in docs if isinstance(d, dict)) or "none"
        raise ConfigError(
            f"{path}: kind: {len(resources)} KafkaMirrorMaker2 resources (kinds: {kinds}), "
            "expected exactly one (apiVersion: kafka.strimzi.io/..., kind: KafkaMirrorMaker2)"
        )
    return read_strimzi(resources[0], environ)


def read_input(path: Path, environ: Mapping[str, str] | None = None) -> Equivalent:
    """The dedicated-mode equivalent of the file at ``path``, whatever its shape; ``environ``
    (default: the process's) locates Strimzi's Secrets. Raises ConfigError naming the file
    with one line per problem."""
    text = _read(path)
    if text.lstrip().startswith(("{", "[")):
        translated, shape = _connector(path, _json_config(path, text)), "Kafka Connect REST JSON"
    elif _KUBERNETES.search(text):
        env = os.environ if environ is None else environ
        translated, shape = _strimzi(path, text, env), "a Strimzi KafkaMirrorMaker2 resource"
    else:
        try:
            props = parse_properties(text)
        except ValueError:
            raise ConfigError(f"{path}: bad \\u escape in the MM2 properties file") from None
        if "connector.class" not in props or "clusters" in props:
            return Equivalent(props)
        entries = {key: (value, key) for key, value in props.items()}
        translated, shape = _connector(path, entries), "Mirror connector properties"
    if translated.problems:
        raise ConfigError([f"{path}: {p}" for p in dict.fromkeys(translated.problems)])
    return Equivalent(
        translated.props,
        shape,
        translated.names,
        translated.prefixes,
        tuple(translated.notes),
    )
