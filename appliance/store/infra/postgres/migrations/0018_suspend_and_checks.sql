-- Suspending a tenant (docs/operations.md, "Suspending a tenant"), and when the running
-- appliance last checked its database (for the operator's health figures).
-- (PostgreSQL twin of appliance/store/infra/migrations/0018_suspend_and_checks.sql; rules in 0001.)
ALTER TABLE tenants ADD COLUMN suspended_at BIGINT;
ALTER TABLE incarnations ADD COLUMN checked_at BIGINT;

-- A tenant's finished runs by state and time (docs/performance.md, "Web UI pages"). The
-- expression and the condition match store/overview.py's and store/figures.py's queries.
CREATE INDEX job_runs_tenant_finished ON job_runs(tenant_id, state, (COALESCE(finished_at, updated_at)))
    WHERE state IN ('cancelled', 'failed', 'missed', 'succeeded');
