-- API keys become tenant-managed: a name, a scope, a display prefix and the time of last
-- use. Keys created before this migration were full-access keys: they become `write`.
-- Older keys have no prefix (NULL).
-- (PostgreSQL twin of appliance/store/infra/migrations/0006_api_key_scopes.sql; rules in 0001.)
ALTER TABLE api_keys ADD COLUMN name TEXT COLLATE "C" NOT NULL DEFAULT 'initial key';
ALTER TABLE api_keys ADD COLUMN scope TEXT COLLATE "C" NOT NULL DEFAULT 'write'
    CHECK (scope IN ('read', 'write'));
ALTER TABLE api_keys ADD COLUMN prefix TEXT COLLATE "C";
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
CREATE INDEX api_keys_tenant ON api_keys(tenant_id, created_at);
