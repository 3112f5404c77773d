"""Delivery: one request (in the schedule's method) to a tenant's receiver, under the
outbound address policy.

    dispatcher ── send(exchange, request) ──▶ Exchange.exchange(request) -> Answer
                  (attempt.py: SendResult)      raises DeliveryFailed(TransportFailure)
                                                 │
                       production: DeliveryClient (client.py)
                         target.py      URL -> origin, Host, request target (checked once)
                         pool.py        per-origin turns, keep-alive, never resend
                         connection.py  one socket or TLS stream: a request out, its answer in
                         request.py     the request framed and validated (no header injection)
                         response.py    the response parsed (llhttp), judged, reuse decided
                         connect.py     resolve, judge every address, TCP, TLS
                       tests: an in-memory fake of Exchange (tests/engine/fake_exchange.py)

    check.py: the write-time check of a schedule's target_url (API, create and update).

One error type (:class:`DeliveryFailed`), raised where the failure happens with its
``TransportFailure``; one timeout, the attempt's deadline, owned by the caller.
"""

from appliance.engine.delivery.attempt import SendResult, probe_answer, send
from appliance.engine.delivery.check import check_destination
from appliance.engine.delivery.client import DeliveryClient
from appliance.engine.delivery.exchange import EXCERPT_BYTES, Answer, DeliveryFailed, Exchange

__all__ = [
    "EXCERPT_BYTES",
    "Answer",
    "DeliveryClient",
    "DeliveryFailed",
    "Exchange",
    "SendResult",
    "check_destination",
    "probe_answer",
    "send",
]
