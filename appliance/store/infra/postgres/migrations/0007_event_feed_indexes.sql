-- The event feed filters by type and by schedule (GET /v1/events?type=…&schedule_id=…):
-- these keep each filtered page a bounded index range, in seq order (store/events.py).
-- (PostgreSQL twin of appliance/store/infra/migrations/0007_event_feed_indexes.sql; rules in 0001.)
CREATE INDEX events_tenant_type ON events(tenant_id, type, seq);
CREATE INDEX events_schedule ON events(schedule_id, seq) WHERE schedule_id IS NOT NULL;
