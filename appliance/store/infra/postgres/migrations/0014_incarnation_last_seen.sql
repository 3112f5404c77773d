-- When each process was last seen alive (docs/operations.md, "Restarts and downtime"): the
-- running appliance marks its incarnation every few seconds, so the next start knows when
-- one that died without a clean end stopped, and reports the downtime.
-- (PostgreSQL twin of appliance/store/infra/migrations/0014_incarnation_last_seen.sql; rules in 0001.)

ALTER TABLE incarnations ADD COLUMN last_seen_at BIGINT;
