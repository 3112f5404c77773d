-- job_runs_tenant_time merged into job_runs_tenant_state_time: one index fewer to write
-- for every run inserted (store/run_search.py and store/restarts.py read the latter).
-- (PostgreSQL twin of appliance/store/infra/migrations/0021_merge_tenant_time.sql; rules in 0001.)
DROP INDEX job_runs_tenant_time;
