-- People of the web UI (docs/ui.md, "People and sign-in"): users of a tenant with a role,
-- operators (tenant_id NULL is allowed only for them), single-use setup tokens, server-side
-- sessions and the sign-in failures that throttle guessing. Passwords, setup tokens and
-- session ids are stored hashed (argon2id for passwords, sha256 for random tokens).

CREATE TABLE users (
    id             TEXT PRIMARY KEY,              -- usr_<ulid>
    tenant_id      TEXT REFERENCES tenants(id),   -- NULL: an operator without a tenant
    email          TEXT NOT NULL UNIQUE,          -- lower-cased
    role           TEXT NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    operator       INTEGER NOT NULL DEFAULT 0,
    password_hash  TEXT,                          -- argon2id; NULL until set up
    created_at     INTEGER NOT NULL,
    disabled_at    INTEGER,
    CHECK (tenant_id IS NOT NULL OR operator = 1)
) STRICT;
CREATE INDEX users_tenant ON users(tenant_id, email);

CREATE TABLE user_setup_tokens (
    token_hash  TEXT PRIMARY KEY,                 -- sha256 hex of the token in the link
    user_id     TEXT NOT NULL REFERENCES users(id),
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) STRICT;

CREATE TABLE sessions (
    id_hash       TEXT PRIMARY KEY,               -- sha256 hex of the cookie value
    user_id       TEXT NOT NULL REFERENCES users(id),
    csrf_token    TEXT NOT NULL,                  -- the synchronizer token of its forms
    created_at    INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL,
    address       TEXT NOT NULL,
    revoked_at    INTEGER
) STRICT;
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE login_failures (
    id       INTEGER PRIMARY KEY,
    subject  TEXT NOT NULL,                       -- 'email:<address>' or 'addr:<ip>'
    at       INTEGER NOT NULL
) STRICT;
CREATE INDEX login_failures_subject ON login_failures(subject, at);
