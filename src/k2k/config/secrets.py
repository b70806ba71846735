"""Which configuration values are secret, and how they are hidden.

A pipeline file holds broker passwords, JAAS lines and registry credentials. They are kept as
:class:`pydantic.SecretStr` from the moment the file is validated, so ``str()``/``repr()`` of the
model, the effective configuration and every error message show :data:`MASK` instead. The rule
goes by key name because values give no hint; it masks generously (``*token*`` also hides a
token endpoint URL) since showing a secret is worse than hiding a harmless value.

>>> [is_secret_key(k) for k in ["sasl.password", "ssl.keystore.password", "bootstrap.servers"]]
[True, True, False]
>>> mask_tree({"sasl.jaas.config": "x", "nested": {"token": "t"}, "acks": "all"})
{'sasl.jaas.config': '******', 'nested': {'token': '******'}, 'acks': 'all'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr

__all__ = ["MASK", "hide_secrets", "is_secret_key", "mask_tree", "reveal"]

MASK = "******"

_SECRET_NAMES = frozenset(
    {"sasl.jaas.config", "ssl.key.pem", "ssl.keystore.key", "sasl.oauthbearer.config"}
)
_SECRET_PARTS = ("password", "secret", "token", "basic.auth.user.info", "credentials")


def is_secret_key(key: object) -> bool:
    """True when the value under ``key`` must never be shown."""
    if not isinstance(key, str):
        return False
    lowered = key.lower()
    return lowered in _SECRET_NAMES or any(part in lowered for part in _SECRET_PARTS)


def hide_secrets(data: Any, key: object = None) -> Any:
    """Copy of a YAML tree where every scalar under a secret key is a :class:`SecretStr`.

    Used for free-form sections (``license``, ``registry``, ``metrics`` ...) whose keys k2k does
    not model one by one, so that they are masked like the modelled ones.

    >>> hide_secrets({"config": {"basic.auth.user.info": "u:p", "url": "http://sr"}})
    {'config': {'basic.auth.user.info': SecretStr('**********'), 'url': 'http://sr'}}
    """
    if isinstance(data, Mapping):
        return {k: hide_secrets(v, k) for k, v in data.items()}
    if isinstance(data, list):
        return [hide_secrets(item, key) for item in data]
    if is_secret_key(key) and data is not None and not isinstance(data, SecretStr):
        return SecretStr(str(data))
    return data


def mask_tree(data: Any, key: object = None) -> Any:
    """Copy of a tree fit for display: secrets (by key or by type) become :data:`MASK`."""
    if isinstance(data, SecretStr):
        return MASK
    if isinstance(data, Mapping):
        return {k: mask_tree(v, k) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [mask_tree(item, key) for item in data]
    if is_secret_key(key) and data is not None:
        return MASK
    return data


def reveal(value: str | SecretStr) -> str:
    """The plain text of a property value, for handing to librdkafka (never for display)."""
    return value.get_secret_value() if isinstance(value, SecretStr) else value
