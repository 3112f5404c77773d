-- Steeple schema v1 (ADR 0033). Instants are INTEGER epoch ms UTC. STRICT tables.

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,              -- ten_<ulid>
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,              -- key_<ulid>
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    key_hash    TEXT NOT NULL UNIQUE,          -- sha256 hex of the full key; the key is never stored
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;

CREATE TABLE signing_secrets (
    id          TEXT PRIMARY KEY,              -- sec_<ulid>
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    secret      TEXT NOT NULL,                 -- whsec_...; needed in clear to sign
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,                       -- set when superseded by a rotation
    revoked_at  INTEGER
) STRICT;
CREATE INDEX signing_secrets_tenant ON signing_secrets(tenant_id, created_at DESC);

CREATE TABLE schedules (
    id                      TEXT PRIMARY KEY,  -- sch_<ulid>
    tenant_id               TEXT NOT NULL REFERENCES tenants(id),
    name                    TEXT NOT NULL,
    cron                    TEXT NOT NULL,
    timezone                TEXT NOT NULL,
    target_url              TEXT NOT NULL,
    payload_kind            TEXT NOT NULL CHECK (payload_kind IN ('json', 'body')),
    body                    BLOB NOT NULL,
    content_type            TEXT NOT NULL,
    headers                 TEXT NOT NULL,     -- JSON array of [name, value] pairs
    jitter_seconds          INTEGER NOT NULL,
    catchup_policy          TEXT NOT NULL CHECK (catchup_policy IN ('all', 'latest', 'skip')),
    catchup_window_seconds  INTEGER NOT NULL,
    max_attempts            INTEGER NOT NULL,
    timeout_seconds         INTEGER NOT NULL,
    paused                  INTEGER NOT NULL DEFAULT 0,
    next_fire_at            INTEGER,           -- forward-only cursor; NULL = never again
    version                 INTEGER NOT NULL DEFAULT 1,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL,
    deleted_at              INTEGER
) STRICT;
CREATE INDEX schedules_due ON schedules(next_fire_at)
    WHERE paused = 0 AND deleted_at IS NULL AND next_fire_at IS NOT NULL;
CREATE INDEX schedules_tenant ON schedules(tenant_id, id) WHERE deleted_at IS NULL;

-- Body bytes are fixed when a run is materialised (ADR 0032): content-addressed, shared.
CREATE TABLE bodies (
    digest        TEXT PRIMARY KEY,            -- sha256 hex of content_type NUL body
    content_type  TEXT NOT NULL,
    body          BLOB NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE job_runs (
    id                TEXT PRIMARY KEY,        -- run_<derived>, ADR 0037
    tenant_id         TEXT NOT NULL,
    schedule_id       TEXT NOT NULL REFERENCES schedules(id),
    schedule_version  INTEGER NOT NULL,
    scheduled_for     INTEGER NOT NULL,        -- canonical, un-jittered
    idempotency_key   TEXT NOT NULL,
    due_at            INTEGER NOT NULL,        -- when it may next be claimed
    state             TEXT NOT NULL CHECK (state IN
                        ('pending','running','retry_wait','succeeded','failed','missed','cancelled')),
    trigger           TEXT NOT NULL DEFAULT 'schedule' CHECK (trigger IN ('schedule', 'manual')),
    body_digest       TEXT NOT NULL REFERENCES bodies(digest),
    attempt           INTEGER NOT NULL DEFAULT 0,
    lease_owner       TEXT,                    -- incarnation id
    lease_token       TEXT,
    lease_expires_at  INTEGER,
    heartbeat_at      INTEGER,
    last_status       INTEGER,
    last_error        TEXT,
    failure_reason    TEXT,                    -- gone | destination_blocked | exhausted | ...
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    UNIQUE (schedule_id, scheduled_for)
) STRICT;
CREATE INDEX job_runs_claimable ON job_runs(due_at) WHERE state IN ('pending', 'retry_wait');
CREATE INDEX job_runs_leases ON job_runs(lease_expires_at) WHERE state = 'running';
CREATE INDEX job_runs_lease_owner ON job_runs(lease_owner) WHERE state = 'running';

CREATE TABLE attempts (
    run_id            TEXT NOT NULL REFERENCES job_runs(id),
    attempt           INTEGER NOT NULL,
    lease_token       TEXT NOT NULL,
    incarnation_id    TEXT NOT NULL,
    started_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    outcome           TEXT CHECK (outcome IN ('ok','retryable','permanent','abandoned','stale')),
    http_status       INTEGER,
    error             TEXT,
    latency_ms        INTEGER,
    response_excerpt  TEXT,
    PRIMARY KEY (run_id, attempt)
) STRICT, WITHOUT ROWID;

CREATE TABLE events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,         -- evt_<ulid>
    tenant_id    TEXT NOT NULL,
    type         TEXT NOT NULL,
    schedule_id  TEXT,
    run_id       TEXT,
    occurred_at  INTEGER NOT NULL,
    data         TEXT NOT NULL                 -- JSON object
) STRICT;
CREATE INDEX events_tenant ON events(tenant_id, seq);

CREATE TABLE incarnations (
    id          TEXT PRIMARY KEY,              -- inc_<ulid>: one per process start
    pid         INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER
) STRICT;

-- Creates honour an Idempotency-Key request header (docs/architecture.md).
CREATE TABLE request_keys (
    tenant_id      TEXT NOT NULL,
    key            TEXT NOT NULL,
    request_hash   TEXT NOT NULL,
    status         INTEGER NOT NULL,
    response       TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
) STRICT, WITHOUT ROWID;
