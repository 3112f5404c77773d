"""Use cases: operations that span several tables' queries inside one transaction the
caller opens (a planner pass, a manual trigger, a resend, a backfill, the overlap gate, a
reclaim). Pure decisions they take live in :mod:`appliance.core`."""
