-- Failure notifications (docs/receiver.md, "Failure notifications"): a tenant's optional
-- notification URL, and an outbox of deliveries to it. An outbox row is written in the
-- same transaction as the event it carries (store/events.py append_event), so an event the
-- database holds is never without its notification; the notifier claims due rows under a
-- lease (leased_until) and a row whose lease lapsed is claimable again (at-least-once).

CREATE TABLE notification_targets (
    tenant_id   TEXT PRIMARY KEY REFERENCES tenants(id),
    url         TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE notifications (
    id               INTEGER PRIMARY KEY,
    event_seq        INTEGER NOT NULL,        -- events.seq (not a foreign key: retention prunes events)
    tenant_id        TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    url              TEXT NOT NULL,           -- the target when the event was written
    idempotency_key  TEXT NOT NULL,           -- stable per event: every attempt sends it
    body             BLOB NOT NULL,           -- the event envelope JSON, rendered once
    state            TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    due_at           INTEGER NOT NULL,
    leased_until     INTEGER,                 -- a claim's lease; NULL when not claimed
    last_status      INTEGER,
    last_error       TEXT,
    failure_reason   TEXT,
    finished_at      INTEGER,
    UNIQUE (event_seq, url)
) STRICT;
CREATE INDEX notifications_due ON notifications(due_at) WHERE state = 'pending';
CREATE INDEX notifications_finished ON notifications(finished_at) WHERE finished_at IS NOT NULL;
