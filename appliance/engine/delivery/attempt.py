"""One delivery attempt as the dispatcher records it: an answer or a failure, timed.

:func:`send` is where :class:`~appliance.engine.delivery.exchange.DeliveryFailed` stops: it
never raises for a transport problem, and cancellation (the attempt's deadline, owned by
the caller) is never caught.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.core.retry import TransportFailure
from appliance.engine.delivery.exchange import DeliveryFailed, Exchange


@dataclass(frozen=True, slots=True, kw_only=True)
class SendResult:
    """What one attempt saw: a status (any, 3xx included) or a transport failure."""

    status: int | None
    retry_after: str | None
    location: str | None
    excerpt: str
    failure: TransportFailure | None
    error: str | None
    latency_ms: int

    def error_text(self) -> str | None:
        """What to record as the attempt's error: the failure, or a redirect not followed."""
        if self.error is not None:
            return self.error
        if self.status is not None and 300 <= self.status <= 399:
            return f"redirect to {self.location or '(no Location)'} not followed"
        return None

    @classmethod
    def failed(cls, error: str, *, started: float, failure: TransportFailure | None) -> SendResult:
        """No response: a transport failure, or an attempt Steeple cut short or broke.
        ``started`` is the attempt's trio start time."""
        return cls(
            status=None,
            retry_after=None,
            location=None,
            excerpt="",
            failure=failure,
            error=error,
            latency_ms=_elapsed_ms(started),
        )


async def send(exchange: Exchange, request: DeliveryRequest) -> SendResult:
    """Send ``request`` once. Never raises for transport problems; cancellation propagates."""
    started = trio.current_time()
    try:
        answer = await exchange.exchange(request)
    except DeliveryFailed as exc:
        return SendResult.failed(exc.message, started=started, failure=exc.failure)
    return SendResult(
        status=answer.status,
        retry_after=answer.header(b"retry-after"),
        location=answer.header(b"location"),
        excerpt=answer.excerpt.decode("utf-8", errors="replace"),
        failure=None,
        error=answer.error,
        latency_ms=_elapsed_ms(started),
    )


def probe_answer(result: SendResult) -> ProbeAnswer:
    """What a dedupe test's request got (:mod:`appliance.core.dedupe_test`)."""
    return ProbeAnswer(
        status=result.status,
        excerpt=result.excerpt,
        error=result.error,
        latency_ms=result.latency_ms,
    )


def _elapsed_ms(started: float) -> int:
    return round((trio.current_time() - started) * 1000)
