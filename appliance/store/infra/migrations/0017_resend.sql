-- Resending and reproducing deliveries (docs/receiver.md, "Resend, curl and the dedupe test").
-- A resend with a new key is a copy: its own run row (a manual occurrence, so the unique
-- index still holds one row per second of the schedule), naming the run it copies.
ALTER TABLE job_runs ADD COLUMN resend_of TEXT;  -- run_… copied; NULL for every other run
CREATE INDEX job_runs_resend_of ON job_runs(resend_of) WHERE resend_of IS NOT NULL;
-- The unix second an attempt's request was signed at (X-Signature-Timestamp), so the request
-- can be reproduced as sent; NULL when the attempt never finished (abandoned).
ALTER TABLE attempts ADD COLUMN signed_at INTEGER;
