-- job_runs_lease_owner and job_runs_finished go: their reads walk job_runs_leases (the
-- few running runs) and job_runs_tenant_finished (one range per tenant and state).
-- (PostgreSQL twin of appliance/store/infra/migrations/0024_fewer_run_indexes.sql; rules in 0001.)
DROP INDEX job_runs_lease_owner;
DROP INDEX job_runs_finished;
