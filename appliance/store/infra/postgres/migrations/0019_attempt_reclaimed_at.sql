-- When a reclaim (boot or reaper) took an attempt back (store/usecases/reclaim.py). An `abandoned`
-- attempt has it equal to `finished_at`; a `stale` one keeps it while `finished_at` says
-- when its refused answer came (docs/reliability.md). NULL for an attempt nothing took back.
-- (PostgreSQL twin of appliance/store/infra/migrations/0019_attempt_reclaimed_at.sql; rules in 0001.)
ALTER TABLE attempts ADD COLUMN reclaimed_at BIGINT;
UPDATE attempts SET reclaimed_at = finished_at WHERE outcome = 'abandoned';
-- A stale attempt of an older database: its reclaim instant is the first event of its run
-- about that attempt (the reclaim's retrying, failed or cancelled event). SQLite compares
-- json_extract(data, '$.attempt') with the INTEGER column under numeric affinity: a JSON
-- number by value (5.0 is 5), a JSON string when it reads as a number ("3" is 3).
UPDATE attempts SET reclaimed_at = (
    SELECT MIN(e.occurred_at) FROM events e
    WHERE e.schedule_id = (SELECT r.schedule_id FROM job_runs r WHERE r.id = attempts.run_id)
      AND e.run_id = attempts.run_id AND e.type LIKE 'schedule.run.%'
      AND e.occurred_at >= attempts.started_at
      AND CASE jsonb_typeof(e.data::jsonb -> 'attempt')
          WHEN 'number' THEN (e.data::jsonb -> 'attempt') = to_jsonb(attempts.attempt)
          WHEN 'string' THEN CASE
              WHEN (e.data::jsonb ->> 'attempt') ~ '^\s*[-+]?[0-9]+(\.[0-9]*)?\s*$'
              THEN (e.data::jsonb ->> 'attempt')::numeric = attempts.attempt
              ELSE false END
          ELSE false END
) WHERE outcome = 'stale';
