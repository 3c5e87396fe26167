"""The access ledger: when each memory was last used, and how often, by kind of use.

Three kinds are kept apart, because only two of them are evidence that a memory helped:

* `injected`: `inject` put it into a prompt (the agent may have ignored it);
* `read`: someone opened it on purpose (`sagemem read`, the MCP tool, the agent's file tool);
* `cited`: the agent reported that it used the memory in an answer (`sagemem cite`), once
  per receipt id however often the same receipt is sent.

The ledger is `<state>/access.json`, changed only under its lock (read, merge, atomic
replace), so writers in several processes never lose each other's events. It is never
written into memory files, so using a memory never changes its bytes or its mtime.

The hooks count a use on every prompt and every file the agent reads, and a rewrite of the
whole ledger grows with it (18 ms at 1,000 memories used, 180 ms at 10,000). So they append
one line to `<state>/access.log` instead, under a shared lock on that file, and the next
writer past `FOLD_AT` bytes (or any use counted under the ledger's lock: a citation, a
`sagemem read`) folds the log in: it renames the log, waits for the appenders that still
hold it (an exclusive lock on the renamed file), merges its lines and replaces the ledger,
and only then removes the renamed file. An appender that finds its file removed meanwhile
opens the new one. Readers merge the ledger and the log. A crash between the ledger's
replacement and the removal counts that log's uses twice at the next fold: an event counted
twice is a smaller harm than one lost.

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
import os
import stat
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

from . import forms, records, shape
from .errors import SagememError, SagememWarning
from .files import read_state, safe_folder, write_atomic
from .locking import FLOCK, exclusive, hold
from .names import is_stored_name
from .records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from .forms import LogLineForm

KINDS = ("injected", "read", "cited")
MAX_RECEIPTS = 10_000
LOCK_TIMEOUT = 10.0
MAX_LEDGER_BYTES = 16 * 1024 * 1024
LOG = "access.log"
MAX_LOG_BYTES = MAX_LEDGER_BYTES
FOLDING = "access.log.folding"  # the log being folded in (left behind only by a crash)
FOLD_AT = 64 * 1024  # bytes of log (about 600 prompts) after which the writer folds it in
APPENDED = ("injected", "read")  # the kinds a hook counts by a line in the log
_NO_LINK_NO_WAIT = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_O_READ = os.O_RDONLY | _NO_LINK_NO_WAIT
_O_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_LINK_NO_WAIT
_ASIDE = "sets it aside (access.json.damaged-<time>) and writes it anew without that part"
# The next write: a read or citation counted under the lock, or the hooks' log folded in.
_EFFECT = f"what it holds there is not counted, and the next write of the ledger {_ASIDE}"
_LOG_EFFECT = "what it holds there is not counted, and the next fold sets it aside (<name>.damaged-<time>)"
_RECEIPT_EFFECT = f"that citation is not known as counted, and the next citation {_ASIDE}"
# The ledger as `record` writes it (`forms.LedgerForm`): {"format": 1, "files": {file: {kind:
# use}}, "receipts": {id: receipt}}; each entry is checked on its own (`_read`). A ledger of
# another format is set aside, as a damaged one is.
_LEDGER = shape.obj(
    {}, {"format": shape.one_of(forms.LEDGER), "files": shape.an_object, "receipts": shape.an_object}
)
_USE = shape.obj({"last": shape.nothing_or(shape.moment), "count": shape.count})
_FILE = shape.obj({}, {kind: _USE for kind in KINDS})
_RECEIPT = shape.obj({"at": shape.moment, "files": shape.each(shape.text)})
_LINE = shape.obj({"kind": shape.one_of(*APPENDED), "at": shape.moment, "files": shape.each(shape.text)})


class Use(records.Record):
    """One kind of use of one memory: when last (epoch seconds) and how many times."""

    last: float | None = None
    count: int = 0  # type: ignore[assignment]  # a field named as tuple's method, which it hides


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
    """Every memory's record, the log's uses counted in; a missing or damaged ledger reads
    as empty, and a damaged entry or line as no use (`problems` says what is wrong)."""
    files = _read(path_for(state_dir), state_dir, receipts=False)[0]["files"]
    for name in (FOLDING, LOG):
        _count(files, _logged(state_dir / name, state_dir)[0])
    return {name: _record(name, fields) for name, fields in files.items()}


def problems(state_dir: Path) -> list[tuple[Path, str]]:
    """(path, what is wrong) for a ledger or log damaged in whole or in part, and what the
    next write does about it."""
    path = path_for(state_dir)
    found = []
    _, wrong, receipts = _read(path, state_dir, receipts=True)
    if wrong:
        found.append((path, f"{_first(wrong + receipts)}; {_EFFECT}"))
    elif receipts:
        found.append((path, f"{_first(receipts)}; {_RECEIPT_EFFECT}"))
    for name in (FOLDING, LOG):
        wrong = _logged(state_dir / name, state_dir)[1]
        if wrong:
            found.append((state_dir / name, f"{_first(wrong)}; {_LOG_EFFECT}"))
    return found


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
    stamp = time.time() if now is None else now
    if kind in APPENDED and receipt is None and live is None:
        size = _append(state_dir, {"kind": kind, "at": stamp, "files": names})
        if size is not None:
            if size >= FOLD_AT:
                try:
                    _rewrite(state_dir, timeout=0.0)
                except (SagememError, OSError):  # the use is in the log; the next one tries again
                    pass  # (held by another writer, which folds it in, or damaged: `problems` says)
            return names
    return _rewrite(state_dir, kind, names, stamp, receipt=receipt, live=live)


def _rewrite(
    state_dir: Path,
    kind: str = "",
    names: list[str] | None = None,
    stamp: float = 0.0,
    *,
    receipt: str | None = None,
    live: Callable[[], Iterable[str]] | None = None,
    timeout: float = LOCK_TIMEOUT,
) -> list[str]:
    """The ledger read, the log folded in, `names` counted (none: a fold alone) and written
    back, under the ledger's lock."""
    names = names or []
    path = path_for(state_dir)
    with exclusive(safe_folder(state_dir) / "access.lock", timeout):
        data, wrong, wrong_receipts = _read(path, state_dir, receipts=receipt is not None)
        anew = bool(wrong or wrong_receipts)
        if anew:
            _set_aside(path, _first(wrong + wrong_receipts))
        folding = _take_log(state_dir)
        try:
            counted = _counted(
                state_dir, data, kind, names, stamp, folding, receipt=receipt, live=live, anew=anew
            )
        finally:
            if folding is not None and folding.fd >= 0:
                os.close(folding.fd)  # before the removal: Windows removes no open file
        if folding is not None:
            _folded(state_dir, folding)
        return counted


def _counted(
    state_dir: Path,
    data: dict[str, Any],
    kind: str,
    names: list[str],
    stamp: float,
    folding: _Fold | None,
    *,
    receipt: str | None,
    live: Callable[[], Iterable[str]] | None,
    anew: bool,
) -> list[str]:
    """`data` with the folded log's uses and `names`' counted, written back when anything
    changed or the damaged ledger was set aside (`anew`); the names counted (none for a
    receipt seen before)."""
    refused = None
    receipts: dict[str, Any] = data["receipts"]
    fresh_receipt = receipt is not None and receipt not in receipts
    if receipt is not None:
        seen = receipts.get(receipt)
        if seen is not None:
            if sorted(seen.get("files", [])) != sorted(names):
                refused = SagememError(f"receipt {receipt!r} was already used for {', '.join(seen['files'])}")
            names = []
        else:
            receipts[receipt] = {"at": stamp, "files": sorted(names)}
            if len(receipts) > MAX_RECEIPTS:
                for old in sorted(receipts, key=lambda r: receipts[r]["at"])[: len(receipts) - MAX_RECEIPTS]:
                    del receipts[old]
    table: dict[str, Any] = data["files"]
    if folding is not None:
        _count(table, folding.events)
    _count(table, [{"kind": kind, "at": stamp, "files": names}])
    pruned = []
    if live is not None:
        keep = set(live())
        pruned = [n for n in table if n not in keep]
        for name in pruned:
            del table[name]
    if names or folding is not None or anew or pruned or fresh_receipt:
        write_atomic(path_for(state_dir), _dumped(data))
    if refused is not None:
        raise refused
    return names


def _count(table: dict[str, Any], events: Iterable[dict[str, Any]]) -> None:
    for event in events:
        for name in event["files"]:
            use = table.setdefault(name, {}).setdefault(event["kind"], {"last": None, "count": 0})
            use["last"] = max(event["at"], use["last"] or 0)
            use["count"] += 1


class _Fold(records.Record):
    """The log taken in by a fold: its file held open (locked), its uses, what was wrong."""

    fd: int  # -1: not opened
    events: list[dict[str, Any]]
    wrong: list[str]


def _append(state_dir: Path, event: LogLineForm) -> int | None:
    """Append `event` to the log as one line; the log's size after it, or None where it
    cannot be appended to (no `flock`, not a regular file, too large, held too long): the
    locked path then counts the use and sets aside what is in the log's place."""
    if not FLOCK:
        return None
    try:
        line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return None
    path = safe_folder(state_dir) / LOG
    for _ in range(3):
        try:
            fd = os.open(path, _O_APPEND, 0o644)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_LOG_BYTES:
                return None
            if not hold(fd, shared=True, timeout=1.0):
                return None
            if not _still(fd, path):
                continue  # folded in (or set aside) since it was opened: append to the new log
            os.write(fd, line)
            return os.fstat(fd).st_size
        finally:
            os.close(fd)
    return None


def _still(fd: int, path: Path) -> bool:
    """The open file `fd` is still the one at `path` (not renamed, set aside or removed)."""
    held = os.fstat(fd)
    try:
        named = os.lstat(path)
    except OSError:
        return False
    return held.st_nlink > 0 and (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _take_log(state_dir: Path) -> _Fold | None:
    """The log, renamed out of the appenders' way and locked once the last of them is done
    with it (a log a crash left mid-fold is taken first, the current one at the next fold)."""
    folding = state_dir / FOLDING
    if not os.path.lexists(folding):
        try:
            os.rename(state_dir / LOG, folding)
        except OSError:  # none to fold (or none that can be moved: then it stays a log)
            return None
    try:
        fd = os.open(folding, _O_READ)
    except OSError as exc:
        return _Fold(-1, [], ["is a symbolic link" if os.path.islink(folding) else f"cannot be read ({exc})"])
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return _Fold(fd, [], ["is not a regular file"])
    if FLOCK and not hold(fd, shared=False, timeout=1.0):  # an appender holds it for one write
        os.close(fd)  # held longer (a stopped process): its line may yet come; the next fold takes it
        return None
    with open(fd, "rb", closefd=False) as handle:
        raw = handle.read(MAX_LOG_BYTES + 1)
    if len(raw) > MAX_LOG_BYTES:
        return _Fold(fd, [], [f"is larger than {MAX_LOG_BYTES} bytes"])
    return _Fold(fd, *_lines(raw, complete=True))


def _folded(state_dir: Path, fold: _Fold) -> None:
    """The folded log removed, now that the ledger holds its uses; a damaged one set aside."""
    path = state_dir / FOLDING
    if fold.wrong:
        _set_aside(path, _first(fold.wrong))
        if not os.path.lexists(path):
            return
    try:
        os.unlink(path)
    except OSError:
        pass  # counted again at the next fold: twice rather than never


def _logged(path: Path, state_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The uses in a log, read without a lock (a line still being written is not one yet),
    and what is wrong with it."""
    try:
        raw = read_state(path, MAX_LOG_BYTES, under=state_dir)
    except (SagememError, OSError) as exc:
        return [], [str(getattr(exc, "rule", "") or exc)]
    return ([], []) if raw is None else _lines(raw, complete=False)


def _lines(raw: bytes, *, complete: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The events of a log's lines, each checked, and what is wrong with the others. An
    unterminated last line is being written (`complete` False), or was cut short."""
    lines = raw.split(b"\n")
    last = lines.pop()
    if last and complete:
        lines.append(last)
    events, wrong = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            wrong.append(f"line {number} is not a JSON line sagemem wrote")
            continue
        why = shape.problem(value, _LINE) or next(filter(None, map(_name, value["files"])), "")
        if why:
            wrong.append(f"line {number}: {why}")
            continue
        events.append(value)
    return events, wrong


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
    data: dict[str, Any] = {"format": forms.LEDGER, "files": {}, "receipts": {}}
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
