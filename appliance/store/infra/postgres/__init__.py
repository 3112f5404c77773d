"""The PostgreSQL store: the same store functions over a PostgreSQL database, for several
Steeple processes sharing one (docs/adr/0033-claim-queue-scheduling.md: the same tables,
index and state machine; only the claim's locking clause and the source of `now` change).

Its schema is ``migrations/NNNN_name.sql``: one file for each SQLite migration of
``appliance/store/infra/migrations``, with the same number and name, giving the same logical
schema after each version; the translation rules head ``0001_initial.sql``.
"""
