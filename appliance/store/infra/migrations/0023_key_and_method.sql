-- A schedule's `key` and its HTTP `method` (docs/schedules.md, "Keys" and "HTTP methods").
--
-- `key`: a stable name the tenant chooses (what `steeple apply` matches a file's items
-- by), lower-case letters, digits, '-', '_' and '.', starting with a letter or digit,
-- 1-64 characters; NULL for a schedule without one (every existing schedule). Unique
-- among the tenant's live schedules: a deleted schedule's key is free again, so deleting
-- an item and adding it back under the same key works. The API refuses a taken key with
-- a 409 naming it before this index is reached (appliance/store/schedule_keys.py); the
-- index is the guarantee.
--
-- `method`: the HTTP method every delivery of the schedule uses. POST is what every
-- existing schedule did; GET and DELETE carry no body (their `body` is empty).
ALTER TABLE schedules ADD COLUMN key TEXT
    CHECK (key IS NULL OR (length(key) BETWEEN 1 AND 64 AND key NOT GLOB '*[^a-z0-9._-]*'
                           AND key GLOB '[a-z0-9]*'));
ALTER TABLE schedules ADD COLUMN method TEXT NOT NULL DEFAULT 'POST'
    CHECK (method IN ('POST', 'PUT', 'PATCH', 'GET', 'DELETE'));
CREATE UNIQUE INDEX schedules_tenant_key ON schedules(tenant_id, key)
    WHERE key IS NOT NULL AND deleted_at IS NULL;
