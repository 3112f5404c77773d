-- A replay reopens a finished run with a fresh attempt budget and retry window (ADR 0033):
-- attempts keep their numbers (X-Attempt, attempts PK), the budget counts from the replay.
-- (PostgreSQL twin of appliance/store/infra/migrations/0002_replay_budget.sql; rules in 0001.)
ALTER TABLE job_runs ADD COLUMN attempt_base BIGINT NOT NULL DEFAULT 0;  -- attempts before the last replay
ALTER TABLE job_runs ADD COLUMN budget_from BIGINT;  -- retry window start; NULL = scheduled_for
