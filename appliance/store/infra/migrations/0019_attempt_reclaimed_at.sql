-- When a reclaim (boot or reaper) took an attempt back (store/usecases/reclaim.py). An `abandoned`
-- attempt has it equal to `finished_at`; a `stale` one, whose answer came after the
-- reclaim and was refused, keeps it while `finished_at` says when that answer came — both
-- facts stay on the row (docs/reliability.md). NULL for an attempt nothing took back.
ALTER TABLE attempts ADD COLUMN reclaimed_at INTEGER;
UPDATE attempts SET reclaimed_at = finished_at WHERE outcome = 'abandoned';
-- A stale attempt of an older file: its reclaim instant is the first event of its run
-- about that attempt (the reclaim's retrying, failed or cancelled event).
UPDATE attempts SET reclaimed_at = (
    SELECT MIN(e.occurred_at) FROM events e
    WHERE e.schedule_id = (SELECT r.schedule_id FROM job_runs r WHERE r.id = attempts.run_id)
      AND e.run_id = attempts.run_id AND e.type LIKE 'schedule.run.%'
      AND e.occurred_at >= attempts.started_at
      AND json_extract(e.data, '$.attempt') = attempts.attempt
) WHERE outcome = 'stale';
