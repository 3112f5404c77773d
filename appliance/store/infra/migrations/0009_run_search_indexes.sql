-- A tenant's runs across all its schedules, newest first (GET /v1/runs, the dead-letter
-- view; POST /v1/runs/replay with a filter). Each page is a bounded range of one of these
-- in (scheduled_for, id) order, one range per state asked for, merged (store/run_search.py,
-- tests/store/test_query_plans.py checks the plans). A schedule_id filter reads the unique
-- (schedule_id, scheduled_for) index instead.
CREATE INDEX job_runs_tenant_time ON job_runs(tenant_id, scheduled_for, id);
CREATE INDEX job_runs_tenant_state_time ON job_runs(tenant_id, state, scheduled_for, id);
