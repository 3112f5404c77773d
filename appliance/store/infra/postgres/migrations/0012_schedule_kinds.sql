-- Schedule kinds and bounds (docs/schedules.md): a schedule fires by a cron expression
-- (`cron`, as before), once (`at`) or every `every_seconds` from the anchor `start_at`;
-- `start_at`/`end_at` bound every kind. Instants are epoch ms UTC, whole seconds.
-- A schedule of another kind keeps `cron` = '' (the column stays NOT NULL). `overlap`
-- says what an occurrence due while an earlier run is still open becomes.
-- (PostgreSQL twin of appliance/store/infra/migrations/0012_schedule_kinds.sql; rules in 0001.)

ALTER TABLE schedules ADD COLUMN at BIGINT;
ALTER TABLE schedules ADD COLUMN every_seconds BIGINT
    CHECK (every_seconds IS NULL OR every_seconds >= 1);
ALTER TABLE schedules ADD COLUMN start_at BIGINT;
ALTER TABLE schedules ADD COLUMN end_at BIGINT;
ALTER TABLE schedules ADD COLUMN overlap TEXT COLLATE "C" NOT NULL DEFAULT 'allow'
    CHECK (overlap IN ('allow', 'skip', 'buffer_one'));

-- A run of a schedule whose overlap is not `allow` carries it (set at materialisation), so
-- the claim's overlap gate (store/usecases/overlap.py) reads the open runs of such schedules from
-- one small partial index.
ALTER TABLE job_runs ADD COLUMN overlap TEXT COLLATE "C"
    CHECK (overlap IS NULL OR overlap IN ('skip', 'buffer_one'));
CREATE INDEX job_runs_overlap_open ON job_runs(schedule_id, scheduled_for)
    WHERE overlap IS NOT NULL AND state IN ('pending', 'running', 'retry_wait');
