"""Kafka client properties: Java client names in the YAML, librdkafka names out, at one point.

K2K users write the property names of the Java client; k2k's clients are librdkafka
(confluent-kafka). Most names are the same, some have a librdkafka spelling, a few have no
meaning outside the JVM. Rather than pass everything through and let librdkafka fail at start
with "No such configuration property", every property is checked when the file is loaded and
the ``*_client(role)`` accessors hand out translated copies.

How a property is treated, in order (the tables of names are in :mod:`k2k.config.client_rules`):

1. **Managed by k2k** (``MANAGED``): refused when it would break k2k's guarantees
   (``enable.auto.commit: true``, ``transactional.id``, ...).
2. **Java only** (``JAVA_ONLY``): refused with the reason and what to do instead.
3. **Renamed** (``RENAMES``): written under the librdkafka name, value converted if needed.
4. **Combined** (``sasl.jaas.config``, ``ssl.truststore.*``, ``ssl.keystore.*``): translated
   together with their companions (JAAS PLAIN/SCRAM -> ``sasl.username``/``sasl.password``, PEM
   truststore -> ``ssl.ca.location``, PKCS12 keystore passes; JKS is refused).
5. **Everything else** is asked of the installed librdkafka: a throwaway ``Producer`` is built
   from the one property followed by a sentinel property librdkafka does not know. librdkafka
   checks properties in order and stops at the first failure, so the answer is either the
   property's own error (unknown name, invalid value) or the sentinel's, which means accepted;
   no client is ever created, so nothing connects anywhere and a probe takes microseconds.
   File paths are not opened at this point (librdkafka reads them when a client starts).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from k2k.config.client_rules import (
    JAVA_ONLY,
    MANAGED,
    OAUTHBEARER_ADVICE,
    REGISTRY_REASON,
    RENAMES,
    SUGGESTIONS,
)
from k2k.config.errors import Path, Problem, describe, suggest_key
from k2k.config.fields import scalar_text
from k2k.config.secrets import MASK, is_secret_key, reveal

__all__ = [
    "SOURCE_ROLES",
    "TARGET_ROLES",
    "JaasLogin",
    "bootstrap_problem",
    "bootstrap_problems",
    "check_cluster",
    "check_map",
    "librdkafka_verdict",
    "parse_jaas",
    "property_problem",
    "translate",
]

SOURCE_ROLES = ("consumer", "admin")
TARGET_ROLES = ("producer", "consumer", "admin")
BOOTSTRAP_EXPECTED = "host:port[,host:port...]"
Properties = Mapping[str, str | SecretStr]


#: Handled by :func:`translate` together with their companions, not probed one by one.
_COMBINED = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.keystore.location",
        "ssl.keystore.type",
    }
)

_BOOTSTRAP_KEYS = ("bootstrap.servers", "metadata.broker.list")


# --- the librdkafka probe ---------------------------------------------------------------------

_SENTINEL = "k2k.validation.sentinel"


def librdkafka_verdict(name: str, value: str) -> tuple[str, str] | None:
    """None when librdkafka accepts ``name: value``; else ``("unknown" | "invalid", message)``.

    Never creates a client (see the module docstring), so it connects nowhere.

    >>> librdkafka_verdict("linger.ms", "5") is None
    True
    >>> librdkafka_verdict("max.request.size", "1")[0]
    'unknown'
    >>> librdkafka_verdict("acks", "most")[0]
    'invalid'
    """
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({name: value, _SENTINEL: "probe"})
    except KafkaException as exc:
        message = exc.args[0].str() if exc.args else str(exc)
        if _SENTINEL in message:
            return None
        if "No such configuration property" in message:
            return "unknown", message.strip()
        return "invalid", message.strip()
    except (TypeError, ValueError) as exc:  # confluent-kafka's own Python-level keys (callbacks)
        return "unknown", str(exc)
    return "unknown", "accepted without the sentinel"  # pragma: no cover - cannot happen


# --- per-property checks ----------------------------------------------------------------------

_ADDRESS = re.compile(
    r"(?:[A-Za-z][A-Za-z0-9+.-]*://)?(?:\[[0-9A-Fa-f:.]+\]|[^\s:/,\[\]]+):(?P<port>[0-9]{1,5})"
)


def bootstrap_problem(text: str) -> str | None:
    """The problem with a ``bootstrap.servers`` value, or None.

    >>> bootstrap_problem("a:9092, b:9093") is None, bootstrap_problem("localhost")
    (True, "invalid address list, got 'localhost'; expected host:port[,host:port...]")
    """
    for entry in text.split(","):
        match = _ADDRESS.fullmatch(entry.strip())
        if match is None or not 0 < int(match["port"]) < 65536:
            return describe("invalid address list", got=text, expected=BOOTSTRAP_EXPECTED)
    return None


def _not_supported(reason: str) -> str:
    return f"not supported by k2k's Kafka client (librdkafka); remove it ({reason})"


def _managed_problem(key: str, text: str) -> str | None:
    rule = MANAGED.get(key)
    if rule is None:
        return None
    refused, reason = rule
    if refused is not None and text.strip().lower() not in refused:
        return None
    expected = "no entry" if refused is None else "no entry, or a value k2k allows"
    return describe("managed by k2k", got=text, expected=f"{expected} ({reason})")


def property_problem(key: str, text: str) -> str | None:
    """The problem with one property seen on its own (companions are checked in translate)."""
    secret = is_secret_key(key)
    managed = _managed_problem(key, text)
    if managed is not None:
        return managed
    if key in JAVA_ONLY:
        return _not_supported(JAVA_ONLY[key])
    if key.startswith(("schema.registry.", "basic.auth.")):
        return _not_supported(REGISTRY_REASON)
    if key in _BOOTSTRAP_KEYS:
        return bootstrap_problem(text)
    if key == "sasl.jaas.config":
        return parse_jaas(text)[1]
    if key in _COMBINED:
        return None
    name, value = key, text
    rename = RENAMES.get(key)
    if rename is not None:
        name = rename.target
        if rename.convert is not None:
            try:
                value = rename.convert(text)
            except ValueError as exc:
                reason = "not a whole number" if "invalid literal" in str(exc) else str(exc)
                return describe(f"invalid value ({reason})", got=text, secret=secret)
    verdict = librdkafka_verdict(name, value)
    if verdict is None:
        return None
    kind, message = verdict
    if kind == "unknown":
        close = difflib.get_close_matches(key, SUGGESTIONS, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return _not_supported(
            "neither a librdkafka property nor a Java client property k2k translates; "
            f"librdkafka's CONFIGURATION.md lists the supported names{hint}"
        )
    said = "librdkafka rejects it" if secret else f"librdkafka: {message}"
    return describe(
        "invalid value", got=text, expected=f"a value librdkafka accepts ({said})", secret=secret
    )


def check_map(raw: Any) -> tuple[dict[str, str | SecretStr], list[Problem]]:
    """Validate one property map (``common``, ``consumer`` ...) on its own.

    Returns the map with values as strings (secrets as :class:`SecretStr`) and the problems,
    each with a path relative to the map.
    """
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        expected = "a mapping of Kafka client property names to values"
        return {}, [((), describe("wrong type", got=raw, expected=expected))]
    props: dict[str, str | SecretStr] = {}
    problems: list[Problem] = []
    for key, value in raw.items():
        if not isinstance(key, str):
            problems.append(((str(key),), describe("property name is not a string", got=key)))
            continue
        secret = is_secret_key(key)
        text = reveal(value) if isinstance(value, SecretStr) else scalar_text(value)
        if text is None:
            expected = "a string, number or boolean"
            problems.append(
                ((key,), describe("wrong type", got=value, expected=expected, secret=secret))
            )
            continue
        props[key] = SecretStr(text) if secret else text
        problem = property_problem(key, text)
        if problem is not None:
            problems.append(((key,), problem))
    return props, problems


# --- JAAS ---------------------------------------------------------------------------------------

_JAAS = re.compile(
    r"\s*(?P<module>[A-Za-z_$][\w.$]*)\s+(?P<flag>required|requisite|sufficient|optional)\b"
    r"(?P<options>.*?);?\s*",
    re.DOTALL,
)
_OPTION = re.compile(
    r'\s*(?P<key>[\w.-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s";]+))'
)
_JAAS_EXPECTED = (
    "'org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="..." password="...";\' (or ScramLoginModule)'
)
_LOGIN_MODULE_ADVICE = {
    "OAuthBearerLoginModule": OAUTHBEARER_ADVICE,
    "Krb5LoginModule": "for Kerberos set sasl.mechanism: GSSAPI, sasl.kerberos.principal and "
    "sasl.kerberos.keytab",
}
_MECHANISMS = {
    "PlainLoginModule": ("PLAIN",),
    "ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}


@dataclass(frozen=True)
class JaasLogin:
    """The credentials of a PLAIN or SCRAM JAAS line (repr hides the password)."""

    module: str
    username: str
    password: str

    def __repr__(self) -> str:
        return f"JaasLogin(module={self.module!r}, username={self.username!r}, password={MASK!r})"


def parse_jaas(text: str) -> tuple[JaasLogin | None, str | None]:
    """Read a PLAIN/SCRAM ``sasl.jaas.config`` line; return (login, None) or (None, problem).

    >>> parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
    ...            'username="alice" password="s3cret";')
    (JaasLogin(module='PlainLoginModule', username='alice', password='******'), None)
    >>> parse_jaas("com.sun.security.auth.module.Krb5LoginModule required;")[1].split(",")[0]
    "unsupported login module 'Krb5LoginModule'"
    """
    match = _JAAS.fullmatch(text)
    if match is None:
        return None, describe(
            "not a JAAS line k2k can read", got=text, expected=_JAAS_EXPECTED, secret=True
        )
    module = match["module"].rsplit(".", 1)[-1]
    if module not in _MECHANISMS:
        advice = _LOGIN_MODULE_ADVICE.get(
            module, "only PlainLoginModule and ScramLoginModule are translated"
        )
        return None, describe(
            f"unsupported login module {module!r}",
            got=text,
            expected=f"{_JAAS_EXPECTED}; {advice}",
            secret=True,
        )
    options: dict[str, str] = {}
    rest, position = match["options"], 0
    while rest[position:].strip():
        option = _OPTION.match(rest, position)
        if option is None:
            return None, describe(
                "not a JAAS line k2k can read", got=text, expected=_JAAS_EXPECTED, secret=True
            )
        quoted = option["quoted"]
        options[option["key"]] = (
            re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option["bare"]
        )
        position = option.end()
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        what = f"{module} without {' and '.join(missing)}"
        return None, describe(what, got=text, expected=_JAAS_EXPECTED, secret=True)
    return JaasLogin(module, options["username"], options["password"]), None


# --- translation of a merged role map -------------------------------------------------------


class _Output:
    """Collects translated properties, refusing two sources that disagree on one name."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.origins: dict[str, Path] = {}
        self.problems: list[Problem] = []

    def put(self, name: str, value: str, origin: Path) -> None:
        previous = self.origins.get(name)
        if previous is not None and previous != origin and self.values[name] != value:
            secret = is_secret_key(name) or is_secret_key(origin[-1])
            layer, key = previous
            what = f"conflicts with {key} in the {layer} map (both set librdkafka's {name})"
            expected = "only one of the two, or the same value"
            problem = describe(what, got=value, expected=expected, secret=secret)
            self.problems.append((origin, problem))
            return
        self.values[name], self.origins[name] = value, origin


def _merge(layers: Sequence[tuple[str, Properties]]) -> dict[str, tuple[Path, str]]:
    merged: dict[str, tuple[Path, str]] = {}
    for layer, props in layers:
        for key, value in props.items():
            merged[key] = ((layer, key), reveal(value))
    return merged


def _translate_jaas(merged: dict[str, tuple[Path, str]], out: _Output) -> None:
    if "sasl.jaas.config" not in merged:
        return
    origin, text = merged["sasl.jaas.config"]
    login, _ = parse_jaas(text)
    if login is None:  # reported by check_map already
        return
    for name in ("sasl.username", "sasl.password"):
        if name in merged:
            what = f"given together with {name}"
            expected = (
                "the credentials in one place: sasl.jaas.config or sasl.username/sasl.password"
            )
            out.problems.append((origin, describe(what, got=text, expected=expected, secret=True)))
            return
    out.put("sasl.username", login.username, origin)
    out.put("sasl.password", login.password, origin)
    allowed = _MECHANISMS[login.module]
    mechanism = merged.get("sasl.mechanism") or merged.get("sasl.mechanisms")
    expected = f"{' or '.join(allowed)} to go with {login.module} in sasl.jaas.config"
    if mechanism is None:
        out.problems.append(((origin[0], "sasl.mechanism"), f"missing; expected {expected}"))
    elif mechanism[1].strip().upper() not in allowed:
        out.problems.append(
            (
                mechanism[0],
                describe(
                    "does not match the JAAS login module", got=mechanism[1], expected=expected
                ),
            )
        )


def _translate_truststore(merged: dict[str, tuple[Path, str]], out: _Output) -> None:
    location, kind = merged.get("ssl.truststore.location"), merged.get("ssl.truststore.type")
    if location is None:
        return
    store_type = kind[1].strip().upper() if kind else "JKS"
    if store_type == "PEM":
        out.put("ssl.ca.location", location[1], location[0])
        return
    default = "" if kind else " (JKS is Java's default when ssl.truststore.type is not set)"
    out.problems.append(
        (
            location[0],
            describe(
                f"{store_type} truststores are not supported by librdkafka{default}",
                got=location[1],
                expected="a PEM file of the CA certificates: convert it (keytool -exportcert -rfc, "
                "or openssl pkcs12 -nokeys) and set ssl.truststore.type: PEM, or use "
                "ssl.ca.location",
            ),
        )
    )


def _translate_keystore(merged: dict[str, tuple[Path, str]], out: _Output) -> None:
    location, kind = merged.get("ssl.keystore.location"), merged.get("ssl.keystore.type")
    if location is None:
        return
    store_type = kind[1].strip().upper() if kind else None
    if store_type == "JKS" or (store_type is None and location[1].lower().endswith(".jks")):
        problem = describe(
            "JKS keystores are not supported by librdkafka",
            got=location[1],
            expected="a PKCS12 file: convert it (keytool -importkeystore -deststoretype PKCS12) "
            "and set ssl.keystore.type: PKCS12",
        )
    elif store_type == "PEM":
        problem = describe(
            "PEM keystores are read by librdkafka from two properties",
            got=location[1],
            expected="ssl.certificate.location and ssl.key.location instead of "
            "ssl.keystore.location",
        )
    elif store_type not in (None, "PKCS12"):
        assert kind is not None
        out.problems.append(
            (kind[0], describe("unsupported keystore type", got=kind[1], expected="PKCS12"))
        )
        return
    else:
        out.put("ssl.keystore.location", location[1], location[0])
        return
    out.problems.append((location[0], problem))


def translate(layers: Sequence[tuple[str, Properties]]) -> tuple[dict[str, str], list[Problem]]:
    """Merge ``layers`` (later wins) and translate them to librdkafka properties.

    ``layers`` are ``(name, properties)`` pairs such as ``[("common", ...), ("consumer", ...)]``;
    problem paths start with the layer name. Properties that fail :func:`check_map` are expected
    to have been reported already and are passed over here.

    >>> props, problems = translate([("common", {"bootstrap.servers": "k:9092",
    ...     "max.request.size": "2000000"}), ("producer", {"buffer.memory": "33554432"})])
    >>> problems
    []
    >>> props["message.max.bytes"], props["queue.buffering.max.kbytes"]
    ('2000000', '32768')
    """
    merged = _merge(layers)
    out = _Output()
    for key, (origin, text) in merged.items():
        if key in _COMBINED or key in JAVA_ONLY:
            continue
        rename = RENAMES.get(key)
        if rename is None:
            out.put(key, text, origin)
            continue
        try:
            value = rename.convert(text) if rename.convert else text
        except ValueError:
            continue
        out.put(rename.target, value, origin)
    _translate_jaas(merged, out)
    _translate_truststore(merged, out)
    _translate_keystore(merged, out)
    return out.values, out.problems


def bootstrap_problems(common: Properties, roles: Mapping[str, Properties]) -> list[Problem]:
    """``bootstrap.servers`` must be in ``common`` or in every role map."""
    if any(key in common for key in _BOOTSTRAP_KEYS):
        return []
    lacking = [
        role for role, props in roles.items() if not any(k in props for k in _BOOTSTRAP_KEYS)
    ]
    if len(lacking) == len(roles):
        return [(("common", "bootstrap.servers"), f"missing; expected {BOOTSTRAP_EXPECTED}")]
    return [
        ((role, "bootstrap.servers"), f"missing; expected {BOOTSTRAP_EXPECTED} (here or in common)")
        for role in lacking
    ]


def check_cluster(
    raw: Mapping[str, Any], roles: Sequence[str]
) -> tuple[dict[str, dict[str, str | SecretStr]], list[Problem]]:
    """Check a cluster's whole ``kafka`` section: ``common`` plus one map per role.

    Returns the normalised maps and every problem (paths relative to the section): unknown
    role names, per-property problems, problems of properties translated together, and a
    missing ``bootstrap.servers``. A path is reported once, with its first problem.
    """
    allowed = ("common", *roles)
    maps: dict[str, dict[str, str | SecretStr]] = {name: {} for name in allowed}
    problems: list[Problem] = []
    for key, value in raw.items():
        if key not in allowed:
            problems.append(((str(key),), suggest_key(str(key), allowed)))
            continue
        maps[key], found = check_map(value)
        problems.extend(((key, *path), text) for path, text in found)
    for role in roles:
        problems.extend(translate([("common", maps["common"]), (role, maps[role])])[1])
    others = {role: maps[role] for role in roles}
    problems.extend(bootstrap_problems(maps["common"], others))
    reported: set[Path] = set()
    unique: list[Problem] = []
    for path, text in problems:
        if path not in reported:
            reported.add(path)
            unique.append((path, text))
    return maps, unique
