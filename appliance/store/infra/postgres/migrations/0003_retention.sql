-- The pruner deletes a body once no run refers to it: that lookup needs this index.
-- (PostgreSQL twin of appliance/store/infra/migrations/0003_retention.sql; rules in 0001.)
CREATE INDEX job_runs_body ON job_runs(body_digest);
