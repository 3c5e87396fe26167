"""Archive candidates: which memories have been idle long enough to retire, and why.

A policy over what the store records (the memories, the access ledger, the locks); the
archiving itself is the store's (`Directory.archive`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..store.ledger import Record
from ..store.memory import Memory
from ..store.names import name_key


@dataclass(frozen=True)
class Candidate:
    """A memory idle long enough to archive, and why: idle days against its type's threshold,
    counted from `basis` ("last use", "updated:" or "file mtime"), with every kind of use."""

    file: str
    type: str
    idle_days: int
    threshold: int
    basis: str
    uses: Record

    @property
    def reason(self) -> str:
        return f"idle {self.idle_days} days since {self.basis} (threshold {self.threshold} for {self.type})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "type": self.type,
            "idle_days": self.idle_days,
            "threshold": self.threshold,
            "basis": self.basis,
            "reason": self.reason,
            "uses": self.uses.to_dict(),
        }


def idle(
    memories: Iterable[Memory],
    *,
    limits: Mapping[str, int],
    uses: Mapping[str, Record],
    locked: set[str],
    mtime: Callable[[str], float],
    now: float,
) -> list[Candidate]:
    """The memories idle for at least their type's limit in days, most idle first. Types
    without a limit (feedback), baseline and locked memories never are. Idle counts from the
    latest use of any kind, else `updated:`, else the file's mtime."""
    found = []
    for memory in memories:
        kind = memory.type or memory.file.split("_", 1)[0].lower()
        if kind not in limits or memory.baseline or name_key(memory.file) in locked:
            continue
        record = uses.get(memory.file, Record(memory.file))
        since, basis = record.last_used, "last use"
        if since is None and memory.updated:
            since, basis = _epoch(memory.updated), "updated:"
        if since is None:
            since, basis = mtime(memory.file), "file mtime"
        days = max(0, int((now - since) // 86400))
        if days >= limits[kind]:
            found.append(Candidate(memory.file, kind, days, limits[kind], basis, record))
    return sorted(found, key=lambda c: (-c.idle_days, name_key(c.file)))


def _epoch(updated: str) -> float | None:
    try:
        day = (
            dt.datetime.fromisoformat(updated[:19])
            if len(updated) > 10
            else dt.datetime.fromisoformat(updated)
        )
    except ValueError:
        return None
    return day.timestamp()
