"""The operator's commands beyond tenants and keys: ``init``, ``backup``, ``restore``,
``migrate``, ``doctor``, ``status``, ``healthcheck``, and their guards (docs/operations.md)."""
