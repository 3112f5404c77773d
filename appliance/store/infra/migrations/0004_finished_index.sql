-- The pruner picks finished runs older than the retention period. Without this index that
-- query read all of job_runs whenever nothing was old enough (3.8 s at 10M rows, holding
-- the writer). The expression and the condition match store/retention.py's query exactly,
-- so SQLite can use the index for it.
CREATE INDEX job_runs_finished ON job_runs(COALESCE(finished_at, updated_at))
    WHERE state IN ('cancelled', 'failed', 'missed', 'succeeded');
