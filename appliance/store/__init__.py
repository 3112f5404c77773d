"""The store: typed functions ``(conn, …, now) -> value`` over the database, written once
for SQLite and PostgreSQL. Query modules here, one per subject (a table or a concern);
:mod:`appliance.store.usecases` for operations spanning several; the databases themselves
in :mod:`appliance.store.infra`."""
