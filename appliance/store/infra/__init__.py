"""The store's infrastructure: the databases (SQLite, and PostgreSQL under ``postgres/``),
their connections and dialect, group commit, migrations, snapshots, the data directory's
lock and modes, and the mapping of rows to records. Query modules build on it."""
