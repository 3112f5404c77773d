"""Steeple's exception tree: every error Steeple raises on purpose. Classes defined in
another module name it in brackets; a test keeps this drawing and the classes in step.

    SteepleError
     ├── ConfigError            a setting is invalid; names the setting
     ├── ValidationError        tenant input is invalid; carries per-field errors (-> 422)
     ├── FileRefused            a schedules file is unreadable, by line [client.schedules_file]
     ├── NotFound               no such resource for this tenant (-> 404)
     ├── Conflict               the resource's state forbids the change (-> 409)
     │    ├── VersionMismatch   If-Match named another version (-> 412) [store.schedules]
     │    ├── RequestKeyReused  an Idempotency-Key reused with another body [store.request_keys]
     │    ├── ScheduleLimitReached  the tenant has its most schedules (409) [store.schedules]
     │    ├── KeyTaken          another live schedule has the key (409) [store.schedule_keys]
     │    ├── LastWriteKey      revoking it would leave no write key [store.api_keys]
     │    ├── TooManySecrets    a rotation beyond 3 active secrets [store.tenants]
     │    └── LastSecret        expiring it would leave deliveries unsigned [store.tenants]
     ├── IllegalTransition      a run state change the transition table refuses
     ├── StreamLimitReached     too many open live streams (-> 429) [live.limits]
     ├── ClientError            the CLI client got no usable answer [client.http]
     │    └── ApiProblem        the appliance refused: status + RFC 9457 problem [client.http]
     ├── StoreError             the database failed (disk full, I/O, corruption)
     │    ├── DatabaseLocked    another appliance holds the data directory's lock file
     │    └── CommitUnknown     a lost commit PostgreSQL forgot [store.infra.postgres.database]
     └── DeliveryFailed         an attempt got no answer [engine.delivery.exchange]
                                (carries its TransportFailure: blocked, dns, connect, tls …)

Foreign exceptions are translated where they enter: apsw's into ``StoreError`` in
``store.infra.database``, llhttp's (httptools) and trio's stream errors into ``DeliveryFailed`` in
``engine.delivery``, and nowhere else. A failed delivery is an *outcome* of its attempt:
``engine.delivery.send`` is the one place that catches ``DeliveryFailed`` and records its
``core.retry.TransportFailure``.

Outside the tree: ``core.signing.SignatureError`` (a signature header, timestamp or secret
is malformed or does not verify; building a delivery without a secret raises it, and the
dispatcher's per-delivery boundary records that attempt as failed), the tenant helper's
``receiver.VerificationError``, and ``api.problems.Problem`` (an HTTP answer a view
decides, not a failure).
"""

from __future__ import annotations

from dataclasses import dataclass


class SteepleError(Exception):
    """Base of every error Steeple raises on purpose."""


class ConfigError(SteepleError):
    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldError:
    """One problem with one input field. ``field`` is a dotted path (``catchup.policy``);
    ``index``: in a batch, the position of the item whose field it is (``field`` is then
    that item's own path, as a single request would name it)."""

    field: str
    message: str
    index: int | None = None


class ValidationError(SteepleError):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors

    @classmethod
    def single(cls, field: str, message: str) -> ValidationError:
        return cls([FieldError(field=field, message=message)])


class NotFound(SteepleError):
    pass


class Conflict(SteepleError):
    pass


class IllegalTransition(SteepleError):
    pass


class StoreError(SteepleError):
    pass


class DatabaseLocked(StoreError):
    pass
