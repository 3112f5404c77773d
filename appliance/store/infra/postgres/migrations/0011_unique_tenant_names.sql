-- Tenant names are unique, ignoring case (ASCII case, as SQLite's NOCASE: lower() under
-- the column's "C" collation folds A-Z only). A database that already holds duplicates
-- must be refused before this runs, naming them, as the SQLite runner does.
-- (PostgreSQL twin of appliance/store/infra/migrations/0011_unique_tenant_names.sql; rules in 0001.)
CREATE UNIQUE INDEX tenants_name ON tenants(lower(name));
