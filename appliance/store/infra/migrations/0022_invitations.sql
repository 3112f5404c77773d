-- Invitations of people to a tenant (docs/ui.md, "People and sign-in"). An owner's or an
-- operator's invitation is this row and nothing else: the user is created only when the
-- setup link is used, and not at all when the email has an account already (the link
-- then fails closed), so inviting answers alike whether or not the email exists elsewhere.
CREATE TABLE invitations (
    token_hash  TEXT PRIMARY KEY,                 -- sha256 hex of the token in the link
    id          TEXT NOT NULL UNIQUE,             -- inv_<ulid>
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    email       TEXT NOT NULL,                    -- lower-cased; not unique: several may wait
    role        TEXT NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
) STRICT;
CREATE INDEX invitations_tenant ON invitations(tenant_id, email);
