-- The event feed filters by type and by schedule (GET /v1/events?type=…&schedule_id=…).
-- With only events_tenant(tenant_id, seq), a filter that matches little (a type the tenant
-- never had) scans every event of the tenant after the cursor. These keep each filtered
-- page a bounded index range, in seq order (store/events.py, test_event_feed_plans).
CREATE INDEX events_tenant_type ON events(tenant_id, type, seq);
CREATE INDEX events_schedule ON events(schedule_id, seq) WHERE schedule_id IS NOT NULL;
