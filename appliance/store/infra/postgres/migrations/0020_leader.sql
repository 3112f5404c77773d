-- The replicas' leader (store/leadership.py): one row, held for a term and renewed
-- against the database's clock. An optimisation only, never a guarantee
-- (docs/adr/0044-postgresql-store.md).
-- (PostgreSQL twin of appliance/store/infra/migrations/0020_leader.sql; rules in 0001.)
CREATE TABLE leader (
    id          BIGINT PRIMARY KEY CHECK (id = 1),
    holder      TEXT COLLATE "C" NOT NULL,
    elected_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
