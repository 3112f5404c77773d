-- Tenant names are unique, ignoring case: `steeple tenant create acme` twice made two
-- tenants named acme, and an operator could not tell which one a key belonged to.
-- A database that already holds duplicates is refused before this runs, naming them
-- (appliance/store/infra/migrate.py): nothing is renamed or dropped behind the operator's back.
CREATE UNIQUE INDEX tenants_name ON tenants(name COLLATE NOCASE);
