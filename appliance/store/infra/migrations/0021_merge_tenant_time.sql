-- One index fewer to write for every run the planner inserts (docs/performance.md,
-- "Planner indexes"): job_runs_tenant_time (tenant_id, scheduled_for, id) is merged into
-- job_runs_tenant_state_time (tenant_id, state, scheduled_for, id). A tenant's unfiltered
-- runs list reads one range per state of the latter, merged (store/run_search.py), and
-- the restart tally one range per counted state (store/restarts.py); the query plans in
-- tests/store/test_query_plans.py show both still seek. It cost about a fifth of the
-- WAL written by each planner commit.
DROP INDEX job_runs_tenant_time;
