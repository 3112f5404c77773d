"""Reading one HTTP/1.1 response: llhttp (through ``httptools``) parses, this module judges.

    reader = ResponseReader()        one per request
    reader.feed(data)                what arrived (b"" is the end of the stream)
    reader.head / body / complete    what is known so far
    reader.reusable                  may the connection carry another request?

Rules (the guarantees h11 gave the client, kept; bench/HISTORY.md says why llhttp):
- Strict framing: llhttp in its strict mode (no leniency switched on) frames the body by
  ``Content-Length``, ``chunked`` or the end of the stream; on top of it a
  ``Transfer-Encoding`` other than exactly one ``chunked`` is refused, as h11 refuses it.
  Anything malformed is :class:`ResponseError`, and so is a response cut short by the end
  of the stream (only a body framed by that end ends there).
- Bounded: the status line and header fields (trailers included) at most
  :data:`MAX_HEAD_BYTES`, whatever the packets; and at most :data:`MAX_HEAD_BYTES` of
  bytes that are not body arrive in a row (the head, chunk framing, trailers, interim
  responses) — h11's receive-buffer limit.
- Interim (1xx) responses are skipped; a ``101`` is an error (nothing asked to switch).
- Reuse only when nothing can be left over: the final response read to its end, HTTP/1.1,
  no ``Connection: close``, framed by its headers (not by the end of the stream), and no
  response bytes beyond it. llhttp skips stray CR/LF between responses (they cannot start
  one, so they cannot be mistaken for the next answer); any other byte beyond disqualifies.
- The request is always a POST, never HEAD, so a body is framed by the headers alone.
- Header names are lower-cased, values stripped of surrounding blanks (as h11 gave them);
  trailers are parsed and checked, then dropped.
"""

from __future__ import annotations

import httptools

MAX_HEAD_BYTES = 16 * 1024  # h11's default max_incomplete_event_size


class ResponseError(Exception):
    """The bytes received are not a well-formed response (the message says how)."""


class _Beyond(Exception):
    """Raised inside the parser when a second response starts: it stops llhttp there."""


_NO_ANSWER = "the server closed the connection without answering"


class ResponseReader:
    """Mutable on purpose: one response as it arrives (see the module rules)."""

    __slots__ = (
        "_beyond", "_framed", "_head_bytes", "_keep_alive", "_parser", "_received",
        "_run", "body", "complete", "head", "headers", "status",
    )  # fmt: skip

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.head = False  # the final response's head has been read
        self.body = bytearray()
        self.complete = False  # the final response has been read to its end
        self._head_bytes = 0
        self._framed = False  # Content-Length or chunked (not the end of the stream)
        self._keep_alive = False
        self._beyond = False  # bytes of another response followed this one
        self._received = False  # any byte at all
        self._run = 0  # bytes that were not body, in a row

    @property
    def reusable(self) -> bool:
        return self.complete and self._keep_alive and self._framed and not self._beyond

    def feed(self, data: bytes) -> None:
        """Parse what arrived; ``b""`` is the end of the stream. Raises ResponseError."""
        if not data:
            self._end()
            return
        self._received = True
        body_before = len(self.body)
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if self.complete:  # a second response, or data after Connection: close
                self._beyond = True
                return
            raise ResponseError(_cause(exc)) from None
        if self.complete:
            return
        self._run = 0 if len(self.body) > body_before else self._run + len(data)
        if self._run > MAX_HEAD_BYTES:
            raise ResponseError(f"more than {MAX_HEAD_BYTES} bytes of head or framing")

    def _end(self) -> None:
        if self.complete:
            return
        if not self._received:
            raise ResponseError(_NO_ANSWER)
        if self.head and not self._framed:
            self.complete = True  # the body is framed by the end of the stream
            return
        raise ResponseError(
            "the server closed the connection mid-response"
            if self.head
            else "the server closed the connection in the middle of the response head"
        )

    # --- llhttp callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            raise _Beyond
        self._head_bytes = 0
        self.headers = []

    def on_status(self, status: bytes) -> None:
        self._count(len(status))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        if not self.head:
            self.headers.append((name.lower(), value.strip(b" \t")))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            return  # interim: the final response follows
        self.status, self.head = status, True
        self._framed = _framed(self.headers) or status in (204, 304)
        self._keep_alive = self._parser.get_http_version() == "1.1" and not any(
            name == b"connection" and b"close" in _tokens(value) for name, value in self.headers
        )

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        if self.head:
            self._keep_alive = self._keep_alive and self._parser.should_keep_alive()
            self.complete = True

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            raise ResponseError(f"a response head of more than {MAX_HEAD_BYTES} bytes")


def _framed(headers: list[tuple[bytes, bytes]]) -> bool:
    """True if the headers frame the body (llhttp checked Content-Length already); refuses
    a transfer coding other than one ``chunked``, as h11 does."""
    codings = [value for name, value in headers if name == b"transfer-encoding"]
    if codings and (len(codings) > 1 or codings[0].lower() != b"chunked"):
        raise ResponseError("only Transfer-Encoding: chunked is supported")
    return bool(codings) or any(name == b"content-length" for name, _ in headers)


def _tokens(value: bytes) -> list[bytes]:
    return [token.strip(b" \t").lower() for token in value.split(b",")]


def _cause(exc: Exception) -> str:
    """The message of an error raised in a callback, else llhttp's own."""
    if isinstance(exc, httptools.HttpParserUpgrade):
        return "the server switched protocols (101), which no request asks for"
    context = exc.__context__
    if isinstance(context, ResponseError):
        return str(context)
    return f"malformed response: {exc}"
