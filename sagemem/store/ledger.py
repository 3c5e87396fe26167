"""The access ledger: when each memory was last used, and how often, by kind of use.

Three kinds are kept apart, because only two of them are evidence that a memory helped:

* `injected`: `inject` put it into a prompt (the agent may have ignored it);
* `read`: someone opened it on purpose (`sagemem read`, the MCP tool, the agent's file tool);
* `cited`: the agent reported that it used the memory in an answer (`sagemem cite`), once
  per receipt id however often the same receipt is sent.

The ledger is `<state>/access.json`, changed only under its lock (read, merge, atomic
replace), so writers in several processes never lose each other's events. It is never
written into memory files, so using a memory never changes its bytes or its mtime.

A state directory may come with a clone, so the ledger is read by its shape: an entry of the
wrong shape reads as no use of that memory, a ledger that cannot be read at all as no use of
any. Reading changes nothing. The next write first sets the damaged file aside, whole, under a
name of its own (`access.json.damaged-<UTC time>`), then writes the ledger anew from its sound
entries: counting goes on, no sound entry is lost, and the bytes sagemem could not read are
still there to look at. The receipts are checked only when a citation looks one up: the
prompt hook, which counts injections on every prompt, carries them over as they are.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

from . import records, shape
from .errors import SagememError, SagememWarning
from .files import safe_folder, write_atomic
from .locking import exclusive
from .names import is_stored_name
from .records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

KINDS = ("injected", "read", "cited")
MAX_RECEIPTS = 10_000
LOCK_TIMEOUT = 10.0
MAX_LEDGER_BYTES = 16 * 1024 * 1024
_ASIDE = "sets the ledger aside (access.json.damaged-<time>) and writes it anew without that part"
_EFFECT = f"what it holds there is not counted, and the next use {_ASIDE}"
_RECEIPT_EFFECT = f"that citation is not known as counted, and the next citation {_ASIDE}"
# The ledger as `record` writes it: {"files": {file: {kind: use}}, "receipts": {id: receipt}};
# each entry is checked on its own (`_read`).
_LEDGER = shape.obj({}, {"files": shape.an_object, "receipts": shape.an_object})
_USE = shape.obj({"last": shape.nothing_or(shape.moment), "count": shape.count})
_FILE = shape.obj({}, {kind: _USE for kind in KINDS})
_RECEIPT = shape.obj({"at": shape.moment, "files": shape.each(shape.text)})


class Use(records.Record):
    """One kind of use of one memory: when last (epoch seconds) and how many times."""

    last: float | None = None
    count: int = 0


class Record(records.Record):
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


def _name(value: str) -> str:
    """A key of the ledger: a name a memory file had (the path rule alone: a name that the
    secret rule, written since, would refuse still counts)."""
    return "" if is_stored_name(value) else "is not a memory file name"


def path_for(state_dir: Path) -> Path:
    return state_dir / "access.json"


def load(state_dir: Path) -> dict[str, Record]:
    """Every memory's record; a missing or damaged ledger reads as empty, and a damaged
    entry as no use of that memory (`problems` says what is wrong)."""
    files = _read(path_for(state_dir), state_dir, receipts=False)[0]["files"]
    return {name: _record(name, fields) for name, fields in files.items()}


def problems(state_dir: Path) -> list[tuple[Path, str]]:
    """(path, what is wrong) for a ledger damaged in whole or in part, and what the next write
    does about it."""
    path = path_for(state_dir)
    _, wrong, receipts = _read(path, state_dir, receipts=True)
    if wrong:
        return [(path, f"{_first(wrong + receipts)}; {_EFFECT}")]
    return [(path, f"{_first(receipts)}; {_RECEIPT_EFFECT}")] if receipts else []


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
        data, wrong, wrong_receipts = _read(path, state_dir, receipts=receipt is not None)
        if wrong or wrong_receipts:
            _set_aside(path, _first(wrong + wrong_receipts))
        receipts: dict[str, Any] = data["receipts"]
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
        table: dict[str, Any] = data["files"]
        for name in names:
            use = table.setdefault(name, {}).setdefault(kind, {"last": None, "count": 0})
            use["last"] = max(stamp, use["last"] or 0)
            use["count"] += 1
        if live is not None:
            keep = set(live())
            for name in [n for n in table if n not in keep]:
                del table[name]
        write_atomic(path, _dumped(data))
    return names


def _set_aside(path: Path, why: str) -> None:
    """The damaged ledger moved aside before the sound part is written in its place; one that
    cannot be moved costs a warning, and the counting goes on."""
    failed = shape.make_way(path)
    if failed:
        warnings.warn(SagememWarning(f"{path}: {why}; {failed}"), stacklevel=3)


def _dumped(data: dict[str, Any]) -> bytes:
    """The ledger as written: UTF-8 JSON; ASCII escapes when a string carried over unchecked (a
    receipt, a newer sagemem's key) holds a lone surrogate, which JSON may spell but UTF-8 cannot."""
    text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(data, ensure_ascii=True, indent=1, sort_keys=True) + "\n").encode("ascii")


def _read(path: Path, state_dir: Path, *, receipts: bool) -> tuple[dict[str, Any], list[str], list[str]]:
    """The ledger's data, with `files` and `receipts` always there and every file's entry of
    the right shape, what is wrong with the file or its entries, and what with its receipts.
    A ledger that cannot be read at all (a link, a FIFO, too large, not JSON) reads as empty; a
    damaged entry is left out, the others kept. The receipts are checked (and the damaged
    ones left out) with `receipts`, or when something else is wrong: a ledger written anew is
    sound throughout. Otherwise they are kept as found, for a citation to check."""
    data: dict[str, Any] = {"files": {}, "receipts": {}}
    try:
        found = shape.load(path, MAX_LEDGER_BYTES, _LEDGER, under=state_dir)
    except shape.Damaged as exc:
        return data, [exc.why], []
    if found is None:
        return data, [], []
    data.update({k: v for k, v in found.items() if k not in data})  # a newer sagemem's, kept
    data["files"], wrong = shape.sift(found.get("files", {}), _FILE, key=_name, where="files")
    wrong_receipts: list[str] = []
    data["receipts"] = found.get("receipts", {})
    if receipts or wrong:
        data["receipts"], wrong_receipts = shape.sift(data["receipts"], _RECEIPT, where="receipts")
    return data, wrong, wrong_receipts


def _first(wrong: list[str]) -> str:
    return wrong[0] + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else "")


def _record(name: str, fields: dict[str, Any]) -> Record:
    """A memory's record from an entry `_FILE` has checked."""

    def use(kind: str) -> Use:
        found = fields.get(kind)
        if found is None:
            return Use()
        return Use(None if found["last"] is None else float(found["last"]), found["count"])

    return Record(name, use("injected"), use("read"), use("cited"))
