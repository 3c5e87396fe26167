"""Version-guarded writes and the conflict queue: the promise that no edit is lost silently.

A write to an existing memory lands only if the file on disk is still the version the writer
based it on; creating lands only if the file does not exist. Check and write happen under a
per-file lock (`locking.exclusive`), so two sagemem processes cannot both pass the check.
The locks live beside the files they guard, in `<memory dir>/.sagemem/locks/`, not in the
state dir: two processes that were given different state dirs still exclude each other. A
refused write is not thrown away: it is recorded in `<state>/conflicts/<id>.json` with the
bytes on disk and the bytes proposed, for a person to decide. The id is derived from (file,
expected version, proposed bytes), so the same refused write reported twice is one record.
Where the state dir cannot be written (read-only, full, a refused link) the record goes to
its fallback in the temp dir, and the queue is read from both; a refusal whose record
cannot be written anywhere is still a refusal (`VersionConflict`, exit 3), saying so.

A process that does not use sagemem (an editor, `git checkout`) takes no lock; such a write
landing in the microseconds between our check and our rename is the one window left open.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import glob
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import forms, shape
from .config import fallback_state_dir, in_first_place, locks_of
from .errors import ConflictNotFound, MemoryNotFound, SagememError, VersionConflict
from .files import TEMP_SUFFIX, read_bytes, read_state, safe_folder, write_atomic
from .locking import exclusive
from .memory import version_of
from .names import check_stored_name, name_key

if TYPE_CHECKING:
    from .forms import ConflictForm

LOCK_TIMEOUT = 30.0
# A record holds two file texts, JSON-escaped (up to 6 bytes a character for control characters).
MAX_RECORD_BYTES = 32 * 1024 * 1024
_CONFLICT_ID = re.compile(r"\A[0-9a-f]{16}\Z")
_RESOLVED_NAME = re.compile(r"\A[0-9a-f]{16}(-\d+)?\Z")
_VERSION = re.compile(r"\A[0-9a-f]{64}\Z")
MIN_PREFIX = 12
_PREFIX = re.compile(r"\A[0-9a-f]{12,64}\Z")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_VERSION_TEXT = shape.nothing_or(shape.matching(_VERSION, "a version (64 hexadecimal digits)"))
_PREFIX_TEXT = shape.nothing_or(shape.matching(_PREFIX, "a version (12 to 64 hexadecimal digits)"))
_SIDE = shape.nothing_or(shape.text)
# A conflict record as `Conflict.to_dict` writes it. The file is a name it had when the write
# was refused: the path rule alone (a rule for new names written since must not hide it).
RECORD = shape.obj(
    {
        "id": shape.matching(_CONFLICT_ID, "a conflict id (16 hexadecimal digits)"),
        "file": shape.passes(check_stored_name, "a memory file name"),
    },
    {
        "format": shape.one_of(forms.CONFLICT),
        "expected_version": _PREFIX_TEXT,
        "disk_version": _VERSION_TEXT,
        "proposed_version": _VERSION_TEXT,
        "created": shape.text,
        "writer": shape.text,
        "reason": shape.text,
        "resolution": shape.nothing_or(shape.one_of("disk", "proposed")),
        "resolved_at": shape.nothing_or(shape.text),
        "disk": _SIDE,
        "proposed": _SIDE,
        "disk_base64": shape.nothing_or(shape.matching(_BASE64, "base64")),
        "proposed_base64": shape.nothing_or(shape.matching(_BASE64, "base64")),
    },
)


@dataclass(frozen=True)
class Conflict:
    """A refused write, kept until a person resolves it.

    `disk` is what was on disk when the write was refused (None if the file was missing);
    `proposed` is what the writer wanted to write (None when a field change could not be
    applied to the file as it is now; `reason` then says what was asked). `resolution` is
    None while the conflict is open, then "disk" or "proposed".
    """

    id: str
    file: str
    expected_version: str | None
    disk_version: str | None
    disk: bytes | None
    proposed: bytes | None
    created: str
    writer: str
    reason: str
    resolution: str | None = None
    resolved_at: str | None = None

    @property
    def kind(self) -> str:
        """What was refused: "duplicate" (a new memory under a name that exists), "unapplied"
        (a field change that could not be applied: nothing to write), "deleted" (the file
        went), else "changed"."""
        if self.proposed is None:
            return "unapplied"
        if self.expected_version is None and self.disk_version is not None:
            return "duplicate"
        return "deleted" if self.disk_version is None else "changed"

    def ending(self) -> str:
        """How a person closes this conflict, in words and commands."""
        resolve = f"sagemem conflicts resolve {self.id}"
        if self.kind == "unapplied":
            return f"nothing was proposed to write: `{resolve} --keep disk` closes it; then change it again"
        if self.kind == "duplicate":
            return (
                f"a new memory was given the name of one that exists: `{resolve} --keep disk` keeps "
                f"the existing one (save the new text under another name first to keep both), "
                f"`{resolve} --keep proposed` replaces it with the new text"
            )
        if self.kind == "deleted":
            return (
                f"the file was deleted before this write landed: `{resolve} --keep proposed` writes it "
                f"back, `{resolve} --keep disk` leaves it deleted"
            )
        return (
            f"the file changed before this write landed: compare with `sagemem conflicts show "
            f"{self.id}`, then `{resolve} --keep disk` or `--keep proposed`"
        )

    def to_dict(self) -> ConflictForm:
        data: ConflictForm = {
            "format": forms.CONFLICT,
            "id": self.id,
            "file": self.file,
            "kind": self.kind,
            "expected_version": self.expected_version,
            "disk_version": self.disk_version,
            "proposed_version": None if self.proposed is None else version_of(self.proposed),
            "created": self.created,
            "writer": self.writer,
            "reason": self.reason,
            "resolution": self.resolution,
            "resolved_at": self.resolved_at,
        }
        # Each side as text, or as base64 (under its own key) when it is not UTF-8.
        text, packed = _encode(self.disk)
        if packed is None:
            data["disk"] = text
        else:
            data["disk_base64"] = packed
        text, packed = _encode(self.proposed)
        if packed is None:
            data["proposed"] = text
        else:
            data["proposed_base64"] = packed
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Conflict:
        """A record as stored, of the shape `RECORD` checks (a state dir may come with a
        clone), else `ValueError`."""
        why = shape.problem(data, RECORD)
        if why:
            raise ValueError(why)
        return cls(
            id=data["id"],
            file=data["file"],
            expected_version=data.get("expected_version"),
            disk_version=data.get("disk_version"),
            disk=_decode(data, "disk"),
            proposed=_decode(data, "proposed"),
            created=data.get("created", ""),
            writer=data.get("writer", ""),
            reason=data.get("reason", ""),
            resolution=data.get("resolution"),
            resolved_at=data.get("resolved_at"),
        )


def conflict_id(file: str, expected: str | None, proposed: bytes | None) -> str:
    digest = hashlib.sha256(f"{name_key(file)}\0{expected or ''}\0".encode())
    digest.update(b"\0none" if proposed is None else proposed)
    return digest.hexdigest()[:16]


def check_version(version: str, *, prefix: bool = False) -> str:
    """A version must be a whole sha256 in hex (with `prefix`, as the CLI allows, at least its
    first 12 digits, as git takes a short hash); anything else is a mistake, not a conflict."""
    pattern = _PREFIX if prefix else _VERSION
    if not isinstance(version, str) or not pattern.match(version):
        wanted = f"at least {MIN_PREFIX} of its" if prefix else "its"
        raise SagememError(
            f"{version!r} is not a version ({wanted} 64 hexadecimal digits, as `read --json` prints)"
        )
    return version


def matches(actual: str | None, expected: str | None) -> bool:
    """Whether the version on disk is the one a writer based its change on: the same, or for a
    short version (the CLI's prefix) the one it begins."""
    if expected is None or actual is None:
        return actual == expected
    return actual == expected or (len(expected) < len(actual) and actual.startswith(expected))


@contextmanager
def file_lock(path: Path, lock_dir: Path | None = None) -> Iterator[None]:
    """Hold the cross-process lock for one file of the memory dir (a memory, or MEMORY.md),
    in `<memory dir>/.sagemem/locks/`, or in `lock_dir` for a harness's own folder, where
    sagemem keeps nothing of its own.

    While it is held nobody else writes that file, so temp files left for it by a killed
    writer are partial copies of writes that never happened: they are removed.
    """
    where = lock_dir if lock_dir is not None else locks_of(path.parent)
    locks = safe_folder(where.parent, where.name)
    with exclusive(locks / f"{name_key(path.name)}.lock", LOCK_TIMEOUT):
        for temp in path.parent.glob(f".{glob.escape(path.name)}.*{TEMP_SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
        yield


def guarded_write(
    path: Path,
    data: bytes,
    expected: str | None,
    *,
    state_dir: Path,
    writer: str = "",
    reason: str = "",
    lock_dir: Path | None = None,
    settling: Conflict | None = None,
) -> str:
    """Write `data` to `path` if its version is still `expected` (None: it must not exist).

    Returns the new version. On a mismatch the attempt is recorded and `VersionConflict` is
    raised; nothing on disk changes. Identical bytes are not rewritten. A write `settling` a
    conflict records no new one: that conflict is brought up to the file as it is now.
    """

    def refused(actual: str | None, current: bytes | None) -> VersionConflict:
        if settling is None:
            return _refuse(path.name, expected, actual, current, data, state_dir, writer, reason)
        _rebase(state_dir, settling, actual, current)
        return VersionConflict(path.name, expected, actual, settling.id, resolving=True)

    with file_lock(path, lock_dir):
        current = on_disk(path)
        actual = None if current is None else version_of(current)
        if not matches(actual, expected):
            raise refused(actual, current)
        if current == data:
            return actual or version_of(data)
        try:
            write_atomic(path, data, create_only=expected is None)
        except FileExistsError:
            # Created behind our back (an editor does not take our lock).
            current = read_bytes(path)
            raise refused(version_of(current), current) from None
    return version_of(data)


def on_disk(path: Path) -> bytes | None:
    """The memory's bytes, or None when there is none at `path`."""
    try:
        return read_bytes(path)
    except MemoryNotFound:
        return None


def record_refusal(
    path: Path, expected: str | None, proposed: bytes | None, state_dir: Path, writer: str, reason: str
) -> VersionConflict:
    """Record a write refused elsewhere (a harness's file tool) in the same conflict queue."""
    disk = on_disk(path)
    actual = None if disk is None else version_of(disk)
    return _refuse(path.name, expected, actual, disk, proposed, state_dir, writer, reason)


def check_unchanged(path: Path, expected: str) -> None:
    """`VersionConflict`, with nothing kept, if `path` is no longer `expected`: for a step
    that proposes no content (a version checked, a memory taken out after a move), whose
    refusal would leave the queue a record with nothing to decide."""
    disk = on_disk(path)
    actual = None if disk is None else version_of(disk)
    if not matches(actual, expected):
        raise VersionConflict(path.name, expected, actual, "")


def refuse_if_changed(path: Path, expected: str | None, state_dir: Path, writer: str, reason: str) -> None:
    """Record and raise a conflict without proposed content if `path` is no longer `expected`
    (for a change that could not even be computed on what is on disk now)."""
    disk = on_disk(path)
    actual = None if disk is None else version_of(disk)
    if not matches(actual, expected):
        raise _refuse(path.name, expected, actual, disk, None, state_dir, writer, reason)


def _refuse(
    file: str,
    expected: str | None,
    actual: str | None,
    disk: bytes | None,
    proposed: bytes | None,
    state_dir: Path,
    writer: str,
    reason: str,
) -> VersionConflict:
    conflict = Conflict(
        id=conflict_id(file, expected, proposed),
        file=file,
        expected_version=expected,
        disk_version=actual,
        disk=disk,
        proposed=proposed,
        created=_now(),
        writer=_mended(str(writer)),
        reason=_mended(str(reason)),
    )

    def keep(place: Path) -> Path:
        path = safe_folder(place, "conflicts") / f"{conflict.id}.json"
        if not os.path.lexists(path):  # the same refused write, reported again, stays one record
            write_atomic(path, _dump(conflict))
        return place

    try:
        place, failure = in_first_place(state_dir, keep)
    except (OSError, SagememError) as exc:
        return VersionConflict(file, expected, actual, conflict.id, kept=False, note=str(exc))
    note = "" if failure is None else f"kept in {place}: {failure}"
    return VersionConflict(file, expected, actual, conflict.id, note=note)


def list_conflicts(state_dir: Path, *, resolved: bool = False) -> list[Conflict]:
    """The open (or resolved) conflicts, from the state dir and its fallback. A record that
    cannot be read is left out (`damaged_records` names it): one bad file, which a clone may
    carry, must not hide every other conflict."""
    found = {}
    for path in _records(state_dir, resolved):
        if path.name not in found:
            with contextlib.suppress(SagememError):
                found[path.name] = _load(path)
    return sorted(found.values(), key=lambda c: (c.created, c.id))


def damaged_records(state_dir: Path) -> list[tuple[Path, str]]:
    """(path, why) of each conflict record, open or resolved, that cannot be read."""
    damaged = []
    for resolved in (False, True):
        for path in _records(state_dir, resolved):
            try:
                _load(path)
            except shape.Damaged as exc:
                damaged.append((path, exc.why))
            except ConflictNotFound:
                continue  # gone since it was listed
    return damaged


def _records(state_dir: Path, resolved: bool) -> Iterator[Path]:
    """The files that should each hold one conflict record, in the state dir and its fallback;
    a folder reached through a link holds none of ours."""
    pattern = _RESOLVED_NAME if resolved else _CONFLICT_ID
    for place in _places(state_dir):
        folder = _conflicts_dir(place) / ("resolved" if resolved else "")
        try:
            safe_folder(place, *folder.relative_to(place).parts, create=False)
        except SagememError:
            continue
        if folder.is_dir():
            yield from sorted(p for p in folder.glob("*.json") if pattern.match(p.stem))


def load_conflict(state_dir: Path, cid: str) -> Conflict:
    """The open conflict `cid`; `ConflictNotFound` for unknown or malformed ids."""
    return _load(_open_record(state_dir, cid))


def _open_record(state_dir: Path, cid: str) -> Path:
    if _CONFLICT_ID.match(cid):
        for place in _places(state_dir):
            path = _conflicts_dir(place) / f"{cid}.json"
            try:
                safe_folder(place, "conflicts", create=False)
            except SagememError:
                continue
            if os.path.lexists(path):
                return path
    raise ConflictNotFound(cid)


def close_conflict(state_dir: Path, conflict: Conflict, resolution: str) -> Conflict:
    """Move an open conflict to `conflicts/resolved/` (where it was kept), stamped with how it
    was resolved. The same refused write can come back and be resolved again: each
    resolution keeps its own record."""
    record = _open_record(state_dir, conflict.id)
    done = Conflict(**{**conflict.__dict__, "resolution": resolution, "resolved_at": _now()})
    folder = safe_folder(record.parent.parent, "conflicts", "resolved")
    target, n = folder / f"{conflict.id}.json", 1
    while os.path.lexists(target):
        n += 1
        target = folder / f"{conflict.id}-{n}.json"
    write_atomic(target, _dump(done), create_only=True)
    os.unlink(record)
    return done


def _rebase(state_dir: Path, conflict: Conflict, actual: str | None, disk: bytes | None) -> None:
    """Bring open conflict `conflict` up to the file as it is now (`disk`, of version
    `actual`): a resolution then writes over what the person saw last, never over an edit they
    did not see. The record keeps its id, so it stays the one conflict."""
    record = _open_record(state_dir, conflict.id)
    write_atomic(record, _dump(replace(conflict, disk_version=actual, disk=disk)))


def redact_conflicts(
    state_dir: Path, scan: Callable[[str], list[Any]], redact_text: Callable[[str, Any], str]
) -> list[str]:
    """Redact the secrets `scan` finds in both sides of every conflict record, open and
    resolved, in place: a resolution can then never write a secret back. A record that cannot
    be read as one is redacted as the text it is."""
    changes = []
    for resolved in (False, True):
        for path in _records(state_dir, resolved):
            label = f"conflict {path.stem}{' (resolved)' if resolved else ''}"
            try:
                conflict = _load(path)
            except SagememError:
                raw = (read_state(path, MAX_RECORD_BYTES) or b"").decode("utf-8", "replace")
                found = scan(raw)
                if found:
                    write_atomic(path, redact_text(raw, found).encode("utf-8"))
                    changes.append(f"{label} (damaged record): {len(found)} redacted")
                continue
            sides = {}
            for side in ("disk", "proposed"):
                data = getattr(conflict, side)
                text = "" if data is None else data.decode("utf-8", "replace")
                found = scan(text) if text else []
                if found:
                    sides[side] = redact_text(text, found).encode("utf-8")
            if sides:
                write_atomic(path, _dump(Conflict(**{**conflict.__dict__, **sides})))
                changes.append(f"{label}: {', '.join(sorted(sides))} redacted")
    return changes


def _places(state_dir: Path) -> list[Path]:
    """The state dir, and its fallback if one was ever made (never made here)."""
    fallback = fallback_state_dir(state_dir)
    return [state_dir] + ([fallback] if fallback is not None and fallback.is_dir() else [])


def _conflicts_dir(state_dir: Path) -> Path:
    return state_dir / "conflicts"


def _load(path: Path) -> Conflict:
    """The record at `path`, which must be of `RECORD`'s shape and hold the id its name says
    (a record under another's name would be resolved, and moved, as that one)."""
    try:
        data = shape.load(path, MAX_RECORD_BYTES, shape.anything)
        if data is None:
            raise ConflictNotFound(path.stem)
        conflict = Conflict.from_dict(data)
        if conflict.id != path.stem.split("-")[0]:
            raise ValueError(f"it holds conflict {conflict.id}, not the one its name says")
        return conflict
    except shape.Damaged as exc:
        raise shape.Damaged(path, f"conflict record is damaged ({exc.why})") from None
    except ValueError as exc:
        raise shape.Damaged(path, f"conflict record is damaged ({exc})") from None


def _dump(conflict: Conflict) -> bytes:
    return (json.dumps(conflict.to_dict(), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _mended(text: str) -> str:
    """A caller's words as UTF-8 can hold them: each lone surrogate (bytes a command line or
    a file name gave that were not UTF-8) becomes U+FFFD, so the refusal is always kept and
    every reader of the queue gets text."""
    return _SURROGATE.sub("\ufffd", text)


def _encode(data: bytes | None) -> tuple[str | None, str | None]:
    """A side of a conflict as (text, None), or (None, base64) when it is not UTF-8."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(data).decode("ascii")


def _decode(data: dict[str, Any], key: str) -> bytes | None:
    if data.get(f"{key}_base64") is not None:
        return base64.b64decode(data[f"{key}_base64"])
    text = data.get(key)
    return None if text is None else str(text).encode("utf-8")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
