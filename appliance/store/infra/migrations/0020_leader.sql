-- The replicas' leader (store/leadership.py): one row, held for a term and renewed
-- against the database's clock. An optimisation only — the planner, reaper and pruner
-- run on the leader alone, instead of on every replica — never a guarantee: correctness
-- holds with two leaders or none (docs/adr/0044-postgresql-store.md). A lone SQLite
-- appliance never writes it.
CREATE TABLE leader (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    holder      TEXT NOT NULL,     -- the incarnation that leads
    elected_at  INTEGER NOT NULL,  -- when its term began (renewals keep it)
    expires_at  INTEGER NOT NULL   -- the term lapses unless renewed before
) STRICT;
