-- The pruner picks finished runs older than the retention period (store/retention.py's
-- query): the expression and the condition match it exactly, so the planner can use it.
-- (PostgreSQL twin of appliance/store/infra/migrations/0004_finished_index.sql; rules in 0001.)
CREATE INDEX job_runs_finished ON job_runs((COALESCE(finished_at, updated_at)))
    WHERE state IN ('cancelled', 'failed', 'missed', 'succeeded');
