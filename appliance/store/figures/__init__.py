"""The numbers: every figure Steeple reports is computed here, once, in the module of its
readers (docs/operations.md, "What to monitor"):

- :mod:`~appliance.store.figures.operator` — the operator's health figures: the queue
  and the planner's lag (:func:`~appliance.store.figures.operator.health`), recent rates
  and lateness, sizes, the last check and backup
  (:func:`~appliance.store.figures.operator.operator_figures`), which ``/admin/health``,
  the gauges of ``GET /metrics`` and ``steeple status`` all show; and the active
  schedules by target the boot-time destination audit reads.
- :mod:`~appliance.store.figures.counters` — what ``GET /metrics`` counts from the event
  log since its previous scrape (deliveries by outcome, misses and failures by reason,
  clock jumps, the lateness histogram).
- :mod:`~appliance.store.figures.tenants` — one tenant's counts: the dashboard's, and
  each line of the operator's tenant list (``/admin/tenants``).
- :mod:`~appliance.store.figures.database` — the database engine's own facts
  (``steeple doctor``, the ``/metrics`` info): its version, journal mode, quick check.
- :mod:`~appliance.store.figures.basis` — what several of them are computed from, so
  each rule is written once: finished runs by when they ended, a first attempt's
  lateness, how many occurrences an event stands for.

The lists pages show (schedules due next, a filtered page of schedules, runs needing
attention, the feed) are not figures: :mod:`appliance.store.overview`.
"""
