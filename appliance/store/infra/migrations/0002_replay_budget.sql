-- A replay reopens a finished run with a fresh attempt budget and retry window (ADR 0033):
-- attempts keep their numbers (X-Attempt, attempts PK), the budget counts from the replay.
ALTER TABLE job_runs ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;  -- attempts before the last replay
ALTER TABLE job_runs ADD COLUMN budget_from INTEGER;  -- retry window start; NULL = scheduled_for
