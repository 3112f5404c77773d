"""The CLI's error reporting: one line for Steeple's own errors, even from inside the nursery."""

from __future__ import annotations

from appliance.cli import steeple_error_in
from appliance.errors import StoreError


def test_a_steeple_error_from_a_service_is_found_in_the_nursery_group() -> None:
    disk_full = StoreError("the disk is full")
    nested = ExceptionGroup("root", [ExceptionGroup("dispatcher", [disk_full])])
    assert steeple_error_in(nested) is disk_full


def test_other_failures_keep_their_traceback() -> None:
    assert steeple_error_in(ExceptionGroup("root", [StoreError("x"), KeyError("bug")])) is None
    assert steeple_error_in(ExceptionGroup("root", [KeyError("bug")])) is None
