-- A schedule's `key` and its HTTP `method` (docs/schedules.md, "Keys" and "HTTP methods").
-- `key`: the tenant's stable name for it, unique among its live schedules (NULL: none);
-- `method`: what every delivery uses, POST for every existing schedule.
-- (PostgreSQL twin of appliance/store/infra/migrations/0023_key_and_method.sql; rules in 0001.)
ALTER TABLE schedules ADD COLUMN key TEXT COLLATE "C"
    CHECK (key IS NULL OR key ~ '^[a-z0-9][a-z0-9._-]{0,63}$');
ALTER TABLE schedules ADD COLUMN method TEXT COLLATE "C" NOT NULL DEFAULT 'POST'
    CHECK (method IN ('POST', 'PUT', 'PATCH', 'GET', 'DELETE'));
CREATE UNIQUE INDEX schedules_tenant_key ON schedules(tenant_id, key)
    WHERE key IS NOT NULL AND deleted_at IS NULL;
