-- Suspending a tenant (docs/operations.md, "Suspending a tenant"): while suspended_at is
-- set its keys answer 403, its users cannot sign in, and its schedules plan nothing.
-- And when the running appliance last checked the database file (PRAGMA quick_check at
-- boot), for the operator's health figures (/admin/health, /metrics, steeple status).
ALTER TABLE tenants ADD COLUMN suspended_at INTEGER;
ALTER TABLE incarnations ADD COLUMN checked_at INTEGER;

-- A tenant's finished runs by state and time: the dashboard's "delivered / failed in the
-- last 24 h", the operator's tenant list and the health page's rates count index entries
-- only (docs/performance.md, "Web UI pages"). Without it the dashboard read a table row
-- per run the tenant ever finished (0.7 s at 1M runs). The expression and the condition
-- match store/overview.py's and store/figures.py's queries exactly.
CREATE INDEX job_runs_tenant_finished ON job_runs(tenant_id, state, COALESCE(finished_at, updated_at))
    WHERE state IN ('cancelled', 'failed', 'missed', 'succeeded');
