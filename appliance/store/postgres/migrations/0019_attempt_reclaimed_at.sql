-- When a reclaim (boot or reaper) took an attempt back (store/reclaim.py). An `abandoned`
-- attempt has it equal to `finished_at`; a `stale` one keeps it while `finished_at` says
-- when its refused answer came (docs/reliability.md). NULL for an attempt nothing took back.
-- (PostgreSQL twin of appliance/store/migrations/0019_attempt_reclaimed_at.sql; rules in 0001.)
ALTER TABLE attempts ADD COLUMN reclaimed_at BIGINT;
UPDATE attempts SET reclaimed_at = finished_at WHERE outcome = 'abandoned';
-- A stale attempt of an older database: its reclaim instant is the first event of its run
-- about that attempt (the reclaim's retrying, failed or cancelled event). jsonb equality
-- compares numbers by value, as json_extract(...) = attempt does in SQLite.
UPDATE attempts SET reclaimed_at = (
    SELECT MIN(e.occurred_at) FROM events e
    WHERE e.schedule_id = (SELECT r.schedule_id FROM job_runs r WHERE r.id = attempts.run_id)
      AND e.run_id = attempts.run_id AND e.type LIKE 'schedule.run.%'
      AND e.occurred_at >= attempts.started_at
      AND (e.data::jsonb -> 'attempt') = to_jsonb(attempts.attempt)
) WHERE outcome = 'stale';
