-- Invitations of people to a tenant: the user is created when the setup link is used.
-- (PostgreSQL twin of appliance/store/infra/migrations/0022_invitations.sql; rules in 0001.)
CREATE TABLE invitations (
    token_hash  TEXT COLLATE "C" PRIMARY KEY,             -- sha256 hex of the token in the link
    id          TEXT COLLATE "C" NOT NULL UNIQUE,         -- inv_<ulid>
    tenant_id   TEXT COLLATE "C" NOT NULL REFERENCES tenants(id),
    email       TEXT COLLATE "C" NOT NULL,                -- lower-cased
    role        TEXT COLLATE "C" NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
CREATE INDEX invitations_tenant ON invitations(tenant_id, email);
