"""The client's one door to an appliance: HTTP/1.1 over the standard library, JSON in and
out, an API key as the bearer, and every failure one of two exceptions.

Rules this module guards:
1. Only the published API is spoken (contracts/openapi/scheduler.yaml): a path under the
   appliance's base URL (which may carry a prefix, e.g. ``https://box/steeple``).
2. A refusal (any status but 2xx) raises :class:`ApiProblem` carrying the status and the
   RFC 9457 problem as sent; an answer that is no problem gets a problem made from the
   status line, so callers read one shape.
3. Not getting an answer (DNS, connect, TLS, a reset, a timeout, a 2xx body that does
   not parse, a header http.client cannot send) raises :class:`ClientError`, naming the
   URL; nothing else escapes.
4. Each request opens its own connection and closes it: nothing is retried here, so a
   POST is never sent twice behind the caller's back.
5. TLS uses ``ssl.create_default_context()``: the system's CA store, hostname checked.
"""

from __future__ import annotations

import enum
import http.client
import json as jsonlib
import re
import socket
import ssl
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Union
from urllib.parse import urlencode, urlsplit

from appliance import __version__
from appliance.errors import FieldError, SteepleError

# A JSON document as json.loads gives it.
JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]  # noqa: UP007
JsonObject = dict[str, JsonValue]
# Query parameters: a repeated parameter (``state=failed&state=missed``) is a sequence.
Params = Mapping[str, str | int | Sequence[str]]

DEFAULT_TIMEOUT_S = 30.0
API_KEY = re.compile(r"[\x21-\x7e]+")  # what a header value may carry, and no space
NOT_IN_URL = re.compile(r"[\x00-\x20\x7f]")  # http.client cannot send a space or control
USER_AGENT = f"steeple-cli/{__version__}"


class ClientError(SteepleError):
    """No usable answer from the appliance (unreachable, TLS, timeout, not JSON)."""


class ApiProblem(ClientError):
    """The appliance refused: ``status`` and the RFC 9457 ``problem`` it sent."""

    def __init__(self, status: int, problem: JsonObject) -> None:
        self.status = status
        self.problem = problem
        super().__init__(self.summary)

    @property
    def title(self) -> str:
        return _text(self.problem.get("title")) or http.client.responses.get(self.status, "")

    @property
    def detail(self) -> str:
        return _text(self.problem.get("detail"))

    @property
    def type(self) -> str:
        return _text(self.problem.get("type")) or "about:blank"

    @property
    def errors(self) -> tuple[FieldError, ...]:
        """The per-field errors of a 422 (``errors``), in the order sent."""
        raw = self.problem.get("errors")
        if not isinstance(raw, list):
            return ()
        return tuple(_field_error(item) for item in raw if isinstance(item, dict))

    @property
    def summary(self) -> str:
        """``404 Not Found: no schedule sch_…`` (the title, then the detail if it adds)."""
        head = f"{self.status} {self.title}".rstrip()
        detail = self.detail
        return f"{head}: {detail}" if detail and detail != self.title else head


def _text(value: JsonValue) -> str:
    return value if isinstance(value, str) else ""


def _field_error(item: JsonObject) -> FieldError:
    index = item.get("index")
    return FieldError(
        field=_text(item.get("field")) or "$",
        message=_text(item.get("message")),
        index=index if isinstance(index, int) and not isinstance(index, bool) else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A 2xx answer to ``request`` (``GET https://box/v1/…``): ``headers`` with lower-case
    names; ``json`` is None for no body."""

    request: str
    status: int
    headers: Mapping[str, str]
    json: JsonValue

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    def object(self) -> JsonObject:
        """The body as a JSON object; ClientError when it is anything else."""
        if isinstance(self.json, dict):
            return self.json
        got = "no body" if self.json is None else f"{self.json!r:.80}"
        raise ClientError(
            f"{self.request} answered {self.status} without the JSON object the API sends"
            f" ({got}): is that URL a Steeple appliance?"
        )


class _Omitted(enum.Enum):
    """No body at all (JSON ``null`` is a body)."""

    BODY = enum.auto()


NO_BODY = _Omitted.BODY


@dataclass(frozen=True, slots=True, kw_only=True)
class Client:
    """An appliance at ``base_url`` (``http(s)://host[:port][/prefix]``) and a tenant API
    key. Methods raise :class:`ApiProblem` on a refusal, :class:`ClientError` otherwise."""

    base_url: str
    api_key: str = field(repr=False)  # never in a traceback or a log line
    timeout_s: float = DEFAULT_TIMEOUT_S
    tls: ssl.SSLContext | None = field(default=None, repr=False)  # https only

    @classmethod
    def from_settings(
        cls,
        url: str,
        key: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        tls: ssl.SSLContext | None = None,
    ) -> Client:
        """Check ``url`` (http or https, a host) and build a client; ClientError if bad.
        An https URL verifies with ``tls``, by default the system's CA store."""
        base_url = _appliance_url(url)
        if not API_KEY.fullmatch(key.strip()):
            raise ClientError("the API key must be one word of printable ASCII (stk_…)")
        return cls(base_url=base_url, api_key=key.strip(), timeout_s=timeout_s, tls=tls)

    def get(
        self, path: str, *, params: Params | None = None, headers: Mapping[str, str] | None = None
    ) -> Reply:
        return self.request("GET", path, params=params, headers=headers)

    def post(
        self,
        path: str,
        *,
        json: JsonValue | _Omitted = NO_BODY,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        return self.request("POST", path, json=json, headers=headers)

    def patch(
        self, path: str, *, json: JsonValue, headers: Mapping[str, str] | None = None
    ) -> Reply:
        return self.request("PATCH", path, json=json, headers=headers)

    def delete(self, path: str, *, headers: Mapping[str, str] | None = None) -> Reply:
        return self.request("DELETE", path, headers=headers)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        json: JsonValue | _Omitted = NO_BODY,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """Send one request and read the whole answer."""
        body = None if json is NO_BODY else jsonlib.dumps(json).encode()
        with self._exchange(method, path, params, body, headers) as response:
            raw = self._read(response)
            answer = _headers(response)
        if not 200 <= response.status < 300:
            raise ApiProblem(response.status, _problem(response, _lenient(raw, answer)))
        document = self._decode(method, path, raw, answer)
        return Reply(
            request=f"{method} {self._url(path)}",
            status=response.status,
            headers=answer,
            json=document,
        )

    @contextmanager
    def stream(
        self, path: str, *, params: Params | None = None, headers: Mapping[str, str] | None = None
    ) -> Iterator[Iterator[str]]:
        """A GET whose answer is read line by line as it arrives (Server-Sent Events):
        yields an iterator of lines without their line ends, which stops when the server
        ends the response. A refusal raises ApiProblem before anything is yielded; a
        connection lost mid-stream raises ClientError from the iterator."""
        with self._exchange("GET", path, params, None, headers) as response:
            if response.status != 200:
                raw = self._read(response)
                document = _lenient(raw, _headers(response))
                raise ApiProblem(response.status, _problem(response, document))
            yield self._lines(response, path)

    def _lines(self, response: http.client.HTTPResponse, path: str) -> Iterator[str]:
        while True:
            try:
                line = response.readline()
            except (OSError, http.client.HTTPException) as exc:
                raise ClientError(
                    f"the stream {self._url(path)} was cut off: {_reason(exc)}"
                ) from exc
            if not line:
                return
            yield line.decode("utf-8", "replace").rstrip("\r\n")

    @contextmanager
    def _exchange(
        self,
        method: str,
        path: str,
        params: Params | None,
        body: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> Iterator[http.client.HTTPResponse]:
        connection = self._connect()
        target = self._target(path, params)
        sent = {
            "Authorization": f"Bearer {self.api_key}",
            "Accept": "application/json, application/problem+json",
            "User-Agent": USER_AGENT,
            **({"Content-Type": "application/json"} if body is not None else {}),
            **(headers or {}),
        }
        try:
            try:
                connection.request(method, target, body=body, headers=sent)
                response = connection.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                raise ClientError(f"cannot reach {self._url(path)}: {_reason(exc)}") from exc
            except ValueError as exc:  # http.client refuses a header or path it cannot send
                raise ClientError(f"cannot send {method} {target}: {exc}") from exc
            yield response
        finally:
            connection.close()

    def _connect(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.base_url)
        host, port = parts.hostname or "", parts.port
        if parts.scheme == "https":
            tls = self.tls or ssl.create_default_context()
            return http.client.HTTPSConnection(host, port, timeout=self.timeout_s, context=tls)
        return http.client.HTTPConnection(host, port, timeout=self.timeout_s)

    def _target(self, path: str, params: Params | None) -> str:
        prefix = urlsplit(self.base_url).path.rstrip("/")
        query = urlencode({k: v for k, v in (params or {}).items()}, doseq=True)
        return f"{prefix}{path}" + (f"?{query}" if query else "")

    def _url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _read(self, response: http.client.HTTPResponse) -> bytes:
        try:
            return response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ClientError(
                f"the answer from {self.base_url} was cut off: {_reason(exc)}"
            ) from exc

    def _decode(self, method: str, path: str, raw: bytes, headers: Mapping[str, str]) -> JsonValue:
        if not raw:
            return None
        if "json" not in headers.get("content-type", ""):
            return raw.decode("utf-8", "replace")  # a proxy's HTML page, say: kept as text
        try:
            document: JsonValue = jsonlib.loads(raw)
        except ValueError as exc:
            raise ClientError(
                f"{method} {self._url(path)} answered JSON that does not parse"
            ) from exc
        return document


def _appliance_url(url: str) -> str:
    """``url`` without its trailing ``/``, or ClientError naming what is wrong with it."""
    text = url.strip()
    shown = _shown(text)
    shape = f"the appliance URL must be http(s)://host[:port][/prefix], not {shown!r}"
    try:
        parts = urlsplit(text)
        port = parts.port  # reading it checks it: a number from 0 to 65535
    except ValueError as exc:  # a bad port, an unclosed [IPv6 bracket
        raise ClientError(f"{shape}: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ClientError(shape)
    if NOT_IN_URL.search(text) or port == 0:
        raise ClientError(f"{shape}: a space, a control character or port 0")
    if "@" in parts.netloc:  # it would be dropped: the API key is the one credential
        raise ClientError(f"the appliance URL takes no user:password@: {shown!r}")
    if parts.query or parts.fragment:
        raise ClientError(f"the appliance URL takes no query or fragment: {shown!r}")
    return text.rstrip("/")


def _shown(url: str) -> str:
    """``url`` to print: the password of a ``user:password@`` replaced by ``…``."""
    head, at, _ = url.partition("://")[2].partition("/")[0].rpartition("@")
    if not at or ":" not in head:
        return url
    return url.replace(f"{head}@", f"{head.partition(':')[0]}:…@", 1)


def _headers(response: http.client.HTTPResponse) -> dict[str, str]:
    return {name.lower(): value for name, value in response.getheaders()}


def _lenient(raw: bytes, headers: Mapping[str, str]) -> JsonValue:
    """A refusal's body: its JSON if it is JSON, else its text (a proxy's error page)."""
    text = raw.decode("utf-8", "replace")
    if "json" in headers.get("content-type", ""):
        try:
            document: JsonValue = jsonlib.loads(text)
        except ValueError:
            return text
        return document
    return text


def _problem(response: http.client.HTTPResponse, document: JsonValue) -> JsonObject:
    if isinstance(document, dict):
        return document
    title = response.reason or http.client.responses.get(response.status, "")
    detail = document.strip()[:200] if isinstance(document, str) else ""
    return {"type": "about:blank", "title": title, "status": response.status, "detail": detail}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted ({exc.verify_message})"
    if isinstance(exc, socket.gaierror):
        return f"host name not found ({exc.strerror})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return str(exc) or type(exc).__name__
