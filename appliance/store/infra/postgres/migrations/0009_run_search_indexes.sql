-- A tenant's runs across all its schedules, newest first (GET /v1/runs, the dead-letter
-- view; POST /v1/runs/replay with a filter), in (scheduled_for, id) order
-- (store/run_search.py). A schedule_id filter reads the unique (schedule_id, scheduled_for)
-- index instead.
-- (PostgreSQL twin of appliance/store/infra/migrations/0009_run_search_indexes.sql; rules in 0001.)
CREATE INDEX job_runs_tenant_time ON job_runs(tenant_id, scheduled_for, id);
CREATE INDEX job_runs_tenant_state_time ON job_runs(tenant_id, state, scheduled_for, id);
