-- Fair claims (store/claims.py): the claim walks the tenants with claimable runs and takes
-- each one's earliest due runs, so it needs claimable rows ordered by tenant, then due_at.
-- It replaces job_runs_claimable (due_at alone), which no query reads any more.
-- (PostgreSQL twin of appliance/store/infra/migrations/0005_fair_claims.sql; rules in 0001.)
CREATE INDEX job_runs_claimable_tenant ON job_runs(tenant_id, due_at)
    WHERE state IN ('pending', 'retry_wait');
DROP INDEX job_runs_claimable;
