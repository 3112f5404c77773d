-- A cron schedule's daylight-saving policy (ADR 0043, docs/schedules.md "Daylight saving
-- time"): what a wall time inside a spring-forward gap (`dst_gap`) and inside a fall-back
-- fold (`dst_fold`) does. NULL: ADR 0037's rule for the spec's class.
-- (PostgreSQL twin of appliance/store/infra/migrations/0016_dst_policy.sql; rules in 0001.)

ALTER TABLE schedules ADD COLUMN dst_gap TEXT COLLATE "C"
    CHECK (dst_gap IS NULL OR dst_gap IN ('shift', 'skip'));
ALTER TABLE schedules ADD COLUMN dst_fold TEXT COLLATE "C"
    CHECK (dst_fold IS NULL OR dst_fold IN ('first', 'last', 'both'));
