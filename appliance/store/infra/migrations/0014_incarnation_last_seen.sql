-- When each process was last seen alive (docs/operations.md, "Restarts and downtime"): the
-- running appliance marks its incarnation every few seconds, so the next start knows when
-- one that died without a clean end stopped, and reports the downtime.

ALTER TABLE incarnations ADD COLUMN last_seen_at INTEGER;
