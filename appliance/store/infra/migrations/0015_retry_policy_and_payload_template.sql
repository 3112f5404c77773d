-- Retry policy per schedule and payload templates (docs/schedules.md).
-- `retry_policy`: the schedule's `retry` object without `max_attempts` (its own column
-- since 0001), compact JSON; NULL when the rest is ADR 0032's default (backoff "default",
-- max_age_seconds 604800, every status retried), which every existing schedule keeps.
-- `templated`: 1 when `body` is a `payload_template` (payload_kind 'json'), rendered for
-- each run when it is materialised; the run's rendered bytes go to `bodies` as any body.

ALTER TABLE schedules ADD COLUMN retry_policy TEXT;
ALTER TABLE schedules ADD COLUMN templated INTEGER NOT NULL DEFAULT 0
    CHECK (templated IN (0, 1) AND (templated = 0 OR payload_kind = 'json'));
