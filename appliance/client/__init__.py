"""The ``steeple`` command's client of a running appliance: it speaks only the published
HTTP API (contracts/openapi/scheduler.yaml), never the database, so it works against a
remote box and PostgreSQL replicas alike. ``http`` is the door, ``profiles`` picks the
appliance and key, the rest are the commands and how they print."""
