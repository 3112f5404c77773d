-- Fewer index entries written as a run moves pending → running → finished (issue 24,
-- "write less per state change"; bench/HISTORY.md, "Fewer run indexes"):
--
-- job_runs_lease_owner goes: the running runs are few (at most the delivery slots of each
-- process), and the heartbeat's and the boot reclaim's reads by owner walk
-- job_runs_leases, which holds exactly them. A claim and a completion each write one
-- entry fewer.
--
-- job_runs_finished goes: every reader of finished runs by time reads
-- job_runs_tenant_finished (tenant_id, state, COALESCE(finished_at, updated_at)) one
-- range per tenant and state instead — the pruner (store/retention.py), the last run any
-- process finished (store/incarnations.py) and the operator's lateness sample
-- (store/figures/operator.py). A completion writes one entry fewer; the query plans in
-- tests/store/test_query_plans.py show each still seeks.
DROP INDEX job_runs_lease_owner;
DROP INDEX job_runs_finished;
