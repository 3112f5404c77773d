-- Fair claims (store/claims.py): the claim walks the tenants with claimable runs and takes
-- each one's earliest due runs, so it needs claimable rows ordered by tenant, then due_at.
-- The condition matches the claim's literal state list, so SQLite can use the index. It
-- replaces job_runs_claimable (due_at alone), which no query reads any more: every run
-- insert keeps maintaining one claimable index, not two.
CREATE INDEX job_runs_claimable_tenant ON job_runs(tenant_id, due_at)
    WHERE state IN ('pending', 'retry_wait');
DROP INDEX job_runs_claimable;
