-- Retry policy per schedule and payload templates (docs/schedules.md).
-- `retry_policy`: the schedule's `retry` object without `max_attempts`, compact JSON; NULL
-- when the rest is ADR 0032's default, which every existing schedule keeps.
-- `templated`: 1 when `body` is a `payload_template` (payload_kind 'json'), rendered for
-- each run when it is materialised.
-- (PostgreSQL twin of appliance/store/infra/migrations/0015_retry_policy_and_payload_template.sql;
-- rules in 0001.) The CHECK names two columns, so it is a table constraint here.

ALTER TABLE schedules ADD COLUMN retry_policy TEXT COLLATE "C";
ALTER TABLE schedules ADD COLUMN templated BIGINT NOT NULL DEFAULT 0,
    ADD CHECK (templated IN (0, 1) AND (templated = 0 OR payload_kind = 'json'));
