"""The downtime report of a restart (docs/operations.md, "Restarts and downtime").

Every start after an earlier one reports how long the appliance was down — from the
previous process's clean end, or its last liveness mark when it died — and what became
of the occurrences that came due meanwhile, per catch-up policy: delivered late (caught
up) or recorded as missed. One ``appliance.restarted`` event carries it
(contracts/events/appliance.restarted.json) and one log line says it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from appliance.core.events import JsonValue
from appliance.core.instants import format_instant
from appliance.core.schedules import CatchupPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class DowntimeReport:
    previous_incarnation: str
    down_since: int  # the previous process's clean end, or its last liveness mark
    restarted_at: int  # when this process started
    clean_shutdown: bool
    restored_at: int | None = None  # ``steeple restore`` put a copy in place before this start
    reclaimed: int  # runs it left in flight, taken back at boot and delivered again
    late: Mapping[CatchupPolicy, int]  # occurrences due while down, delivered after the start
    missed: Mapping[CatchupPolicy, int]  # occurrences due while down, recorded as missed

    @property
    def downtime_ms(self) -> int:
        return max(0, self.restarted_at - self.down_since)

    @property
    def total_late(self) -> int:
        return sum(self.late.values())

    @property
    def total_missed(self) -> int:
        return sum(self.missed.values())

    def event_data(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = {
            "previous_incarnation": self.previous_incarnation,
            "down_since": format_instant(self.down_since),
            "downtime_ms": self.downtime_ms,
            "clean_shutdown": self.clean_shutdown,
            "restored_at": None if self.restored_at is None else format_instant(self.restored_at),
            "reclaimed": self.reclaimed,
            "late": self.total_late,
            "missed": self.total_missed,
        }
        for policy in CatchupPolicy:
            data[f"late_{policy}"] = self.late.get(policy, 0)
            data[f"missed_{policy}"] = self.missed.get(policy, 0)
        return data

    def summary(self) -> str:
        """The log line. After a restore, "down since" is the copy's own last record (its
        previous process was running when the copy was taken), not a crash."""
        if self.restored_at is not None:
            how = f"from a copy restored at {format_instant(self.restored_at)}"
            since = f"since {format_instant(self.down_since)}, the copy's last record"
        else:
            how = "after a clean stop" if self.clean_shutdown else "after the process died"
            since = f"since {format_instant(self.down_since)}"
        return (
            f"restarted {how}: down {format_duration(self.downtime_ms)} ({since});"
            f" {self.total_late} occurrences due meanwhile"
            f" delivered late ({_by_policy(self.late)}), {self.total_missed} recorded as"
            f" missed ({_by_policy(self.missed)}); {self.reclaimed} runs in flight taken back"
        )


def _by_policy(counts: Mapping[CatchupPolicy, int]) -> str:
    return ", ".join(f"{policy} {counts.get(policy, 0)}" for policy in CatchupPolicy)


def format_duration(ms: int) -> str:
    """``1h 02m 03s``, ``4m 05s``, ``6.7s``."""
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    seconds = ms // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"
