"""A small client of the Confluent Schema Registry API: the calls schema mapping needs.

Runs on: executor (one per runner task, inside :class:`~k2k.schemamapping.mapper.SchemaMapper`),
and never per record: only when a schema id is seen for the first time; and on the driver
once at start (:meth:`RegistryClient.check`). Plain ``urllib``: a few
JSON calls need no HTTP library, and executors need no extra package.

Failures are classified once (STYLE 8):

* **retry** — connection refused or reset, timeouts, HTTP 5xx, 408 and 429: retried with
  exponential backoff (0.2 s doubling up to 5 s) until ``retry_timeout_s`` has passed, then
  :class:`RegistryUnavailable`;
* **fail** — any other HTTP error (404 not found, 409 incompatible, 401/403, 422 invalid):
  :class:`RegistryRefused` at once, with the registry's own message; a TLS handshake that
  fails on every URL, TLS files that do not load, and answers that are not the Confluent
  API's: :class:`RegistryFailure` at once.

:meth:`RegistryClient.check` is the driver's start-up call (one attempt, no retry).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from k2k.errors import K2KError
from k2k.observability.redact import url_without_user

if TYPE_CHECKING:  # executors import this module; the config model (pydantic) is the driver's
    from k2k.config.schema_mapping import RegistryConnection

__all__ = [
    "RegistryClient",
    "RegistryEndpoint",
    "RegistryFailure",
    "RegistryRefused",
    "RegistryUnavailable",
    "SchemaRecord",
]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_FIRST_BACKOFF_S = 0.2
_MAX_BACKOFF_S = 5.0
_RETRIED_STATUS = frozenset({408, 429})


class RegistryFailure(K2KError):
    """A registry call that failed for good; the mapper turns it into a
    :class:`~k2k.errors.SchemaMappingError` naming the record, subject and id.

    Internal: the mapper, the start-up check and ``k2k verify`` raise another error in its
    place (and in its subclasses' place) that carries its message."""


class RegistryUnavailable(RegistryFailure):
    """The registry did not answer within the retry window.

    Internal: a warning at start-up, else raised again as an error carrying its message."""


class RegistryRefused(RegistryFailure):
    """The registry answered with an error that retrying cannot change.

    Internal: raised again as an error carrying its message (verify takes a 404 as an
    unknown id)."""

    def __init__(self, message: str, status: int, code: int | None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class SchemaRecord:
    """A schema as the registry holds it: text, type and references (name, subject, version)."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[tuple[str, str, int], ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SchemaRecord:
        refs = tuple(
            (str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in data.get("references") or ()
        )
        return cls(str(data["schema"]), str(data.get("schemaType") or "AVRO").upper(), refs)

    def to_json(self, references: tuple[tuple[str, str, int], ...]) -> dict[str, Any]:
        """The registration body, with ``references`` (their versions on the target)."""
        body: dict[str, Any] = {"schema": self.schema}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if references:
            body["references"] = [
                {"name": name, "subject": subject, "version": version}
                for name, subject, version in references
            ]
        return body


@dataclass(frozen=True, repr=False)
class RegistryEndpoint:
    """Where and how to reach one registry; picklable (it travels in the lease spec).

    ``repr`` shows the cluster and URLs only, never the credentials.
    """

    cluster: str
    urls: tuple[str, ...]
    user_info: str | None = field(default=None, repr=False)
    ca_location: str | None = None
    cert_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    request_timeout_s: float = 10.0
    retry_timeout_s: float = 20.0

    @classmethod
    def from_config(
        cls,
        cluster: str,
        conn: RegistryConnection,
        request_timeout_s: float,
        retry_timeout_s: float,
    ) -> RegistryEndpoint:
        """Runs on: driver. The endpoint of ``<cluster>.registry.config``."""
        urls = tuple(u.strip().rstrip("/") for u in (conn.url or "").split(",") if u.strip())
        user_info = conn.setting("basic.auth.user.info", "schema.registry.basic.auth.user.info")
        source = (conn.setting("basic.auth.credentials.source") or "USER_INFO").upper()
        if source == "URL":
            user_info = None  # each request takes it from its URL
        algorithm = conn.setting("schema.registry.ssl.endpoint.identification.algorithm")
        return cls(
            cluster,
            urls,
            user_info=user_info,
            ca_location=conn.setting(
                "schema.registry.ssl.ca.location", "schema.registry.ssl.truststore.location"
            ),
            cert_location=conn.setting("schema.registry.ssl.certificate.location"),
            key_location=conn.setting("schema.registry.ssl.key.location"),
            key_password=conn.setting("schema.registry.ssl.key.password"),
            check_hostname=(algorithm if algorithm is not None else "https").lower() == "https",
            request_timeout_s=request_timeout_s,
            retry_timeout_s=retry_timeout_s,
        )

    def __repr__(self) -> str:
        return f"RegistryEndpoint({self.shown()})"

    def shown(self) -> str:
        """The registry for messages: cluster and URLs without any user:password."""
        return f"{self.cluster} registry " + ",".join(url_without_user(u) for u in self.urls)


class RegistryClient:
    """Runs on: executor. The Confluent API calls of one registry, with retries."""

    def __init__(self, endpoint: RegistryEndpoint) -> None:
        self.endpoint = endpoint
        self._context = self._ssl_context()
        self._url = 0  # the URL that answered last

    def schema_by_id(self, schema_id: int) -> SchemaRecord:
        """``GET /schemas/ids/{id}``."""
        return self._schema(self._call("GET", f"/schemas/ids/{schema_id}"))

    def version(self, subject: str, version: int) -> SchemaRecord:
        """``GET /subjects/{subject}/versions/{version}`` (a reference's schema)."""
        path = f"/subjects/{_quote(subject)}/versions/{version}"
        return self._schema(self._call("GET", path))

    def register(
        self, subject: str, schema: SchemaRecord, refs: tuple[tuple[str, str, int], ...]
    ) -> int:
        """``POST /subjects/{subject}/versions``: the id of ``schema`` under ``subject``,
        registering it when new."""
        path = f"/subjects/{_quote(subject)}/versions"
        return self._number(self._call("POST", path, schema.to_json(refs)), "id")

    def lookup_version(
        self, subject: str, schema: SchemaRecord, refs: tuple[tuple[str, str, int], ...]
    ) -> int:
        """``POST /subjects/{subject}``: the version of a registered ``schema`` under
        ``subject`` (references point at subject versions, not ids)."""
        path = f"/subjects/{_quote(subject)}"
        return self._number(self._call("POST", path, schema.to_json(refs)), "version")

    def check(self) -> None:
        """A start-up check, one ``GET /schemas/types`` over the URLs and no retry: raises
        :class:`RegistryUnavailable` when no URL answered, and another
        :class:`RegistryFailure` when one answered but the settings are wrong (credentials,
        a URL that is not the Confluent API)."""
        try:
            answer = self._once("GET", "/schemas/types", None)
        except _Retry as exc:
            raise RegistryUnavailable(f"{self.endpoint.shown()} did not answer ({exc})") from None
        except RegistryRefused as exc:
            if exc.status == 404:
                raise self._malformed(None, "the schema types (HTTP 404)") from None
            raise
        if not isinstance(answer, list):
            raise self._malformed(answer, "a list of schema types")

    def _number(self, answer: Any, name: str) -> int:
        try:
            return int(answer[name])
        except (KeyError, TypeError, ValueError, IndexError):
            raise self._malformed(answer, f"a number {name!r}") from None

    def _schema(self, answer: Any) -> SchemaRecord:
        try:
            return SchemaRecord.from_json(answer)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise self._malformed(answer, "a schema") from None

    def _malformed(self, answer: Any, expected: str) -> RegistryFailure:
        """An answer that is not what the Confluent API returns (a wrong URL, or a proxy)."""
        shape = ""
        if isinstance(answer, dict):
            shape = f" (fields: {', '.join(sorted(map(str, answer))) or 'none'})"
        return RegistryFailure(
            f"{self.endpoint.shown()} answered without {expected}{shape}; is "
            "schema.registry.url the registry's Confluent-compatible API?"
        )

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One API call, retried per the module's policy over every URL."""
        deadline = time.monotonic() + self.endpoint.retry_timeout_s
        backoff = _FIRST_BACKOFF_S
        while True:
            try:
                return self._once(method, path, body)
            except _Retry as exc:
                last = exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RegistryUnavailable(
                    f"{self.endpoint.shown()} did not answer for "
                    f"{self.endpoint.retry_timeout_s:g} s ({last})"
                ) from None
            time.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    def _once(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One attempt, starting at the URL that answered last; raises :class:`_Retry` when
        no URL answered."""
        urls = self.endpoint.urls
        failures: list[_Retry] = []
        for step in range(len(urls)):
            index = (self._url + step) % len(urls)
            try:
                answer = self._request(urls[index], method, path, body)
            except _Retry as exc:
                failures.append(exc)
                continue
            self._url = index
            return answer
        if failures and all(isinstance(f, _TlsRefused) for f in failures):
            # A certificate that does not verify, or https to a plain port: no retry helps.
            raise RegistryFailure(str(failures[-1]))
        raise failures[-1] if failures else _Retry("no URL")

    def _request(self, base: str, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One request to one URL: the answer's JSON."""
        parts = urllib.parse.urlsplit(base)
        headers = {"Accept": _CONTENT_TYPE, "Content-Type": _CONTENT_TYPE}
        user_info = self.endpoint.user_info
        if user_info is None and "@" in parts.netloc:
            user_info = urllib.parse.unquote(parts.netloc.rsplit("@", 1)[0])
        if user_info is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
        url = url_without_user(base) + path  # user info goes in a header, never the URL
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(
                request, timeout=self.endpoint.request_timeout_s, context=self._context
            ) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            status, code, message = exc.code, *_error_body(exc)
            if status >= 500 or status in _RETRIED_STATUS:
                raise _Retry(f"HTTP {status}: {message}") from None
            raise RegistryRefused(
                f"{self.endpoint.shown()} answered HTTP {status}"
                + (f" (error {code})" if code is not None else "")
                + f": {message}",
                status,
                code,
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = exc if isinstance(exc, ssl.SSLError) else getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLError):
                raise _TlsRefused(
                    f"{method} {url_without_user(base)}: TLS failed: {reason}"
                ) from None
            raise _Retry(f"{method} {url_without_user(base)}: {reason}") from None
        except http.client.HTTPException as exc:
            # Only the class: its text may quote the URL (and a password in it).
            raise _Retry(f"{method} {url_without_user(base)}: {type(exc).__name__}") from None
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            raise self._malformed(None, "JSON") from None

    def _ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of ``https`` URLs; unreadable files fail as a registry failure
        (the files are read where the client runs: on an executor, they must exist there)."""
        ep = self.endpoint
        if not any(u.lower().startswith("https:") for u in ep.urls):
            return None
        try:
            context = ssl.create_default_context(cafile=ep.ca_location)
            context.check_hostname = ep.check_hostname
            if ep.cert_location:
                context.load_cert_chain(ep.cert_location, ep.key_location, ep.key_password)
        except (OSError, ssl.SSLError) as exc:  # SSLError is an OSError; named for the reader
            raise RegistryFailure(
                f"{ep.shown()}: cannot set up TLS from the CA, certificate or key file in "
                f"{ep.cluster}.registry.config: {exc}"
            ) from None
        return context


class _Retry(RegistryFailure):
    """A transient failure of one attempt.

    Internal: the client tries the other URLs, again until the retry window ends, then
    raises RegistryUnavailable."""


class _TlsRefused(_Retry):
    """A TLS handshake that failed: another URL may answer, but retrying this one will not.

    Internal: when every URL refuses the handshake, the client raises a RegistryFailure."""


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _error_body(exc: urllib.error.HTTPError) -> tuple[int | None, str]:
    """The registry's ``error_code`` and ``message``, or the HTTP reason."""
    try:
        data = json.loads(exc.read() or b"{}")
        return data.get("error_code"), str(data.get("message") or exc.reason)
    except (ValueError, OSError, AttributeError):
        return None, str(exc.reason)
