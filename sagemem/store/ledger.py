"""The access ledger: when each memory was last used, and how often, by kind of use.

Three kinds are kept apart, because only two of them are evidence that a memory helped:

* `injected`: `inject` put it into a prompt (the agent may have ignored it);
* `read`: someone opened it on purpose (`sagemem read`, the MCP tool, the agent's file tool);
* `cited`: the agent reported that it used the memory in an answer (`sagemem cite`), once
  per receipt id however often the same receipt is sent.

The ledger is `<state>/access.json`, changed only under its lock (read, merge, atomic
replace), so writers in several processes never lose each other's events. It is never
written into memory files, so using a memory never changes its bytes or its mtime.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from .errors import SagememError
from .files import read_state, safe_folder, write_atomic
from .locking import exclusive

KINDS = ("injected", "read", "cited")
MAX_RECEIPTS = 10_000
LOCK_TIMEOUT = 10.0
MAX_LEDGER_BYTES = 16 * 1024 * 1024


class Use(NamedTuple):
    """One kind of use of one memory: when last (epoch seconds) and how many times."""

    last: float | None = None
    count: int = 0


class Record(NamedTuple):
    """A memory's uses, each kind on its own."""

    file: str
    injected: Use = Use()
    read: Use = Use()
    cited: Use = Use()

    @property
    def last_used(self) -> float | None:
        """The latest use of any kind."""
        times = [u.last for u in (self.injected, self.read, self.cited) if u.last is not None]
        return max(times) if times else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            **{k: {"last": getattr(self, k).last, "count": getattr(self, k).count} for k in KINDS},
        }


def path_for(state_dir: Path) -> Path:
    return state_dir / "access.json"


def load(state_dir: Path) -> dict[str, Record]:
    """Every memory's record; a missing or damaged ledger reads as empty."""
    data = _read(path_for(state_dir), under=state_dir)
    return {name: _record(name, fields) for name, fields in data.get("files", {}).items()}


def record(
    state_dir: Path,
    kind: str,
    files: Iterable[str],
    *,
    receipt: str | None = None,
    live: Callable[[], Iterable[str]] | None = None,
    now: float | None = None,
) -> list[str]:
    """Count one use of `kind` for each of `files`; returns the files it counted.

    A receipt already seen with the same files counts nothing; with other files it is refused
    (a receipt names one citation). With `live` (giving the names that still exist, archived
    ones included; asked under the lock), records of other names are pruned.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    names = list(dict.fromkeys(files))
    path = path_for(state_dir)
    stamp = time.time() if now is None else now
    with exclusive(safe_folder(state_dir) / "access.lock", LOCK_TIMEOUT):
        data = _read(path, keep_damaged=True)
        receipts: dict[str, Any] = data.setdefault("receipts", {})
        if receipt is not None:
            seen = receipts.get(receipt)
            if seen is not None:
                if sorted(seen.get("files", [])) != sorted(names):
                    raise SagememError(f"receipt {receipt!r} was already used for {', '.join(seen['files'])}")
                return []
            receipts[receipt] = {"at": stamp, "files": sorted(names)}
            if len(receipts) > MAX_RECEIPTS:
                for old in sorted(receipts, key=lambda r: receipts[r]["at"])[: len(receipts) - MAX_RECEIPTS]:
                    del receipts[old]
        table: dict[str, Any] = data.setdefault("files", {})
        for name in names:
            use = table.setdefault(name, {}).setdefault(kind, {"last": None, "count": 0})
            use["last"] = max(stamp, use["last"] or 0)
            use["count"] += 1
        if live is not None:
            keep = set(live())
            for name in [n for n in table if n not in keep]:
                del table[name]
        write_atomic(path, (json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n").encode())
    return names


def _read(path: Path, *, keep_damaged: bool = False, under: Path | None = None) -> dict[str, Any]:
    """The ledger's data; a damaged file (or a link, a FIFO, one too large) reads as empty,
    and before it is replaced (`keep_damaged`) it is moved aside as `access.json.damaged`."""
    try:
        raw = read_state(path, MAX_LEDGER_BYTES, under=under)
        if raw is None:
            return {}
        data = json.loads(raw)
        if isinstance(data, dict):
            return data
    except (OSError, SagememError, ValueError, RecursionError):
        pass
    if keep_damaged and (path.is_symlink() or (path.is_file() and not path.is_symlink())):
        os.replace(path, path.with_name(path.name + ".damaged"))  # a link is moved, never followed
    return {}


def _record(name: str, fields: Any) -> Record:
    def use(kind: str) -> Use:
        raw = fields.get(kind) if isinstance(fields, dict) else None
        if not isinstance(raw, dict):
            return Use()
        last = raw.get("last")
        count = raw.get("count")
        return Use(
            float(last) if isinstance(last, (int, float)) else None,
            int(count) if isinstance(count, int) else 0,
        )

    return Record(name, use("injected"), use("read"), use("cited"))
