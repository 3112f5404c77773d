-- Suspending a tenant (docs/operations.md, "Suspending a tenant"): while suspended_at is
-- set its keys answer 403, its users cannot sign in, and its schedules plan nothing.
-- And when the running appliance last checked the database file (PRAGMA quick_check at
-- boot), for the operator's health figures (/admin/health, /metrics, steeple status).
ALTER TABLE tenants ADD COLUMN suspended_at INTEGER;
ALTER TABLE incarnations ADD COLUMN checked_at INTEGER;
