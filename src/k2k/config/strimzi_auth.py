"""A Strimzi cluster's ``tls`` and ``authentication`` as Kafka client properties, with the
Kubernetes Secrets they name read from files.

k2k does not talk to Kubernetes. A Secret is read as Kubernetes mounts it in a pod: one file per
key, ``$K2K_SECRETS_DIR/<secretName>/<key>`` (mount the Secrets there, or write the files
yourself). Certificates are passed to librdkafka by path; a password is read when the resource
is translated and masked wherever k2k shows it. A reference that cannot be read is one line
naming the resource path and the file k2k looked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["SECRETS_DIR", "Secrets", "client_security"]

#: The environment variable naming the directory that holds the Secrets.
SECRETS_DIR = "K2K_SECRETS_DIR"
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_MECHANISMS = {"scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512", "plain": "PLAIN"}
_TYPES = "tls, scram-sha-256, scram-sha-512, plain or custom"


class SecretError(Exception):
    """A Secret reference that cannot be resolved: ``args[0]`` is the one-line problem."""


class Secrets:
    """The Kubernetes Secrets a resource names, read from ``$K2K_SECRETS_DIR``."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        root = environ.get(SECRETS_DIR, "").strip()
        self.root = Path(root) if root else None

    def _folder(self, where: str, ref: Any, what: str) -> Path:
        if not isinstance(ref, Mapping):
            raise SecretError(f"{where}: missing, expected {{secretName: ..., {what}: ...}}")
        name = ref.get("secretName")
        if not isinstance(name, str) or _NAME.fullmatch(name) is None or set(name) == {"."}:
            raise SecretError(f"{where}.secretName: {name!r}, expected a Secret's name")
        if self.root is None:
            raise SecretError(
                f"{where}: Kubernetes Secret {name!r} cannot be read: k2k reads Secrets from "
                f"files, expected {SECRETS_DIR} set to a directory holding {name}/<key> "
                "(as Kubernetes mounts a Secret)"
            )
        return self.root / name

    def file(self, where: str, ref: Any, key_field: str) -> Path:
        """The file of the key that ``ref[key_field]`` names in Secret ``ref["secretName"]``."""
        folder = self._folder(where, ref, key_field)
        key = ref.get(key_field)
        if not isinstance(key, str) or _NAME.fullmatch(key) is None or set(key) == {"."}:
            raise SecretError(f"{where}.{key_field}: {key!r}, expected a key of the Secret")
        path = folder / key
        if not path.is_file():
            raise SecretError(
                f"{where}: {path}: no such file, expected Secret {folder.name!r}'s key "
                f"{key!r} there (${SECRETS_DIR}/<secretName>/<key>)"
            )
        return path

    def matching(self, where: str, ref: Any) -> list[Path]:
        """The files of a ``trustedCertificates`` entry: its ``certificate``, or every key
        its glob ``pattern`` matches."""
        if isinstance(ref, Mapping) and "pattern" in ref and "certificate" not in ref:
            pattern = str(ref["pattern"])
            if "/" in pattern or ".." in pattern:
                raise SecretError(f"{where}.pattern: {pattern!r}, expected a glob of key names")
            folder = self._folder(where, ref, "pattern")
            found = sorted(p for p in folder.glob(pattern) if p.is_file())
            if not found:
                raise SecretError(
                    f"{where}.pattern: no file of {folder} matches {pattern!r}, expected "
                    f"Secret {folder.name!r}'s certificates there (${SECRETS_DIR}/<secretName>/)"
                )
            return found
        return [self.file(where, ref, "certificate")]

    def text(self, where: str, ref: Any, key_field: str) -> str:
        """A key's value (one trailing newline dropped, as editors add one)."""
        path = self.file(where, ref, key_field)
        try:
            return path.read_text(encoding="utf-8").removesuffix("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise SecretError(f"{where}: {path}: cannot be read ({exc})") from None


Props = dict[str, tuple[str, str]]


def _trusted(where: str, tls: Any, secrets: Secrets, out: Props) -> None:
    certificates = tls.get("trustedCertificates") if isinstance(tls, Mapping) else None
    if not certificates:
        return  # the system's CAs, as Java's default truststore
    if not isinstance(certificates, list):
        raise SecretError(f"{where}.trustedCertificates: expected a list")
    files = [
        path
        for i, ref in enumerate(certificates)
        for path in secrets.matching(f"{where}.trustedCertificates[{i}]", ref)
    ]
    origin = f"{where}.trustedCertificates"
    if len(files) == 1:
        out["ssl.ca.location"] = (str(files[0]), origin)
        return
    try:
        pems = [path.read_text(encoding="utf-8").strip() for path in files]
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretError(f"{origin}: a certificate file cannot be read ({exc})") from None
    out["ssl.ca.pem"] = ("\n".join(pems) + "\n", origin)


def _password_login(where: str, auth: Mapping[str, Any], kind: str, secrets: Secrets) -> Props:
    user = auth.get("username")
    if not isinstance(user, str) or not user:
        raise SecretError(f"{where}.username: missing, expected the user of {kind}")
    password = secrets.text(f"{where}.passwordSecret", auth.get("passwordSecret"), "password")
    return {
        "sasl.mechanism": (_MECHANISMS[kind], f"{where}.type"),
        "sasl.username": (user, f"{where}.username"),
        "sasl.password": (password, f"{where}.passwordSecret"),
    }


def _authentication(where: str, auth: Any, secrets: Secrets) -> tuple[Props, bool]:
    """The client properties of ``auth`` and whether it is SASL."""
    if not isinstance(auth, Mapping):
        raise SecretError(f"{where}: expected a mapping with a type ({_TYPES})")
    kind = str(auth.get("type", "")).strip().lower()
    if kind in _MECHANISMS:
        return _password_login(where, auth, kind, secrets), True
    if kind == "tls":
        ref, at = auth.get("certificateAndKey"), f"{where}.certificateAndKey"
        return {
            "ssl.certificate.location": (str(secrets.file(at, ref, "certificate")), at),
            "ssl.key.location": (str(secrets.file(at, ref, "key")), at),
        }, False
    if kind == "custom":
        config = auth.get("config") or {}
        if not isinstance(config, Mapping):
            raise SecretError(f"{where}.config: expected a mapping of client properties")
        props = {str(k): (_scalar(v), f"{where}.config.{k}") for k, v in config.items()}
        return props, auth.get("sasl") is True
    raise SecretError(
        f"{where}.type: {auth.get('type')!r} is not translated, expected {_TYPES} (for "
        "OAuth, write the sasl.oauthbearer.* client properties in a k2k pipeline file)"
    )


def _scalar(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def client_security(where: str, cluster: Mapping[str, Any], secrets: Secrets) -> Props:
    """``security.protocol`` and the TLS and SASL properties of the Strimzi cluster spec at
    ``where`` (``spec.clusters[0]``), as Strimzi gives them to the connectors; each value with
    the resource path it came from. Raises SecretError."""
    tls = cluster.get("tls")
    out: Props = {}
    if tls is not None:
        _trusted(f"{where}.tls", tls, secrets, out)
    sasl = False
    if cluster.get("authentication") is not None:
        props, sasl = _authentication(f"{where}.authentication", cluster["authentication"], secrets)
        out.update(props)
    protocol = ("SASL_" if sasl else "") + ("SSL" if tls is not None else "PLAINTEXT")
    out["security.protocol"] = (protocol, f"{where}.tls" if tls is not None else where)
    return out
