-- API keys become tenant-managed: a name, a scope, a display prefix and the time of last
-- use. Keys created before this migration were full-access keys: they become `write`.
-- The prefix (`stk_` + 4 characters) identifies a key in lists without revealing it:
-- 4 of its 32 random characters leave 140 bits unknown. Older keys have none (NULL).
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT 'initial key';
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'write'
    CHECK (scope IN ('read', 'write'));
ALTER TABLE api_keys ADD COLUMN prefix TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
CREATE INDEX api_keys_tenant ON api_keys(tenant_id, created_at);
