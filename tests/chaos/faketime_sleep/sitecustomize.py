"""Imported at start-up by the replicas tests/chaos/test_replicas.py runs under libfaketime
(this directory is put on their ``PYTHONPATH``).

Debian's libfaketime 0.9.10, with the monotonic clock left real (``DONT_FAKE_MONOTONIC``),
fails the ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, …)`` behind CPython's
``time.sleep`` with EINVAL, for any offset; faking the monotonic clock instead makes timed
condition waits (``threading.Event.wait``) never return. So the monotonic clock stays
real, and ``time.sleep`` waits in ``select``, whose relative timeout libfaketime leaves
alone. Nothing else changes: the appliance's own code runs as shipped.
"""

import select
import time


def _sleep(seconds: float) -> None:
    select.select([], [], [], seconds)


time.sleep = _sleep
